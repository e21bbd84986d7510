"""The cases that killed earlier mutants run first (``engine/killers.py``)."""

from __future__ import annotations

import json
import textwrap

import pytest

from mutant_gate.engine.job import Check, CheckKind, CheckOutcome, Job, JobResult, JobStatus
from mutant_gate.engine.killers import Killers

from .conftest import run_cli

TOOLCHAIN = {"mode": "interpret", "python": "3.11", "torch": "2", "triton": "3"}


def _job(stop: bool = True) -> Job:
    return Job(
        files=(("k.py", "x = 1\n"),),
        checks=(
            Check(CheckKind.MAIN, "k.py", "own-check"),
            Check(CheckKind.PYTEST, "test_a.py", "test", select=("a_fast", "a_slow")),
            Check(CheckKind.PYTEST, "test_b.py", "test", select=("b_fast", "b_mid", "b_slow")),
        ),
        stop_on_first_failure=stop,
    )


def _killed_by(case: str) -> JobResult:
    return JobResult(
        JobStatus.FAILED,
        outcomes=(
            CheckOutcome("own-check", "passed", 0.1),
            CheckOutcome(f"test::{case}", "failed", 0.2, "AssertionError"),
        ),
    )


def test_killers_run_first_most_kills_first_and_the_cache_key_stays():
    killers = Killers()
    job = _job()
    assert killers.first(job) is job  # nothing learnt: the fastest-first order
    for case in ("b_slow", "b_slow", "a_slow", "b_mid"):
        killers.learn(_killed_by(case))
    killers.learn(
        JobResult(JobStatus.PASSED, outcomes=(CheckOutcome("test::a_fast", "passed", 0.1),))
    )
    killers.learn(JobResult(JobStatus.FAILED, outcomes=(CheckOutcome("own-check", "failed", 0.1),)))
    ordered = killers.first(job)
    assert [c.name for c in ordered.checks] == ["own-check", "test", "test"]
    assert [c.path for c in ordered.checks] == ["k.py", "test_b.py", "test_a.py"]
    assert [c.select for c in ordered.checks[1:]] == [
        ("b_slow", "b_mid", "b_fast"),
        ("a_slow", "a_fast"),
    ]
    assert ordered.cache_key(TOOLCHAIN) != job.cache_key(TOOLCHAIN)  # the key is the job's
    # a job that runs every case to the end (the original) keeps its order
    whole = _job(stop=False)
    assert killers.first(whole) is whole


def test_a_job_none_of_whose_cases_killed_keeps_its_order():
    killers = Killers()
    killers.learn(_killed_by("elsewhere"))
    job = _job()
    assert killers.first(job) is job


SCALE = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr + offs, x * 2.0 + 1.0, mask=offs < n)


    def scale(x):
        out = torch.empty_like(x)
        scale_kernel[(1,)](x, out, x.numel(), BLOCK=16)
        return out


    if __name__ == "__main__":
        scale(torch.randn(16))
""")

# Six fast cases that launch the kernel and check nothing, and one slower case that checks
# its values: fastest first puts the one that kills last.
SCALE_TESTS = textwrap.dedent("""
    import time

    import pytest
    import torch

    from scale import scale


    @pytest.mark.parametrize("n", range(6))
    def test_runs(n):
        scale(torch.randn(16))


    def test_values():
        end = time.process_time() + 0.3
        while time.process_time() < end:
            pass
        x = torch.randn(16)
        torch.testing.assert_close(scale(x), x * 2.0 + 1.0)
""")


@pytest.mark.slow
def test_a_case_that_killed_runs_first_for_the_next_mutant(tmp_path):
    (tmp_path / "scale.py").write_text(SCALE)
    (tmp_path / "test_scale.py").write_text(SCALE_TESTS)
    proc = run_cli(
        *("run", "scale.py", "--tests", "test_scale.py", "--operators", "arith", "-j", "1"),
        *("--writer", "none", "--no-cache", "--json", "r.json", "-q"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    by_values = [m for m in report["mutants"] if m["by"] == "test:test_values"]
    assert len(by_values) >= 2, report["mutants"]
    assert all(m["verdict"] == "killed" and m["tests_selected"] == 7 for m in by_values)
    # one worker: the first of them ran every case before the killer, the next only it
    runs = [m["tests_run"] for m in by_values]
    assert runs[0] == [*(f"test_runs[{n}]" for n in range(6)), "test_values"], runs
    assert all(run == ["test_values"] for run in runs[1:]), runs
