"""Verdicts a CPU limit decided near its edge run once more (``engine/steady.py``): two
outcomes that differ make the mutant flaky, for real in the local sandbox."""

from __future__ import annotations

import textwrap

import pytest

from mutant_gate.engine import steady
from mutant_gate.engine.job import Check, CheckKind, Job, JobStatus
from mutant_gate.engine.report import score
from mutant_gate.engine.verdicts import Ledger

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sandbox(either_sandbox):
    return either_sandbox


def burn(cpu_s: float, limit_s: float) -> Job:
    """A job that uses ``cpu_s`` CPU seconds, under a limit of ``limit_s``."""
    body = f"""
        import time
        end = time.process_time() + {cpu_s}
        while time.process_time() < end:
            pass
    """
    return Job(
        files=(("check.py", textwrap.dedent(body)),),
        checks=(Check(CheckKind.MAIN, "check.py", "own-check"),),
        timeout_s=limit_s,
    )


def test_a_job_just_over_its_limit_runs_again_and_is_flaky_when_the_rerun_passes(sandbox):
    job = burn(2.3, 2.0)
    first = sandbox.run(job)
    assert first.status is JobStatus.TIMEOUT, first.error
    assert steady.in_doubt(job, first) == "over"
    second_job = steady.again(job, "over")
    assert second_job.timeout_s == 2.5 and second_job.attempt == 1
    assert second_job.cache_key({}) != job.cache_key({})  # kept apart in the cache
    second = sandbox.run(second_job)
    assert second.status is JobStatus.PASSED, second.error
    record = steady.settle((job, first), (second_job, second))
    assert record is not None
    assert [r["verdict"] for r in record["runs"]] == ["killed", "survived"]
    assert "against a limit of 2 CPU s" in record["reason"], record["reason"]
    assert "passed (2." in record["reason"] and "limit of 2.5" in record["reason"]
    ledger = Ledger()
    ledger.judge("m1", first, False)
    outcome = ledger.flaky("m1", record, 5.0, False, stage="mutants")
    assert outcome.verdict.value == "flaky"
    assert len(ledger.details("m1")["flaky"]) == 2
    assert ledger.details("m1")["changes"][0]["now"] == "flaky"
    # out of the score: the adjusted score leaves it out, and lists it
    rows = [{"id": "m1", "verdict": "flaky", "by": None}, {"id": "m2", "verdict": "killed"}]
    said = score(rows)
    assert said["adjusted"] == 100.0 and said["raw"] == 50.0
    assert {"id": "m1", "verdict": "flaky"} in said["excluded"]


def test_a_job_far_over_its_limit_keeps_its_timeout(sandbox):
    """Over the margin too: the second run is stopped again, and the timeout stands."""
    job = burn(60, 1.0)
    first = sandbox.run(job)
    assert steady.in_doubt(job, first) == "over"
    second_job = steady.again(job, "over")
    second = sandbox.run(second_job)
    assert second.status is JobStatus.TIMEOUT
    assert steady.settle((job, first), (second_job, second)) is None
    assert steady.in_doubt(second_job, second) is None  # never a third run


def test_a_job_well_under_its_limit_runs_once(sandbox):
    job = burn(0.1, 5.0)
    result = sandbox.run(job)
    assert result.status is JobStatus.PASSED, result.error
    assert steady.in_doubt(job, result) is None
    assert steady.in_doubt(burn(0.1, 0.11), result) == "under"  # within the margin


def fails(message: str) -> Job:
    """A job whose check fails with ``message``."""
    return Job(
        files=(("check.py", f"raise RuntimeError({message!r})\n"),),
        checks=(Check(CheckKind.MAIN, "check.py", "own-check"),),
        timeout_s=30.0,
    )


def test_a_kill_for_want_of_gpu_memory_runs_again_and_a_pass_then_makes_it_flaky(sandbox):
    """The run's jobs share one GPU: a failure that says it ran out of memory may be the
    jobs beside it, so it runs again (alone: ``pipeline._run_again``). Here the second
    run passes, as it did for a real library's tvd mutants run again alone."""
    job = fails("CUDA out of memory. Tried to allocate 2.00 GiB")
    first = sandbox.run(job)
    assert first.status is JobStatus.FAILED, first.error
    assert steady.in_doubt(job, first) == steady.ALONE
    second_job = steady.again(job, steady.ALONE)
    assert second_job.timeout_s == job.timeout_s and second_job.attempt == 1
    assert steady.in_doubt(second_job, first) is None  # never a third run
    second = sandbox.run(burn(0.1, 30.0))  # what a rerun that had the memory gives
    record = steady.settle((job, first), (second_job, second), steady.ALONE)
    assert record is not None
    assert [r["verdict"] for r in record["runs"]] == ["killed", "survived"]
    assert record["reason"].startswith("two runs disagree: the first ran out of GPU memory")
    assert "run again alone: passed" in record["reason"], record["reason"]
    # killed again: one verdict, the second run's
    assert steady.settle((job, first), (second_job, first), steady.ALONE) is None


def test_other_failures_run_once(sandbox):
    result = sandbox.run(fails("assert 1.0 == 2.0"))
    assert result.status is JobStatus.FAILED
    assert steady.in_doubt(fails("x"), result) is None
    assert not steady.out_of_memory(result)
