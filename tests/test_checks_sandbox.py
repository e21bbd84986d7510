"""Compile-check and diff-oracle end to end: real sandbox, real interpreter, real triton.compile."""

from __future__ import annotations

import json

import pytest

from mutant_gate.engine.checks.harness_jobs import harness_data, harness_job
from mutant_gate.engine.events import CheckFinished, RunFinished
from mutant_gate.engine.job import Job, JobStatus
from mutant_gate.engine.kernel_file import load_kernel_file
from mutant_gate.engine.pipeline import Run
from mutant_gate.engine.settings import RunSettings, WriterSettings
from mutant_gate.engine.stage import Stage

from .conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.slow

NO_WRITER = WriterSettings(writer="none")


def drive(run: Run) -> tuple[dict, list]:
    events = list(run.events())
    assert isinstance(events[-1], RunFinished)
    return events[-1].report, events


def rows_by(report: dict, operator: str) -> list[dict]:
    return sorted(
        (m for m in report["mutants"] if m["operator"] == operator), key=lambda m: m["line"]
    )


def test_oracle_names_mean_and_rstd_differences_the_check_lets_through(tmp_path, sandbox):
    # The layer-norm example with the Triton tutorial's tolerance (atol=1e-2): its check
    # compares Y only, so Mean and Rstd may drift unnoticed.
    source = (EXAMPLES / "layer_norm.py").read_text()
    strict = "torch.testing.assert_close(y_tri, y_ref)"
    assert strict in source
    path = tmp_path / "layer_norm.py"
    path.write_text(
        source.replace(strict, "torch.testing.assert_close(y_tri, y_ref, atol=1e-2, rtol=0)")
    )
    settings = RunSettings(
        kernel_path=str(path),
        operators="epsilon-change,cast-fp16",
        use_cache=False,
        writers=NO_WRITER,
        diff_oracle=True,
    )

    def claim_equivalence(ctx, survivors):
        """Stands where a writer's stage runs: claims the epsilon mutant equivalent."""
        for m in survivors:
            if m.operator == "epsilon-change":
                claim = {"by": "stage2", "claim": "equivalent", "reason": "eps is negligible"}
                ctx.ledger.update_row(m.id, "claims", lambda had, c=claim: [*had, c], [])
                yield from ctx.updated(
                    m, ctx.ledger.claim(m.id, "claimed by stage2", stage="stage2")
                )

    run = Run(settings, sandbox, None, extra_stages=(Stage("claims", claim_equivalence),))
    report, events = drive(run)
    json.dumps(report, allow_nan=False)

    (eps,) = rows_by(report, "epsilon-change")
    # A refuted claim excludes nothing: the mutant is a survivor again, and says why.
    assert eps["verdict"] == "survived"
    assert eps["reason"].startswith("EQUIVALENT claim contradicted by the diff-oracle")
    assert eps["id"] not in {e["id"] for e in report["score"]["excluded"]}
    oracle = eps["oracle"]
    assert oracle["identical"] is False and oracle["launches"] == 2
    rstd = [d for d in oracle["diffs"] if d["argument"] == "Rstd"]
    assert rstd and rstd[0]["kernel"] == "_layer_norm_fwd_fused"
    assert rstd[0]["max_abs"] > 0 and rstd[0]["count"] >= 1 and len(rstd[0]["first_index"]) == 1
    assert "Rstd (max abs" in oracle["sentence"]
    # The claim is shown with the oracle's evidence and contradicted, loudly.
    assert oracle["contradiction"] is True
    assert oracle["sentence"].startswith("CONTRADICTION: stage2 claims this mutant is equivalent")
    assert "Rstd" in eps["claims"][0]["oracle"]

    mean_loop = rows_by(report, "cast-fp16")[0]  # the cast in the mean loop
    assert mean_loop["verdict"] == "survived"
    assert "Mean" in {d["argument"] for d in mean_loop["oracle"]["diffs"]}
    assert mean_loop["oracle"]["contradiction"] is False

    summary = report["checks"]["oracle"]
    assert summary["differs"] >= 2 and summary["contradictions"] == 1
    finished = [e for e in events if isinstance(e, CheckFinished) and e.mutant is not None]
    oracle_done = [e for e in finished if e.check == "oracle"]
    assert {e.mutant.id for e in oracle_done} >= {eps["id"], mean_loop["id"]}
    assert {e.check for e in finished} <= {"oracle", "tolerance"}  # each check names itself


