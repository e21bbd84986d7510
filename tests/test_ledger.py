"""The verdict ledger: one test per rule of when a verdict may change (engine/verdicts.py)."""

from __future__ import annotations

import pytest

from mutant_gate.engine.job import CheckOutcome, JobResult, JobStatus
from mutant_gate.engine.records import Verdict
from mutant_gate.engine.report import mutant_row
from mutant_gate.engine.verdicts import RULES, Ledger

PASSED = JobResult(JobStatus.PASSED, (CheckOutcome("own-check", "passed", 0.1),), duration_s=0.2)
FAILED = JobResult(
    JobStatus.FAILED,
    (CheckOutcome("own-check", "failed", 0.1, "AssertionError: x"),),
    error="AssertionError: Tensor-likes are not close!",
    duration_s=0.3,
)
CRASHED = JobResult(JobStatus.CRASH, error="killed by signal 11 (SIGSEGV)", signal=11)
BROKEN = JobResult(JobStatus.ERROR, error="RuntimeError: worker died")


def ledger_with(verdict: Verdict) -> Ledger:
    """A ledger whose mutant ``m`` holds ``verdict`` (reached through the rules)."""
    ledger = Ledger()
    first = {Verdict.KILLED: FAILED, Verdict.ERROR: BROKEN}.get(verdict, PASSED)
    ledger.judge("m", first, cached=False)
    if verdict is Verdict.EQUIVALENT:
        assert ledger.claim("m", "the model says so", stage="stage2") is not None
    if verdict is Verdict.NOT_COMPILABLE:
        assert ledger.set_aside("m", "does not compile for sm_75", stage="compile") is not None
    if verdict is Verdict.FLAKY:  # two runs near the CPU limit disagreed (engine/steady.py)
        record = {"reason": "two runs disagree near the CPU limit", "runs": [{}, {}]}
        ledger.flaky("m", record, 1.0, False, stage="mutants")
    assert ledger.verdict("m") is verdict
    return ledger


def kill(ledger: Ledger):
    return ledger.kill(
        "m",
        by="test:test_tail",
        reason="AssertionError",
        duration_s=0.4,
        cached=False,
        stage="probe",
        evidence="test_tail passes the original and fails the mutant",
    )


def test_a_job_decides_the_first_verdict_and_a_second_judgement_is_a_recorded_change():
    ledger = Ledger()
    first = ledger.judge("m", PASSED, cached=True)
    assert (first.verdict, first.by, first.cached) == (Verdict.SURVIVED, None, True)
    assert "changes" not in ledger.details("m")  # the first verdict is no change
    second = ledger.judge("m", CRASHED, cached=False, stage="rerun")
    assert (second.verdict, second.by) == (Verdict.KILLED, "crash")
    (change,) = ledger.details("m")["changes"]
    assert change == {
        "stage": "rerun",
        "was": "survived",
        "now": "killed",
        "evidence": "killed by signal 11 (SIGSEGV)",
    }


def test_a_harness_failure_is_an_error_never_a_kill():
    assert Ledger().judge("m", BROKEN, cached=False).verdict is Verdict.ERROR


@pytest.mark.parametrize("start", list(Verdict))
def test_kill_takes_survivors_and_refutes_claims_only(start):
    ledger = ledger_with(start)
    outcome = kill(ledger)
    if start in (Verdict.SURVIVED, Verdict.EQUIVALENT):
        assert outcome is not None and outcome.verdict is Verdict.KILLED
        assert (outcome.by, outcome.reason) == ("test:test_tail", "AssertionError")
        change = ledger.details("m")["changes"][-1]
        assert (change["stage"], change["was"], change["now"]) == ("probe", start, "killed")
        assert "fails the mutant" in change["evidence"]
    else:
        assert outcome is None and ledger.verdict("m") is start


@pytest.mark.parametrize("start", list(Verdict))
def test_set_aside_takes_survivors_and_claimed_mutants_only(start):
    ledger = ledger_with(start)
    outcome = ledger.set_aside("m", "does not compile for sm_80: boom", stage="compile")
    if start in (Verdict.SURVIVED, Verdict.EQUIVALENT):
        assert outcome is not None and outcome.verdict is Verdict.NOT_COMPILABLE
        assert outcome.reason == "does not compile for sm_80: boom"
    else:
        assert outcome is None and ledger.verdict("m") is start


@pytest.mark.parametrize("start", list(Verdict))
def test_a_claim_takes_survivors_only(start):
    ledger = ledger_with(start)
    outcome = ledger.claim("m", "claimed by the model", stage="stage2")
    if start is Verdict.SURVIVED:
        assert outcome is not None and outcome.verdict is Verdict.EQUIVALENT
    else:
        assert outcome is None and ledger.verdict("m") is start


@pytest.mark.parametrize("start", list(Verdict))
def test_refute_takes_claims_only(start):
    ledger = ledger_with(start)
    outcome = ledger.refute("m", "outputs differ in y", stage="oracle")
    if start is Verdict.EQUIVALENT:
        assert outcome is not None and outcome.verdict is Verdict.SURVIVED
        assert outcome.reason == "outputs differ in y"
    else:
        assert outcome is None and ledger.verdict("m") is start


