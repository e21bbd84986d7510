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
    assert steady.near_limit(job, first) == "over"
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
    assert steady.near_limit(job, first) == "over"
    second_job = steady.again(job, "over")
    second = sandbox.run(second_job)
    assert second.status is JobStatus.TIMEOUT
    assert steady.settle((job, first), (second_job, second)) is None
    assert steady.near_limit(second_job, second) is None  # never a third run


def test_a_job_well_under_its_limit_runs_once(sandbox):
    job = burn(0.1, 5.0)
    result = sandbox.run(job)
    assert result.status is JobStatus.PASSED, result.error
    assert steady.near_limit(job, result) is None
    assert steady.near_limit(burn(0.1, 0.11), result) == "under"  # within the margin
