"""The probe's price through the real command line and sandbox: the original's run on a
candidate is shared by every survivor probing it, a survivor stops at its first hit,
and one mutant hanging (or faulting on the GPU) in a job shared with another loses
nothing of the other's."""

from __future__ import annotations

import json

import pytest

from .conftest import run_cli

pytestmark = pytest.mark.slow

# The masked-off lanes of the load are never stored: other=0.0 -> 1.0 and -> -inf are
# equivalent, so both survive every probe, and (one family) both plan the same inputs.
SCALE_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, x + 1.0, mask=mask)


def shifted(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
    return out


if __name__ == "__main__":
    x = torch.rand(100)
    torch.testing.assert_close(shifted(x), x + 1.0)
"""


def test_two_survivors_on_the_same_inputs_run_the_original_once_per_input(tmp_path):
    (tmp_path / "scale.py").write_text(SCALE_KERNEL)
    args = ["run", "scale.py", "--operators", "other-change", "--probes", "6", "-j", "2"]
    args += ["--probe-time", "0"]  # the inputs budget alone: the sharing is the subject
    proc = run_cli(*args, "--json", "r.json", "-v", cwd=tmp_path)  # -v: the probe's spend
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = report["mutants"]
    assert len(rows) == 2  # other=0.0 -> 1.0 and -> -inf
    for row in rows:
        assert row["verdict"] == "survived", row
        assert row["probe"]["probes"] == 6, row
        # not found is not equivalent: the words say so, the budget that ran out too
        result = row["probe"]["result"]
        assert result.startswith("not distinguished by 6 probes (kinds base, size, "), result
        assert "; left unprobed when its budget of 6 inputs ran out: " in result, result
        assert "magnitude" in result.split("left unprobed")[1]  # masks try it late
        assert not row["claims"]
    spend = report["writers"]["probe"]["spend"]
    # 6 inputs each, the same 6: the original ran once on each (and once more on the
    # first round's, whose outputs came back whole to the compare jobs), the mutants 12
    assert spend["planned"] == 12
    assert spend["mutant_runs"] == 12
    assert spend["shipped"] == 2  # the first round: two inputs
    assert spend["original_runs"] == 6 + spend["shipped"]
    assert spend["unusable"] == 0 and spend["retried"] == 0
    assert spend["jobs"] >= 2 and spend["seconds"] > 0
    # the original's jobs on the first inputs started beside the mutant phase, once the
    # capture that follows the first survivor came back (and still once per input)
    assert spend["ahead"] >= 1, spend
    assert "probe spend: 12 inputs planned, 12 runs on mutants, 8 on the original " in (
        " ".join(proc.stdout.split())
    )


# The wrapper relaunches until no value is negative (the original never gives one).
# abs-drop gives negatives for negative inputs, which the own check never has: on the
# probe's all-negative input it never returns. The second kernel's add-sub (x - 1.0)
# differs on any input, and no test of the first wrapper can see it.
RELAUNCH_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def magnitude_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.abs(x), mask=mask)


def magnitude(x):
    out = torch.zeros_like(x)
    while True:
        magnitude_kernel[(1,)](x, out, x.numel(), BLOCK=128)
        if not bool((out < 0).any()):
            return out


@triton.jit
def shift_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + 1.0, mask=mask)


def shifted(x):
    out = torch.zeros_like(x)
    shift_kernel[(1,)](x, out, x.numel(), BLOCK=128)
    return out


if __name__ == "__main__":
    x = torch.rand(100)
    assert magnitude(x).shape == shifted(x).shape  # the values are never compared
"""


# As RELAUNCH_KERNEL, but abs-drop's negatives stand for a kernel that faults on a GPU:
# the wrapper raises what torch raises after an illegal access (no GPU runs here). Every
# run after such a fault in the same process would fail for that reason alone.
FAULT_KERNEL = RELAUNCH_KERNEL.replace(
    """    while True:
        magnitude_kernel[(1,)](x, out, x.numel(), BLOCK=128)
        if not bool((out < 0).any()):
            return out""",
    """    magnitude_kernel[(1,)](x, out, x.numel(), BLOCK=128)
    if bool((out < 0).any()):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    return out""",
)

assert FAULT_KERNEL != RELAUNCH_KERNEL  # the replacement took


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kernel", [RELAUNCH_KERNEL, FAULT_KERNEL], ids=["hang", "fault"])
def test_a_mutant_hanging_or_faulting_in_a_shared_job_loses_nothing_of_the_other(tmp_path, kernel):
    (tmp_path / "k.py").write_text(kernel)
    # one worker: the two survivors share one compare job
    args = ["run", "k.py", "--operators", "abs-drop,add-sub", "--probes", "6", "-j", "1"]
    proc = run_cli(*args, "--json", "r.json", "-v", cwd=tmp_path)  # -v: the probe's spend
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    (bad,) = [m for m in report["mutants"] if m["operator"] == "abs-drop"]
    (sub,) = [m for m in report["mutants"] if m["after"] == "x - 1.0"]
    assert [m for m in report["mutants"] if m["verdict"] == "survived"] == []
    spend = report["writers"]["probe"]["spend"]
    # the shared job timed out (or crashed) on abs-drop's side, and only that side paid:
    # the input stays usable, and add-sub ran its inputs again
    assert spend["retried"] == 1 and spend["unusable"] == 0, spend
    # the hang (the fault) became a test, proved like any other
    assert bad["verdict"] == "killed" and bad["by"].startswith("test:"), bad
    # (the learned call with fresh values in [0, 1) first: the same; then large values of
    # both signs: abs-drop's negatives)
    assert bad["probe"]["trigger"] == "magnitude" and bad["probe"]["probes"] == 1
    assert sub["verdict"] == "killed" and sub["by"].startswith("test:test_shifted_"), sub
    # abs-drop's kind killed first, so add-sub's inputs ran again with it in front
    assert sub["probe"]["trigger"] == "magnitude", sub["probe"]
    # its first input differed: no further input of it ran
    assert sub["probe"]["probes"] == 1
    assert spend["mutant_runs"] == 1  # the lost job's runs never came back


def test_the_original_jobs_started_ahead_do_not_follow_which_survivors_are_known(sandbox, tmp_path):
    """The original's jobs the probe starts beside the mutant phase, once the capture comes
    back, are the same whatever verdicts are known by then: none yet, some killed, or all
    survived. Which survivors are known then follows the machine's load; the jobs planned
    from them set the first round's seconds and so what the budget leaves (on a busy
    machine the probe wrote no test where idle it wrote two)."""
    from mutant_gate.engine.job import CheckOutcome, JobResult, JobStatus
    from mutant_gate.engine.jobs import JobRunner
    from mutant_gate.engine.pipeline import load
    from mutant_gate.engine.settings import RunSettings
    from mutant_gate.engine.stage import StageContext
    from mutant_gate.engine.verdicts import Ledger
    from mutant_gate.engine.writers.probe.stage import AHEAD, capture_job, originals_ahead

    (tmp_path / "scale.py").write_text(SCALE_KERNEL)
    settings = RunSettings(kernel_path=str(tmp_path / "scale.py"), memory_mb=4096)
    kernel, mutants, _, _ = load(settings)
    assert len(mutants) >= 4
    killed = JobResult(JobStatus.FAILED, (CheckOutcome("own-check", "failed", 0.1, "no"),))
    passed = JobResult(JobStatus.PASSED, (CheckOutcome("own-check", "passed", 0.1),))
    known = {
        "none yet": {},
        "every other killed": {m.id: killed for m in mutants[::2]},
        "all survived": {m.id: passed for m in mutants},
    }
    captured = None
    planned = {}
    for name, results in known.items():
        ledger = Ledger()
        for mutant_id, result in results.items():
            ledger.judge(mutant_id, result, False)
        ctx = StageContext(
            settings, JobRunner(sandbox, None, "interpret", 2), ledger, kernel, mutants
        )
        ctx.jobs.cancel.set()  # the plan only: nothing is started
        if captured is None:
            captured = sandbox.run(capture_job(ctx))
            assert captured.status is JobStatus.PASSED, captured.error
        originals_ahead(ctx, captured)
        jobs = ctx.take(AHEAD, [])
        planned[name] = [(job.cache_key({}), [c.id for c in chunk]) for job, chunk in jobs]
    assert planned["none yet"], "no original job planned"
    assert planned["none yet"] == planned["every other killed"] == planned["all survived"]
