"""Evidence before verdicts: no exclusion, kill or claim without execution behind it.

Units read generated tests the way the writers do (``source_problem``) and weigh a
kill's behaviour evidence (``kill_evidence``); the slow tests run whole runs through
the real CLI, the real sandbox, Triton's interpreter and the loopback model server.
"""

from __future__ import annotations

import ast
import json
import textwrap

import pytest

from mutant_gate.engine.job import JobStatus
from mutant_gate.engine.verdicts import kill_evidence
from mutant_gate.engine.writers.reading import source_problem, static_problem

from .conftest import run_cli
from .fake_openai import FakeOpenAI, Reply, python_reply
from .test_writers_llm import SUM_KERNEL

# -- tests that look at the kernel's source instead of its outputs -------------------------
SHA256_TEST = """
import hashlib

import sum_kernel


def test_kernel_file_is_the_original():
    with open(sum_kernel.__file__, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    assert digest == "0" * 64
"""

GETSOURCE_TEST = """
import inspect

import sum_kernel


def test_kernel_source_has_its_mask():
    assert "other=0.0" in inspect.getsource(sum_kernel.sum_kernel.fn)
"""

EXIT_TEST = """
import os

import sum_kernel


def test_passes_by_leaving():
    os._exit(0)
"""

HOOK_TEST = """
import sum_kernel


def pytest_runtest_makereport(item, call):
    pass


def test_nothing():
    pass
"""

#: Reads its own kernel file through names no static reading can see: only the
#: behaviour check (the oracle, with this test as the only check) refuses its kills.
DISGUISED_TEST = """
import hashlib
import importlib

import torch

from sum_kernel import total

EXPECTED = None


def test_fingerprint():
    module = importlib.import_module("sum_" + "kernel")
    path = getattr(module, "__fi" + "le__")
    reader = getattr(importlib.import_module("path" + "lib").Path(path), "read_" + "bytes")
    torch.manual_seed(0)
    x = torch.randn(64)
    total(x)  # launches the kernel, and ignores what it computed
    digest = hashlib.sha256(reader()).hexdigest()
    assert digest == "ORIGINAL_SHA"
"""


@pytest.mark.parametrize(
    ("code", "why"),
    [
        (SHA256_TEST, "opens files"),
        (GETSOURCE_TEST, "imports inspect"),
        (EXIT_TEST, "._exit"),
        (HOOK_TEST, "pytest hook"),
        ("import linecache\nimport sum_kernel\ndef test_a():\n    pass\n", "linecache"),
        ("import sum_kernel\ndef test_a():\n    assert sum_kernel.__file__\n", "__file__"),
        (
            "import pathlib\nimport sum_kernel\ndef test_a():\n    pathlib.Path('sum_kernel.py').read_text()\n",
            ".read_text",
        ),
        ("import mutant_gate.engine\nimport sum_kernel\ndef test_a():\n    pass\n", "mutant_gate"),
    ],
)
def test_tests_that_read_code_or_forge_are_refused_before_they_run(code, why):
    problem = static_problem(textwrap.dedent(code), "sum_kernel")
    assert problem is not None and problem.startswith("refused before it ran: ")
    assert why in problem


@pytest.mark.parametrize(
    "code",
    [
        # the probe writer's golden values: its own data file, named by a literal
        "import json, pathlib\nimport k\n"
        "E = json.loads(pathlib.Path(__file__).with_name('k_probe.json').read_text())\n"
        "def test_a():\n    assert E\n",
        # a look at the sandbox's own environment (no Python file)
        "import k\ndef test_a():\n    with open('/proc/self/environ', 'rb') as fh:\n"
        "        assert fh.read() is not None\n",
        "import torch\nfrom k import total\ndef test_a():\n    x = torch.randn(5)\n"
        "    torch.testing.assert_close(total(x), x.sum())\n",
    ],
)
def test_tests_that_look_at_outputs_or_their_own_data_pass_the_reading(code):
    assert source_problem(ast.parse(code)) is None


LAUNCHED_IDENTICAL = {"launches": 3, "identical": True, "sentence": "outputs identical on all 3"}
LAUNCHED_DIFFER = {"launches": 3, "identical": False, "sentence": "outputs differ in y"}


