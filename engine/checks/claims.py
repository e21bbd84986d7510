"""Claims need evidence: an EQUIVALENT claim excludes a mutant only when execution backs it.

Runs after the writers on every survivor that carries a model's EQUIVALENT claim,
whatever the flags (the gate must not depend on remembering ``--diff-oracle``). The
claim is backed only when all of these hold:

- the run is in the interpreter (the oracle traces launches there; compiled mode
  gives no evidence for a claim);
- a check launches the mutated kernel (a mutant no check reaches has no evidence);
- the diff-oracle ran the original and the mutant side by side on the checks and
  found every tensor argument identical after every launch, and identical again with
  undefined masked-off lanes poisoned;
- the probe writer ran on the survivor and found no difference on any of its inputs;
- where the original's own run stores each address from one program per launch (the
  race hint found nothing), so does the survivor's: its checks run once more with the
  interpreter's store trace (``races``). A mutant whose programs store the same values
  to the same addresses (a grid-stride step of 1: every program walks every row)
  gives identical outputs to every value check, oracle included, while it repeats the
  work and races on a GPU; the trace is what tells it from the original.

Then the ledger's ``claim`` rule makes the mutant ``equivalent``; otherwise it stays a
survivor. Either way the claim records what evidence backed or refused it
(``claims[].evidence``). The probe's row ("not distinguished by N probes") is
evidence for a model's claim, never an exclusion by itself: the probe claims nothing.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from dataclasses import replace

from ..events import CheckFinished, CheckStarted, Event
from ..job import Job, JobResult, JobStatus
from ..records import Mutant
from ..stage import StageContext
from ..verdicts import summarize_error
from ..vocabulary import CHECK_NAMES
from . import harness_jobs
from .diff_oracle import CHECK as ORACLE
from .diff_oracle import oracle_job, record

CHECK = CHECK_NAMES["claims"]
RACES = "races"


def pending_claims(ctx: StageContext, mutant: Mutant) -> list[dict]:
    """The model's EQUIVALENT claims on ``mutant`` that no evidence weighed yet."""
    return [c for c in ctx.ledger.row(mutant.id, "claims", []) if _pending(c)]


def _pending(claim: object) -> bool:
    return (
        isinstance(claim, dict)
        and claim.get("claim") == "equivalent"
        and claim.get("by") != "probe"
        and claim.get("evidence") is None
    )


def _traced(ctx: StageContext) -> bool:
    """Whether survivors' stores are traced: in the interpreter, where the original's
    own run found no address stored by two programs of one launch (where it did, the
    same finding on a survivor tells them apart by nothing)."""
    original = ctx.ledger.sections().get(RACES)
    return ctx.settings.mode == "interpret" and original is not None and not original["found"]


def race_field(result: JobResult) -> dict:
    """A survivor's ``races`` row from its traced run."""
    if result.status is not JobStatus.PASSED:
        why = summarize_error(result.error) or result.status.value
        return {"found": None, "why": f"its traced run did not pass: {why}"}
    return {"found": list(result.extra.get("races") or [])}


def refusal(
    ctx: StageContext, mutant: Mutant, oracle: dict | None, races: dict | None = None
) -> str | None:
    """Why the evidence does not back an equivalence claim, or None when it does
    (``races``: the survivor's store trace, where one was taken)."""
    if ctx.settings.mode != "interpret":
        return "no evidence: the oracle compares outputs in the interpreter, this run is compiled"
    if not ctx.ledger.reached(mutant.id):
        return "no evidence: no check launches the mutated kernel"
    return (
        _oracle_refusal(oracle)
        or _probe_refusal(ctx.ledger.details(mutant.id).get("probe"))
        or _store_refusal(races)
    )


def _oracle_refusal(oracle: dict | None) -> str | None:
    """Why the diff-oracle's row does not back a claim, or None when it does."""
    if oracle is None or oracle.get("identical") is None:
        sentence = (oracle or {}).get("sentence", "the oracle did not run")
        return f"no evidence: {sentence}"
    if not oracle.get("launches"):
        return "no evidence: the checks launch no kernel, so nothing was compared"
    if not oracle["identical"]:
        return f"the oracle contradicts it: {oracle['sentence']}"
    poisoned = oracle.get("poisoned")
    if poisoned is not None and not poisoned.get("identical", True):
        return f"the oracle contradicts it with undefined lanes poisoned: {oracle['sentence']}"
    return None


def _probe_refusal(probe: dict | None) -> str | None:
    """Why the probe writer's row does not back a claim, or None when it does."""
    if not probe or not probe.get("probes"):
        why = (probe or {}).get("result") or "the probe writer did not run on it"
        return f"no probe evidence: {why}"
    if probe.get("differs"):
        return f"the probe found a difference: {probe.get('result')}"
    return None