def test_other_change_on_masked_off_lanes_is_identical_and_interpreter_dependent(tmp_path):
    path = tmp_path / "r.json"
    proc = run_cli(
        "run",
        str(EXAMPLES / "layer_norm.py"),
        "--diff-oracle",
        "--no-poison",  # the interpreter's zeros on undefined lanes: what the oracle weighs
        "--writer",
        "none",
        "--operators",
        "other-change,other-drop",
        "--json",
        str(path),
        "-v",  # the oracle's counts line too
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(path.read_text())
    # other=0.0 -> 1.0 in the normalisation loop: those lanes are never stored.
    change = [
        m
        for m in rows_by(report, "other-change")
        if "mask=mask" in m["after"] and "other=1.0" in m["after"]
    ]
    assert len(change) == 1 and change[0]["verdict"] == "survived"
    oracle = change[0]["oracle"]
    assert oracle["identical"] is True and oracle["diffs"] == []
    assert oracle["interpreter_dependent"] is True and oracle["masked_only"] is True
    assert "masked-off lanes" in oracle["sentence"]
    # other= dropped in the mean loop: identical only thanks to the interpreter's zero fill;
    # with undefined lanes poisoned, Mean differs (on a GPU it would be garbage).
    drop = rows_by(report, "other-drop")[0]
    assert drop["verdict"] == "survived"
    assert drop["oracle"]["identical"] is True and drop["oracle"]["interpreter_dependent"] is True
    assert drop["oracle"]["poisoned"]["identical"] is False
    assert "Mean" in {d["argument"] for d in drop["oracle"]["poisoned"]["diffs"]}
    assert "poisoned" in drop["oracle"]["sentence"]
    assert "oracle-identical" in proc.stdout and "interpreter-dependent" in proc.stdout


def test_fp16_accumulator_in_matmul_is_compiled_and_recorded(tmp_path):
    path = tmp_path / "r.json"
    proc = run_cli(
        "run",
        str(EXAMPLES / "matmul.py"),
        "--compile-target",
        "sm_75,sm_80",
        "--writer",
        "none",
        "--operators",
        "accumulator-fp16",
        "--json",
        str(path),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(path.read_text())
    (mutant,) = report["mutants"]
    assert "dtype=tl.float16" in mutant["after"]
    compiled = mutant["compile"]
    assert set(compiled) == {"sm_75", "sm_80"}
    for result in compiled.values():
        assert isinstance(result["ok"], bool) and result["seconds"] > 0
        assert isinstance(result["message"], str)
    failed = [t for t, r in compiled.items() if not r["ok"]]
    assert (mutant["verdict"] == "not_compilable") == bool(failed)
    summary = report["checks"]["compile"]
    assert summary["checked_targets"] == ["sm_75", "sm_80"] and summary["skipped"] is None
    assert all(r["ok"] for r in summary["original"].values())
    # Compiled with the signatures of the check's real launches.
    (first, *_) = summary["signatures"]
    assert first["kernel"] == "matmul_kernel"
    assert "a_ptr: *fp16 (divisible by 16)" in first["arguments"]
    assert "BLOCK_SIZE_M=32" in first["arguments"]
    assert "checks on 1 survivor" in proc.stdout


ROW_SUM = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0).to(tl.float32)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def row_sum(x):
    out = torch.empty(1, dtype=torch.float32)
    row_sum_kernel[(1,)](x, out, x.numel(), BLOCK=64)
    return out


if __name__ == "__main__":
    x = torch.randn(300)
    torch.testing.assert_close(row_sum(x)[0], x.sum())
"""


ROW_COUNT = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_count_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.int64)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < n, other=0).to(tl.int64)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def row_count(x):
    out = torch.empty(1, dtype=torch.int64)
    row_count_kernel[(1,)](x, out, x.numel(), BLOCK=64)
    return out


if __name__ == "__main__":
    x = torch.randint(0, 5, (300,), dtype=torch.int32)
    assert row_count(x)[0].item() == x.sum().item()
"""


def test_a_mutant_only_the_compiler_rejects_is_not_compilable(tmp_path):
    # An int64 counter narrowed to int32: the interpreter lets the loop promote acc
    # back to int64 and the check passes; the compiler refuses a loop-carried variable
    # that changes type.
    kernel = tmp_path / "row_count.py"
    kernel.write_text(ROW_COUNT)
    path = tmp_path / "r.json"
    proc = run_cli(
        "run",
        str(kernel),
        "--compile-check",
        "--writer",
        "none",
        "--operators",
        "int-narrow",
        "--json",
        str(path),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(path.read_text())
    (mutant,) = [m for m in report["mutants"] if "dtype=tl.int32" in m["after"]]
    assert mutant["verdict"] == "not_compilable", mutant
    assert "does not compile for sm_75" in mutant["reason"]
    assert "Loop-carried variable acc" in mutant["reason"]
    assert "\n" not in mutant["reason"]
    result = mutant["compile"]["sm_75"]
    assert result["ok"] is False and "Loop-carried variable acc" in result["message"]
    assert "CompilationError" in result["detail"]
    assert {"id": mutant["id"], "verdict": "not_compilable"} in report["score"]["excluded"]
    assert "not_compilable" in proc.stdout and "Loop-carried" in proc.stdout


def test_a_loop_carried_fp16_accumulator_mutant_compiles(tmp_path):
    # accumulator-fp16 on the same loop casts the updates with the initialiser, so the
    # mutant is valid Triton: the compiler accepts it and it is judged on its outputs.
    kernel = tmp_path / "row_sum.py"
    kernel.write_text(ROW_SUM)
    path = tmp_path / "r.json"
    proc = run_cli(
        "run",
        str(kernel),
        "--compile-check",
        "--writer",
        "none",
        "--operators",
        "accumulator-fp16",
        "--json",
        str(path),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    (mutant,) = json.loads(path.read_text())["mutants"]
    assert ".to(tl.float32).to(tl.float16)" in mutant["after"], mutant["after"]
    assert mutant["verdict"] != "not_compilable", mutant
    if mutant["verdict"] == "survived":
        assert mutant["compile"]["sm_75"]["ok"] is True, mutant["compile"]


def test_an_original_the_compiler_rejects_skips_the_compile_check(tmp_path, sandbox):
    kernel = tmp_path / "row_sum.py"
    kernel.write_text(ROW_SUM.replace("dtype=tl.float32", "dtype=tl.float16"))
    settings = RunSettings(
        kernel_path=str(kernel),
        operators="upcast-drop",
        use_cache=False,
        writers=NO_WRITER,
        compile_check=True,
    )
    report, events = drive(Run(settings, sandbox, None))
    (mutant,) = report["mutants"]
    assert mutant["verdict"] == "survived" and "compile" not in mutant
    skipped = report["checks"]["compile"]["skipped"]
    assert "the original does not compile" in skipped and "Loop-carried variable acc" in skipped
    overall = [
        e
        for e in events
        if isinstance(e, CheckFinished) and e.mutant is None and e.check == "compile"
    ]
    assert overall and overall[-1].summary.startswith("compile-check skipped")


def test_trace_captures_the_autotune_config_and_constexprs(sandbox):
    kernel = load_kernel_file(str(EXAMPLES / "axpy_autotune.py"))
    inner = Job(files=kernel.files(None), checks=kernel.checks, timeout_s=120)
    run = Run(RunSettings(kernel_path=str(EXAMPLES / "axpy_autotune.py")), sandbox, None)
    job = harness_job(run, "trace:capture", "trace", {"job": inner.to_json()}, 120)
    data = harness_data(sandbox.run(job), "trace")
    assert data is not None and data["status"] == "passed"
    traced = data["trace"]
    assert traced["launches"] == 2 and not traced["internal_errors"]
    sigs = traced["signatures"]
    assert {s["kernel"] for s in sigs} == {"axpy_kernel"}
    for sig in sigs:
        assert sig["autotune"]["BLOCK_SIZE"] == 128  # the first config: deterministic on CPU
        assert sig["constexprs"]["BLOCK_SIZE"] == 128
        assert sig["options"]["num_warps"] == sig["autotune"]["num_warps"]
        types = dict(zip(sig["params"], sig["types"], strict=True))
        assert types["x_ptr"] == "*fp32" and types["alpha"] == "fp32"
        assert types["n_elements"] == "i32"


def test_a_stage_that_raises_becomes_an_error_section_and_the_report_is_written(sandbox):
    """A survivor stage's bug loses its own work only: each of its mutants says which
    stage failed and why, the run keeps the traceback, the later stages still run and
    the report is written."""
    settings = RunSettings(
        kernel_path=str(EXAMPLES / "softmax.py"),
        operators="program-id-swap",
        use_cache=False,
        writers=NO_WRITER,
        diff_oracle=True,
    )

    def broken(ctx, survivors):
        yield from ()
        raise ZeroDivisionError("a stage's own bug")

    run = Run(settings, sandbox, None, extra_stages=(Stage("broken", broken),))
    report, events = drive(run)
    survivors = [m for m in report["mutants"] if m["verdict"] == "survived"]
    assert survivors
    for row in survivors:
        assert row["error"] == [
            {"stage": "broken", "reason": "ZeroDivisionError: a stage's own bug"}
        ]
        assert row["oracle"]["launches"] >= 1  # the diff-oracle, after it, still ran
    (failed,) = report["stage_errors"]
    assert failed["stage"] == "broken" and "ZeroDivisionError" in failed["traceback"]
    assert sorted(failed["mutants"]) == sorted(m["id"] for m in survivors)
    notes = [e for e in events if getattr(e, "level", "") == "error"]
    assert notes and "the broken stage failed on" in notes[0].message


def _oracle_fields(result) -> dict:
    """What an oracle job found, but the values read past a tensor's end (they vary)."""
    data = harness_data(result, "oracle")
    assert data is not None, result.error
    keys = ("identical", "launches", "divergence", "checks", "timed_out")
    where = ("launch", "kernel", "argument", "count", "first_index")
    return {
        **{k: data[k] for k in keys},
        "diffs": [{k: d[k] for k in where} for d in data["diffs"]],
    }


def test_one_oracle_job_compares_several_mutants_as_their_own_jobs_would(sandbox):
    """Several mutants beside one run of the original: each one's comparison is what
    its own job finds; a mutant that hangs is cut and the job's others are left for a
    job of their own (``per_mutant`` gives none for them), never counted as identical."""
    from dataclasses import replace

    from mutant_gate.engine.checks.diff_oracle import oracle_jobs
    from mutant_gate.engine.jobs import JobRunner
    from mutant_gate.engine.pipeline import load
    from mutant_gate.engine.stage import StageContext
    from mutant_gate.engine.verdicts import Ledger

    settings = RunSettings(kernel_path=str(EXAMPLES / "vector_add.py"), memory_mb=4096)
    kernel, mutants, _, _ = load(settings)
    run = StageContext(
        settings, JobRunner(sandbox, None, "interpret", 1), Ledger(), kernel, mutants
    )
    source = kernel.source
    by_op = {}
    for m in mutants:
        by_op.setdefault(m.operator, m)
    by_op["add-sub"] = next(m for m in mutants if m.before == "x + y")  # same values each run
    chosen = [by_op["add-sub"], by_op["compare-lt-le"], by_op["block-offset-drop"]]
    group = oracle_jobs(run, chosen, per_job=3)
    assert len(group.jobs) == 1
    singles = oracle_jobs(run, chosen, per_job=1)
    assert len(singles.jobs) == 3
    together = group.per_mutant({k: (sandbox.run(j), False) for k, j in group.jobs.items()})
    alone = singles.per_mutant({k: (sandbox.run(j), False) for k, j in singles.jobs.items()})
    assert sorted(together) == sorted(alone) == sorted(m.id for m in chosen)
    for m in chosen:
        assert _oracle_fields(together[m.id][0]) == _oracle_fields(alone[m.id][0]), m.operator
    ours, theirs = (harness_data(r[by_op["add-sub"].id][0], "oracle") for r in (together, alone))
    assert ours["identical"] is False and ours["by_argument"] == theirs["by_argument"]
    # x - y for x + y: every element of the output differs, on the first launch
    assert [(d["argument"], d["launch"], d["count"]) for d in ours["diffs"]] == [
        ("output_ptr", 0, 4097)
    ]

    # One of them hangs in its wrapper: it is cut at the group's deadline, and so is
    # every one still running then; none of them gets an answer from this job.
    hang = replace(
        by_op["add-sub"],
        id="hangs",
        source=source.replace(
            "    output = torch.empty_like(x)\n",
            "    import time\n    time.sleep(600)\n    output = torch.empty_like(x)\n",
        ),
    )
    inner = Job(files=run.kernel.files(None), checks=run.kernel.checks, timeout_s=1.0)
    cut = oracle_jobs(run, [hang, chosen[0]], inner, per_job=2)
    ((key, job),) = cut.jobs.items()
    result = sandbox.run(job)
    data = harness_data(result, "oracle")
    assert data is not None and data["mutants"]["hangs"]["timed_out"] is True
    assert data["mutants"]["hangs"]["identical"] is False
    assert "hangs" not in cut.per_mutant({key: (result, False)})
    assert data["mutants"]["hangs"]["runs"] == {}  # no side's run counts: they were cut


def test_an_oracle_jobs_runs_of_the_checks_are_what_their_own_jobs_answer(sandbox):
    """A proof takes a mutant's run of its test from the oracle job that compares it
    (``variant_run``): each side's run there, original and mutants, says what a job of
    its own running the same checks says (status, the failing check, its message)."""
    from mutant_gate.engine.checks.diff_oracle import oracle_jobs, variant_run
    from mutant_gate.engine.checks.harness_jobs import checks_job
    from mutant_gate.engine.jobs import JobRunner
    from mutant_gate.engine.pipeline import load
    from mutant_gate.engine.stage import StageContext
    from mutant_gate.engine.verdicts import Ledger

    settings = RunSettings(kernel_path=str(EXAMPLES / "vector_add.py"), memory_mb=4096)
    kernel, mutants, _, _ = load(settings)
    run = StageContext(
        settings, JobRunner(sandbox, None, "interpret", 1), Ledger(), kernel, mutants
    )
    by_op = {}
    for m in mutants:
        by_op.setdefault(m.operator, m)
    by_op["add-sub"] = next(m for m in mutants if m.before == "x + y")
    chosen = [by_op["add-sub"], by_op["compare-lt-le"], by_op["block-offset-drop"]]
    group = oracle_jobs(run, chosen, per_job=3)
    ((key, job),) = group.jobs.items()
    answers = group.per_mutant({key: (sandbox.run(job), False)})

    def seen(result):
        failure = result.first_failure
        return (
            result.status,
            failure.name if failure else None,
            result.error.splitlines()[:1],
        )

    statuses = set()
    for m in chosen:
        mine = variant_run(answers[m.id][0])
        assert mine is not None, m.operator
        assert seen(mine) == seen(sandbox.run(checks_job(run, m.source))), m.operator
        statuses.add(mine.status)
        original = variant_run(answers[m.id][0], "original")
        assert original is not None and original.status is JobStatus.PASSED
        assert seen(original) == seen(sandbox.run(checks_job(run, None)))
    assert JobStatus.FAILED in statuses  # x - y fails the own check


VECTOR_ADD_TEST = """
import torch
from vector_add import add


def test_add_fresh_values():
    torch.manual_seed(0)
    x, y = torch.rand(4100), torch.rand(4100)
    torch.testing.assert_close(add(x, y), x + y)
"""


def test_a_probe_proof_runs_its_test_on_the_mutants_with_evidence_jobs_only_there(sandbox):
    """The probe's proof (``prove_killer`` with ``Asked.expected_s``): the proved mutant and the
    others seen to differ run the test inside their evidence (oracle) job, not in a job
    of their own; the kills it makes are those of their own jobs, with their messages.
    A survivor not seen to differ still runs the test in a job of its own."""
    from dataclasses import replace

    from mutant_gate.engine.job import CheckKind, JobResult
    from mutant_gate.engine.jobs import JobRunner
    from mutant_gate.engine.kernel_file import TestFile
    from mutant_gate.engine.pipeline import load
    from mutant_gate.engine.sandbox import Sandbox
    from mutant_gate.engine.stage import StageContext
    from mutant_gate.engine.verdicts import Ledger
    from mutant_gate.engine.writers.proving import Asked, job_with_test, kill_others, prove_killer

    class Counting(Sandbox):  # the real pool; every job it ran, kept
        name, mode = "counting", "interpret"

        def __init__(self, inner):
            self.inner, self.jobs = inner, []
            self.versions, self.size = inner.versions, inner.size

        def run(self, job, on_progress=None):
            self.jobs.append(job)
            return self.inner.run(job, on_progress)

    settings = RunSettings(kernel_path=str(EXAMPLES / "vector_add.py"), memory_mb=4096)
    kernel, mutants, _, _ = load(settings)
    counting = Counting(sandbox)
    ledger = Ledger()
    run = StageContext(settings, JobRunner(counting, None, "interpret", 2), ledger, kernel, mutants)
    add_sub = next(m for m in mutants if m.before == "x + y")
    one_block = next(m for m in mutants if m.operator == "program-id-swap")  # one block written
    other = next(m for m in mutants if m.operator == "compare-lt-le")
    for m in (add_sub, one_block, other):
        ledger.judge(m.id, JobResult(JobStatus.PASSED), cached=False)
    test = TestFile("t.py", "test_vector_add_probe.py", VECTOR_ADD_TEST, origin="probe")
    asked = Asked(test, add_sub, 0.2, (one_block, other), frozenset({one_block.id}))
    proof = prove_killer(run, asked)
    assert proof.ok, proof.why
    tests_run = [
        dict(j.files).get("vector_add.py")
        for j in counting.jobs
        if j.checks[0].kind is CheckKind.PYTEST
    ]
    # the test's jobs: the original's proof and the survivor not seen to differ, no other
    assert sorted(s == kernel.source for s in tests_run) == [False, True]
    assert other.source in tests_run
    oracle = [j for j in counting.jobs if j.checks[0].kind is CheckKind.HARNESS]
    assert len(oracle) == 1  # both mutants seen to differ, beside one run of the original
    # its run on the mutant is the one its own job makes
    alone = sandbox.run(job_with_test(run, test, add_sub.source, settings.seed, 30.0))
    assert proof.mutant.status is alone.status is JobStatus.FAILED
    assert proof.mutant.first_failure.name == alone.first_failure.name
    assert proof.mutant.error.splitlines()[:1] == alone.error.splitlines()[:1]
    # the other one seen to differ is killed from its run there: no job of the test on it
    before = len(counting.jobs)
    kills = kill_others(run, test, [one_block, other], proof.original_s, proof)
    assert one_block.id in [m.id for m, _ in kills]
    assert not [
        j for j in counting.jobs[before:] if dict(j.files).get("vector_add.py") == one_block.source
    ]

    # One expected to run long (it hung on the probe's input): it runs the test in a job
    # of its own, first after the original's, and its evidence job is its own.
    before = len(counting.jobs)
    proof = prove_killer(run, replace(asked, slow=frozenset({one_block.id})))
    assert proof.ok, proof.why
    ran = counting.jobs[before:]
    tests_run = [
        dict(j.files).get("vector_add.py") for j in ran if j.checks[0].kind is CheckKind.PYTEST
    ]
    # the first two jobs the pool took (in either order: two workers take them at once)
    assert {dict(j.files).get("vector_add.py") for j in ran[:2]} == {
        kernel.source,
        one_block.source,
    }
    assert sorted(tests_run) == sorted([kernel.source, one_block.source, other.source])
    oracle = [j for j in ran if j.checks[0].kind is CheckKind.HARNESS]
    assert len(oracle) == 2  # add_sub's, one_block's alone