@pytest.mark.parametrize(
    ("status", "oracle", "mode", "counts"),
    [
        (JobStatus.FAILED, LAUNCHED_DIFFER, "interpret", True),
        (JobStatus.FAILED, LAUNCHED_IDENTICAL, "interpret", False),
        (
            JobStatus.FAILED,
            {"launches": 0, "identical": None, "sentence": "no launch"},
            "interpret",
            False,
        ),
        (JobStatus.FAILED, None, "interpret", False),
        (JobStatus.BOUNDS, None, "interpret", True),
        (
            JobStatus.TIMEOUT,
            {"launches": 2, "identical": None, "timed_out": True, "sentence": "t"},
            "interpret",
            True,
        ),
        (JobStatus.CRASH, LAUNCHED_IDENTICAL, "interpret", False),
        (
            JobStatus.CRASH,
            {**LAUNCHED_IDENTICAL, "divergence": "launch 2 differs"},
            "interpret",
            True,
        ),
    ],
)
def test_a_generated_kill_counts_only_through_what_the_kernel_did(status, oracle, mode, counts):
    why = kill_evidence(status, oracle, mode)
    assert (why is None) is counts, why
    if oracle is LAUNCHED_IDENTICAL and status is JobStatus.FAILED:
        assert "identical on every launch" in why


# -- whole runs ------------------------------------------------------------------------------
SECRET = "sk-test-evidence-7"


#: A jit stub no check launches; the wrapper computes with torch.
FAKE_KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        y = tl.load(y_ptr + offs, mask=mask, other=0.0)
        tl.store(out_ptr + offs, x + y, mask=mask)


    def add(x, y):
        return x + y  # never launches add_kernel


    if __name__ == "__main__":
        x, y = torch.randn(100), torch.randn(100)
        torch.testing.assert_close(add(x, y), x + y)
""")


def _env() -> dict:
    return {"NEBIUS_API_KEY": SECRET, "OPENAI_API_KEY": ""}


@pytest.mark.slow
def test_a_kernel_no_check_launches_gives_no_evidence_and_runs_no_mutant_job(tmp_path):
    from mutant_gate.cache import Store

    (tmp_path / "fake_add.py").write_text(FAKE_KERNEL)
    proc = run_cli(
        "run",
        "fake_add.py",
        "--json",
        "r.json",
        "--cache-dir",
        "c",
        "--diff-oracle",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = report["mutants"]
    assert len(rows) >= 5
    for row in rows:
        assert row["verdict"] == "survived", row
        assert row["reason"].startswith("kernel never launched by any check"), row
        assert row["reached"] is False and row["duration_s"] == 0
        assert "oracle" not in row  # nothing to compare: never "identical"
    assert report["score"]["excluded"] == [] and report["score"]["adjusted"] == 0
    own = report["own_check"]
    assert own["asserts"] is False and "no check launches" in own["evidence"]
    assert "launches no kernel" in own["note"]
    with Store(str(tmp_path / "c")) as store:
        stored = store.counts()["results"]
    assert stored < len(rows), f"{stored} job results stored for {len(rows)} unreached mutants"


BRANCHY = """
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, SQUARE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    if SQUARE:
        y = x * x + 1.0
    else:
        y = x * 2.0
    tl.store(out_ptr + offs, y, mask=mask)


def scale(x, square=False):
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), SQUARE=square, BLOCK=64)
    return out


if __name__ == "__main__":
    x = torch.rand(100)
    torch.testing.assert_close(scale(x), x * 2.0)