def _store_refusal(races: dict | None) -> str | None:
    """Why the survivor's store trace (where one was taken) does not back a claim."""
    if races is None:
        return None
    if races.get("found") is None:
        return f"no store evidence: {races['why']}"
    if races["found"]:
        return (
            f"its stores differ where the values cannot show it: {races['found'][0]['message']}"
            " (the original's programs never store to one address)"
        )
    return None


def claims_stage(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """Weigh every pending EQUIVALENT claim with execution (see the module docstring)."""
    claimed = [m for m in survivors if pending_claims(ctx, m)]
    if not claimed:
        return
    summary = {"claims": len(claimed), "backed": 0, "refused": 0}
    yield from harness_jobs.publishing(
        ctx, CHECK, summary, _claims(ctx, survivors, claimed, summary)
    )


def _claims(
    ctx: StageContext, survivors: list[Mutant], claimed: list[Mutant], summary: dict
) -> Iterator[Event]:
    """The check's work; ``summary`` goes into the run's ``checks`` section when it ends."""
    yield CheckStarted(None, CHECK, total=len(claimed))
    oracles: dict[str, dict] = {}
    races: dict[str, dict] = {}
    if ctx.settings.mode == "interpret":
        oracles, races = _run_evidence(ctx, claimed)
    for done, mutant in enumerate(claimed, 1):
        why = refusal(ctx, mutant, oracles.get(mutant.id), races.get(mutant.id))
        if why is None:
            line = yield from _backed(ctx, mutant, oracles[mutant.id]["sentence"], summary)
        else:
            _weighed(ctx, mutant, {"backed": False, "why": why})
            summary["refused"] += 1
            line = f"equivalence claim refused, still a survivor: {why}"
        yield CheckFinished(mutant, CHECK, line, done, len(claimed))
    yield CheckFinished(None, CHECK, overall(summary), len(claimed), len(claimed))


def _run_evidence(
    ctx: StageContext, claimed: list[Mutant]
) -> tuple[dict[str, dict], dict[str, dict]]:
    """(oracle rows, store-trace rows) by mutant id, for the claimed mutants a check
    reaches: the diff-oracle's job for each, and a traced run where stores are traced."""
    oracles: dict[str, dict] = {}
    races: dict[str, dict] = {}
    by_id = {m.id: m for m in claimed}
    for event in ctx.run_jobs(_evidence_jobs(ctx, claimed)):
        key, result = event.key, event.result
        if result is None:
            continue
        what, _, mid = key.partition(":")
        if what == RACES:
            races[mid] = race_field(result)
            ctx.ledger.put_row(mid, RACES, races[mid])
            continue
        field, _ = record(ctx, by_id[mid], result)
        ctx.ledger.put_row(mid, ORACLE, field)
        oracles[mid] = field
    return oracles, races


def _evidence_jobs(ctx: StageContext, claimed: list[Mutant]) -> dict[str, Job]:
    """For each claimed mutant a check reaches: its oracle job and, where stores are
    traced, its traced run (keyed ``oracle:ID`` and ``races:ID``)."""
    reached = [m for m in claimed if ctx.ledger.reached(m.id)]
    jobs = {f"{ORACLE}:{m.id}": oracle_job(ctx, m) for m in reached}
    if _traced(ctx):
        for m in reached:
            jobs[f"{RACES}:{m.id}"] = replace(ctx.mutant_job(m), trace_races=True)
    return jobs


def _backed(
    ctx: StageContext, mutant: Mutant, oracle: str, summary: dict
) -> Generator[Event, None, str]:
    """The evidence backs the claims: the mutant is claimed equivalent (and counted in
    ``summary``); returns its line."""
    claims = pending_claims(ctx, mutant)
    reasons = "; ".join(c.get("reason", "") for c in claims)
    probe = ctx.ledger.details(mutant.id)["probe"]["result"]
    evidence = {"backed": True, "oracle": oracle, "probe": probe}
    _weighed(ctx, mutant, evidence)
    outcome = ctx.ledger.claim(
        mutant.id,
        f"claimed by the model (stage 2): {reasons}; backed by execution: {oracle}; probe: {probe}",
        stage=CHECK,
        cached=all(c.get("cached", True) for c in claims),
    )
    summary["backed"] += 1
    yield from ctx.updated(mutant, outcome)
    return f"equivalence claim backed: {oracle}"


def _weighed(ctx: StageContext, mutant: Mutant, evidence: dict) -> None:
    """The evidence on each pending claim of ``mutant``, through the ledger."""
    ctx.ledger.update_row(
        mutant.id,
        "claims",
        lambda had: [{**c, "evidence": evidence} if _pending(c) else c for c in had],
        [],
    )


def overall(summary: dict) -> str:
    return (
        f"equivalence claims: {summary['claims']}, {summary['backed']} backed by execution, "
        f"{summary['refused']} refused"
    )
