"""The tolerance stage's jobs of the original start beside the mutant phase, at the first
survivor of each function, and the stage takes them instead of running them again."""

from __future__ import annotations

import time

from mutant_gate.engine.checks import CHECKS
from mutant_gate.engine.checks.tolerance import original_job, tolerance_ahead, tolerance_stage
from mutant_gate.engine.job import CheckOutcome, JobResult, JobStatus
from mutant_gate.engine.jobs import JobRunner
from mutant_gate.engine.pipeline import load
from mutant_gate.engine.settings import RunSettings
from mutant_gate.engine.stage import StageContext
from mutant_gate.engine.verdicts import Ledger

from .test_tolerance_check import KERNEL, OWN_CHECK, TESTS


class _Counting:
    """The real sandbox, counting the jobs it runs by cache key."""

    def __init__(self, box) -> None:
        self.box, self.ran = box, []

    def run(self, job, on_progress=None):
        self.ran.append(job.cache_key({}))
        return self.box.run(job, on_progress)

    def __getattr__(self, name):
        return getattr(self.box, name)


def test_the_stage_takes_the_original_job_started_ahead(sandbox, tmp_path):
    (tmp_path / "shifted.py").write_text(KERNEL)
    (tmp_path / "test_shifted.py").write_text(TESTS)
    settings = RunSettings(
        kernel_path=str(tmp_path / "shifted.py"),
        tests=(str(tmp_path / "test_shifted.py"),),
        memory_mb=4096,
    )
    kernel, mutants, _, _ = load(settings)
    counting = _Counting(sandbox)
    ledger = Ledger()
    ctx = StageContext(settings, JobRunner(counting, None, "interpret", 2), ledger, kernel, mutants)
    assert CHECKS["tolerance"].ahead is tolerance_ahead  # the driver calls it
    tolerance_ahead(ctx)
    assert counting.ran == [] and not ctx.jobs._ahead  # no survivor known: nothing started
    survivor = mutants[0]
    passed = JobResult(JobStatus.PASSED, (CheckOutcome("test_shifted.py", "passed", 0.1),))
    ledger.judge(survivor.id, passed, False)
    tolerance_ahead(ctx)
    tolerance_ahead(ctx)  # again (another function's first survivor): not started twice
    deadline = time.monotonic() + 120
    while len(counting.ran) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(counting.ran) == 1, counting.ran
    started = counting.ran[0]
    assert started == original_job(ctx, survivor).cache_key({})  # the stage's "o:" job
    events = list(tolerance_stage(ctx, [survivor]))
    assert events
    # the stage ran the survivor's own job (and its proposal's checks), and took the
    # original's from the one started ahead: no job ran twice
    assert counting.ran.count(started) == 1, counting.ran
    assert len(set(counting.ran)) == len(counting.ran) > 1, counting.ran
    assert ledger.row(survivor.id, "tolerance") is not None


def test_the_driver_calls_ahead_at_the_first_survivor_of_each_function(tmp_path):
    from dataclasses import replace

    from mutant_gate.engine.events import MutantFinished
    from mutant_gate.engine.records import MutantOutcome, Verdict
    from mutant_gate.engine.stage import BEFORE_MUTANTS, Stage, ahead_caller

    (tmp_path / "shifted.py").write_text(KERNEL + OWN_CHECK)
    settings = RunSettings(kernel_path=str(tmp_path / "shifted.py"))
    _, mutants, _, _ = load(settings)
    calls: list[str] = []
    stages = [
        Stage("a", lambda ctx, ms: iter(()), ahead=lambda ctx: calls.append("a")),
        Stage("b", lambda ctx, ms: iter(())),  # no ahead
        Stage(
            "c", lambda ctx, ms: iter(()), phase=BEFORE_MUTANTS, ahead=lambda ctx: calls.append("c")
        ),
    ]
    saw = ahead_caller(None, stages)
    m = mutants[0]

    def finished(mutant, verdict):
        return MutantFinished(mutant, MutantOutcome(mutant.id, verdict, None, "", 0.0, False), 1, 1)

    saw(finished(m, Verdict.KILLED))
    assert calls == []  # a kill starts nothing
    saw(finished(m, Verdict.SURVIVED))
    saw(finished(mutants[1], Verdict.SURVIVED))  # the same function again
    assert calls == ["a"]  # the survivors-phase stage's, once
    saw(finished(replace(m, function="other_kernel"), Verdict.SURVIVED))
    saw(finished(replace(m, in_launcher=True), Verdict.SURVIVED))  # every case judges it
    saw(finished(replace(mutants[1], in_launcher=True), Verdict.SURVIVED))
    assert calls == ["a", "a", "a"]