"""


@pytest.mark.slow
def test_a_constexpr_branch_no_check_takes_is_not_reached_and_runs_no_job(tmp_path):
    """The original's run records the kernel file's executed lines: mutants on the
    SQUARE branch, which the check never takes, are survivors with no job; the taken
    branch's mutants run and die."""
    (tmp_path / "branchy.py").write_text(BRANCHY)
    proc = run_cli("run", "branchy.py", "--writer", "none", "--json", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((tmp_path / "r.json").read_text())["mutants"]
    square = [r for r in rows if r["line"] == 13]
    taken = [r for r in rows if r["line"] == 15]
    assert square and taken
    for row in square:
        assert row["verdict"] == "survived" and row["reached"] is False, row
        assert row["reason"].startswith("line 13 never executed by any check"), row
        assert row["duration_s"] == 0
    assert all(r["verdict"] == "killed" and r.get("reached", True) for r in taken), taken


@pytest.mark.slow
def test_stage1_tests_that_read_the_source_are_refused_and_a_disguised_one_kills_nothing(
    tmp_path,
):
    import hashlib

    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    disguised = DISGUISED_TEST.replace(
        "ORIGINAL_SHA", hashlib.sha256(SUM_KERNEL.encode()).hexdigest()
    )
    script = [python_reply(SHA256_TEST), python_reply(GETSOURCE_TEST), python_reply(disguised)]
    with FakeOpenAI(script) as fake:
        proc = run_cli(
            "run",
            "sum_kernel.py",
            "--operators",
            "masks",
            "--writer",
            "llm",
            "--probes",
            "4",
            "--base-url",
            fake.base_url,
            "--json",
            "r.json",
            "--cache-dir",
            "c",
            cwd=tmp_path,
            env=_env(),
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    attempts = report["stage1"]["attempts"]
    assert attempts[0]["why"].startswith("refused before it ran: it opens files"), attempts
    assert attempts[1]["why"].startswith("refused before it ran: it imports inspect"), attempts
    assert report["stage1"]["accepted"]["attempt"] == 3  # it passes the original
    # ...and fails every mutant in its job, but its kills rest on no output: refused.
    assert not [r for r in report["mutants"] if r["by"] == "test:test_fingerprint"]
    unkilled = [
        r
        for r in report["mutants"]
        if any(c["stage"] == "stage1" and c["was"] == "killed" for c in r.get("changes", []))
    ]
    assert unkilled, [r.get("changes") for r in report["mutants"]]
    for row in unkilled:
        change = next(c for c in row["changes"] if c["stage"] == "stage1")
        assert "identical on every launch" in change["evidence"], change
    test = next(t for t in report["tests"] if t["name"].endswith("test_fingerprint"))
    assert test["kills"] == []


# -- compiled mode: what a failure says --------------------------------------------------------
COMPILED_CRASH = """Traceback (most recent call last):
  File "/tmp/mg-job/vector_add.py", line 48, in <module>
    output = add(x, y)
  File "/tmp/mg-job/vector_add.py", line 30, in add
    add_kernel[grid](x, y, output, n, BLOCK_SIZE=1024)
  File "/usr/lib/python3.11/site-packages/triton/runtime/jit.py", line 390, in <lambda>
    return lambda *args, **kwargs: self.run(grid=grid, *args, **kwargs)
RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered
"""

COMPILE_FAILURE = """Traceback (most recent call last):
  File "/tmp/mg-job/matmul.py", line 90, in <module>
    c = matmul(a, b)
triton.compiler.errors.CompilationError: at 41:8:
        accumulator = tl.dot(a, b, accumulator)
        ^
AssertionError('Loop-carried variable accumulator has initial type <[128, 128], fp16> but is re-assigned to <[128, 128], fp32> in loop!')
"""


def test_a_compiled_crash_keeps_the_cuda_error_and_the_frame_in_the_file():
    from mutant_gate.engine.job import CheckOutcome, JobResult
    from mutant_gate.engine.verdicts import decide

    result = JobResult(JobStatus.CRASH, (CheckOutcome("own-check", "failed", 1.0),), COMPILED_CRASH)
    verdict, by, reason = decide(result)
    assert (verdict.value, by) == ("killed", "crash")
    assert reason == "an illegal memory access was encountered (at vector_add.py:30 in add)"


def test_a_mutant_that_does_not_compile_is_not_compilable_in_every_mode():
    from mutant_gate.engine.job import CheckOutcome, JobResult
    from mutant_gate.engine.verdicts import decide

    failed = CheckOutcome("own-check", "failed", 1.0, COMPILE_FAILURE)
    verdict, by, reason = decide(JobResult(JobStatus.FAILED, (failed,), COMPILE_FAILURE))
    assert (verdict.value, by) == ("not_compilable", None)
    assert reason.startswith("does not compile: triton.compiler.errors.CompilationError: at 41:8")
    # The compiler's message and the failing line, not the kernel's first source lines.
    assert "Loop-carried variable accumulator has initial type" in reason, reason
    assert reason.endswith("(in `accumulator = tl.dot(a, b, accumulator)`)"), reason


def test_a_compile_error_reason_skips_the_kernel_source_printed_before_the_caret():
    from mutant_gate.engine.verdicts import compile_error

    text = COMPILE_FAILURE.replace(
        "        accumulator = tl.dot",
        "def matmul_kernel(a_ptr, b_ptr, c_ptr,\n    M, N, K,\n"
        "    for k in range(0, K):\n        accumulator = tl.dot",
    )
    message = compile_error(text)
    assert "def matmul_kernel" not in message and "M, N, K" not in message, message
    assert "Loop-carried variable" in message, message


INTERPRETED_TYPE_ERROR = """Traceback (most recent call last):
  File "/tmp/mg-job/vector_add.py", line 30, in add
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=256)
triton.runtime.errors.InterpreterError: IncompatibleTypeErrorImpl('invalid operands of type pointer<fp32> and triton.language.float32')
"""
INTERPRETED_AXIS_ERROR = """Traceback (most recent call last):
  File "/tmp/mg-job/softmax.py", line 41, in softmax
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=256)
triton.runtime.errors.InterpreterError: InterpreterError('ValueError("axis 1 out of bounds for shape [\'constexpr[256]\']")')
"""
INTERPRETED_VALUE_MISMATCH = """Traceback (most recent call last):
  File "/tmp/mg-job/softmax.py", line 60, in <module>
    torch.testing.assert_close(y, ref)
triton.runtime.errors.InterpreterError: InterpreterError('ValueError("operands could not be aligned")')
"""


@pytest.mark.parametrize(
    ("text", "compiles"),
    [(INTERPRETED_TYPE_ERROR, False), (INTERPRETED_AXIS_ERROR, False),
     (INTERPRETED_VALUE_MISMATCH, True)],
)  # fmt: skip
def test_the_interpreters_front_end_errors_are_not_compilable_its_run_time_errors_kill(
    text, compiles
):
    from mutant_gate.engine.job import CheckOutcome, JobResult
    from mutant_gate.engine.verdicts import decide

    failed = CheckOutcome("own-check", "failed", 1.0, text)
    verdict, by, reason = decide(JobResult(JobStatus.FAILED, (failed,), text))
    if compiles:
        assert (verdict.value, by) == ("killed", "own-check")
    else:
        assert (verdict.value, by) == ("not_compilable", None)
        assert reason.startswith("does not compile: triton.runtime.errors.InterpreterError: ")


def test_memchecks_first_error_is_kept_not_its_summary():
    from mutant_gate.engine.harness.job_process import first_memcheck_error

    report = (
        "========= COMPUTE-SANITIZER\n"
        "========= Invalid __global__ write of size 4 bytes\n"
        "=========     at add_kernel+0x1b0 in /tmp/mg/vector_add.py:30\n"
        "=========     by thread (1,0,0) in block (3,0,0)\n"
        "=========     Address 0x7f3c00000400 is out of bounds\n"
        "=========\n"
        "========= ERROR SUMMARY: 16 errors were not printed\n"
    )
    assert first_memcheck_error(report) == (
        "Invalid __global__ write of size 4 bytes at add_kernel+0x1b0 by thread (1,0,0) in "
        "block (3,0,0): Address 0x7f3c00000400 is out of bounds"
    )
    assert first_memcheck_error("========= ERROR SUMMARY: 16 errors") is None
    # The access error wins over the API error it causes, whichever is printed first.
    api = (
        "========= Program hit cudaErrorLaunchFailure (error 719) due to "
        '"unspecified launch failure" on CUDA API call to cudaGetLastError.\n'
        "=========     Saved host backtrace up to driver entry point at error\n"
    )
    assert first_memcheck_error(api + report).startswith("Invalid __global__ write")
    assert first_memcheck_error(api).startswith("Program hit cudaErrorLaunchFailure")


#: Its check launches the kernel itself and tolerates a lot, so arithmetic mutants that
#: change the outputs survive it. The probe learns the launch; the test below leaves it
#: only a kind a launch cannot vary (dtype: the recorded launch keeps its tensors), so it
#: has nothing to try and its words are all the model's.
LOOSE_KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)


    if __name__ == "__main__":
        torch.manual_seed(0)
        x = torch.randn(100)
        y = torch.empty(100)
        affine_kernel[(2,)](x, y, 100, BLOCK=64)
        assert (y - (2 * x + 1)).abs().max() < 10.0  # loose on purpose
""")


@pytest.mark.slow
def test_a_model_that_claims_every_survivor_equivalent_excludes_nothing_unbacked(tmp_path):
    (tmp_path / "affine.py").write_text(LOOSE_KERNEL)
    with FakeOpenAI(lambda body: Reply("EQUIVALENT: the change cannot matter.")) as fake:
        proc = run_cli(
            "run",
            "affine.py",
            "--stage2",
            "--probe-triggers",
            "dtype",
            "--base-url",
            fake.base_url,
            "--fail-under",
            "100",
            "--json",
            "r.json",
            "--cache-dir",
            "c",
            "--no-diff-oracle",  # claims are weighed by execution even with it off
            cwd=tmp_path,
            env=_env(),
        )
    report = json.loads((tmp_path / "r.json").read_text())
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the gate is not bought by words
    # Only mutants that do not compile leave the score; no EQUIVALENT word does.
    excluded = {e["id"]: e for e in report["score"]["excluded"]}
    rows = {r["id"]: r for r in report["mutants"]}
    assert all(rows[i]["verdict"] == "not_compilable" for i in excluded), excluded
    assert report["settings"]["diff_oracle"] is False
    claimed = [r for r in report["mutants"] if r.get("claims")]
    assert claimed and all(r["verdict"] == "survived" for r in claimed)
    whys = {r["operator"]: r["claims"][0]["evidence"]["why"] for r in claimed}
    differ = [w for w in whys.values() if w.startswith("the oracle contradicts it")]
    assert differ, whys  # the oracle ran without the flag, and saw outputs differ
    assert all(
        w.startswith(("the oracle contradicts it", "no probe evidence")) for w in whys.values()
    ), whys
    assert report["checks"]["claims"]["backed"] == 0


def test_a_gpu_original_given_cpu_tensors_in_compiled_mode_gets_a_hint():
    from mutant_gate.engine.baseline import cpu_tensor_hint

    error = "ValueError: Pointer argument (at 0) cannot be accessed from Triton (cpu tensor?)"
    assert "needs them on the GPU" in cpu_tensor_hint("compiled", error)
    assert cpu_tensor_hint("interpret", error) == ""
    assert cpu_tensor_hint("compiled", "AssertionError: Tensor-likes are not close!") == ""


# Each program doubles every num_programs-th row. With a step of 1 (range-step-change)
# every program doubles every row from its own on: the same values, stored again by
# several programs. Every value check (own check, oracle, probe) sees the original.
STRIDE_KERNEL = textwrap.dedent("""
import torch
import triton
import triton.language as tl


@triton.jit
def rows_kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    start = tl.program_id(0)
    step = tl.num_programs(0)
    for row in tl.range(start, n_rows, step):
        offs = tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0)
        tl.store(out_ptr + row * n_cols + offs, x * 2.0, mask=mask)