def test_the_rules_name_every_change_method():
    assert set(RULES) == {"kill", "set_aside", "claim", "refute", "unkill"}
    assert all(callable(getattr(Ledger, rule)) for rule in RULES)


@pytest.mark.parametrize("start", list(Verdict))
def test_unkill_takes_kills_only(start):
    ledger = ledger_with(start)
    outcome = ledger.unkill("m", "outputs identical on every launch", stage="stage1")
    if start is Verdict.KILLED:
        assert outcome is not None and outcome.verdict is Verdict.SURVIVED and outcome.by is None
        assert "outputs identical" in outcome.reason
        assert ledger.details("m")["changes"][-1]["stage"] == "stage1"
    else:
        assert outcome is None and ledger.verdict("m") is start


def test_a_claim_is_cached_only_if_the_verdict_and_the_reply_were():
    ledger = Ledger()
    ledger.judge("m", PASSED, cached=True)
    assert ledger.claim("m", "r", stage="stage2", cached=False).cached is False
    ledger.judge("n", PASSED, cached=True)
    assert ledger.claim("n", "r", stage="stage2", cached=True).cached is True


def test_sections_are_declared_and_rows_carry_them():
    ledger = Ledger()
    ledger.judge("m", PASSED, cached=False)
    claim = {"by": "probe", "claim": "equivalent"}
    ledger.update_row("m", "claims", lambda had: [*had, claim], [])
    ledger.row("m", "claims", []).append({"by": "nobody"})  # a copy: changes nothing
    ledger.details("m")["claims"].clear()  # nor does this
    assert ledger.row("m", "claims") == [claim]
    ledger.put_row("m", "oracle", {"sentence": "outputs identical on the only launch"})
    ledger.claim("m", "no difference found", stage="probe")
    with pytest.raises(KeyError, match="undeclared"):
        ledger.put_row("m", "anything", 1)
    with pytest.raises(KeyError, match="undeclared"):
        ledger.section("anything")

    class M:  # the fields mutant_row reads
        id, operator, family, function, line, col = "m", "mask-drop", "masks", "k", 3, 4
        before, after, diff = "a", "b", "-a\n+b"

    row = mutant_row(M, ledger.outcome("m"), ledger.details("m"))  # type: ignore[arg-type]
    assert row["verdict"] == "equivalent"
    assert row["claims"] == [{"by": "probe", "claim": "equivalent"}]
    assert [c["now"] for c in row["changes"]] == ["equivalent"]


def test_restore_carries_a_recorded_row_and_drops_undeclared_fields():
    ledger = Ledger()
    row = {
        "id": "old",
        "verdict": "killed",
        "by": "test:t",
        "reason": "r",
        "duration_s": 1.5,
        "cached": True,
        "oracle": {"sentence": "s"},
        "stray": 1,
    }
    row["changes"] = [{"stage": "probe", "was": "survived", "now": "killed", "evidence": "e"}]
    ledger.restore("new", row, "20261203-000000-abc")
    outcome = ledger.outcome("new")
    assert outcome is not None
    assert (outcome.verdict, outcome.by, outcome.duration_s) == (Verdict.KILLED, "test:t", 1.5)
    details = ledger.details("new")
    assert details["oracle"] == {"sentence": "s"} and "stray" not in details
    # the recorded changes, then the restore itself: what it carried, from where
    assert details["changes"][0] == row["changes"][0]
    restored = details["changes"][-1]
    assert (restored["stage"], restored["now"]) == ("restore", "killed")
    assert "20261203-000000-abc" in restored["evidence"]
    assert len(row["changes"]) == 1  # the recorded row is not changed in place
    ledger.restore("pending", {"verdict": "pending"})
    assert ledger.outcome("pending") is None


def test_a_stage_cannot_reassign_its_context():
    """The stage contract: a stage reads its context and changes the run only through
    the ledger and ``add_tests``; every field is read-only, ``mutants`` a copy."""
    from mutant_gate.engine.jobs import JobRunner
    from mutant_gate.engine.pipeline import load
    from mutant_gate.engine.sandbox.local import LocalSandbox
    from mutant_gate.engine.settings import RunSettings
    from mutant_gate.engine.stage import StageContext

    from .conftest import EXAMPLES

    settings = RunSettings(kernel_path=str(EXAMPLES / "vector_add.py"))
    kernel, mutants, _, _ = load(settings)
    runner = JobRunner(LocalSandbox(1), None, "interpret", 1)  # never started
    ctx = StageContext(settings, runner, Ledger(), kernel, mutants)
    for name in ("kernel", "mutants", "baseline", "timeout_s", "coverage", "settings", "ledger",
                 "jobs", "configs", "baseline_cases", "workers"):  # fmt: skip
        with pytest.raises(AttributeError):
            setattr(ctx, name, None)
    ctx.mutants.clear()
    assert len(ctx.mutants) == len(mutants) > 0
    assert ctx.workers == 1