def double_rows(x):
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    rows_kernel[(4,)](x, out, n_rows, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out


if __name__ == "__main__":
    x = torch.rand(10, 30)
    torch.testing.assert_close(double_rows(x), x * 2.0)
""")


@pytest.mark.slow
def test_a_claim_on_a_survivor_that_stores_from_several_programs_is_refused(tmp_path):
    (tmp_path / "rows.py").write_text(STRIDE_KERNEL)
    claim = Reply("EQUIVALENT: every row is still written with the same values.")
    with FakeOpenAI(lambda body: claim) as fake:
        proc = run_cli(
            "run", "rows.py", "--operators", "range-step-change", "--writer", "none",
            "--stage2", "--base-url", fake.base_url, "--json", "r.json", cwd=tmp_path,
            env=_env(),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["races"]["found"] == []  # the original: one program per row
    (one,) = [m for m in report["mutants"] if m["after"].endswith(", 1)")]
    # every value check agrees with the claim...
    assert one["oracle"]["identical"] is True and one["oracle"]["launches"] > 0, one
    assert one["probe"]["probes"] > 0 and not one["probe"].get("differs"), one
    # ...and the store trace does not
    found = one["races"]["found"]
    assert found and found[0]["kernel"] == "rows_kernel", one["races"]
    (model,) = [c for c in one["claims"] if c["by"] == "stage2"]
    evidence = model["evidence"]
    assert evidence["backed"] is False, evidence
    assert evidence["why"].startswith("its stores differ where the values cannot show it")
    assert one["verdict"] == "survived"
    assert one["id"] not in {e["id"] for e in report["score"]["excluded"]}
