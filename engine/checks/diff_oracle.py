"""Diff-oracle: what does a survivor actually change, launch by launch?

A passing check is not evidence of equivalence. For every survivor (and every
mutant a writer claims equivalent) one sandbox job runs the original and the
mutant side by side with the same seed and the same checks, and compares every
tensor argument after every launch, exactly and NaN-aware, naming arguments by
the kernel's parameter names (``harness/oracle.py`` does the work next to the
data and returns only numbers). The result is one sentence per mutant --
"outputs identical on all 12 launches", "outputs differ in Rstd (max abs 316,
first at [3]) on 2 of 2 launches; the test passes anyway" -- plus the numbers.

Identical is evidence, not proof: other inputs may tell the two apart. And when
the mutant's only effect is on masked-off lanes (lanes a GPU never stores, and
never defines without ``other=``), "identical" is marked interpreter-dependent.

An EQUIVALENT claim from a writer gets the oracle's sentence beside it; a claim
the oracle contradicts (outputs differ) is flagged (``oracle.contradiction``) and
the mutant counts as a survivor again: a refuted claim excludes nothing from the score.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from dataclasses import dataclass, replace
from statistics import mean, median

from ..events import CheckFinished, CheckStarted, Event
from ..job import Job, JobResult
from ..records import Mutant, Verdict
from ..stage import StageContext
from ..vocabulary import CHECK_NAMES
from . import harness_jobs

CHECK = CHECK_NAMES["diff-oracle"]
SHOWN_ARGUMENTS = 3


#: mutants compared beside one run of the original in one job at most: the variants run
#: at once, a process each, and one that hangs cuts the others (they run again alone)
PER_JOB = 4


def oracle_job(ctx: StageContext, mutant: Mutant, inner: Job | None = None) -> Job:
    """Original and ``mutant`` side by side on ``inner`` (default: the run's checks; in
    project mode the cases that launch its function, as ``oracle_jobs`` builds it)."""
    if inner is None and ctx.coverage is not None:
        inner = harness_jobs.checks_job(ctx, None, harness_jobs.selected(mutant))
    return _job(ctx, [mutant], inner)


def _job(ctx: StageContext, mutants: list[Mutant], inner: Job | None) -> Job:
    # The variants run at once, again when undefined lanes are poisoned.
    limit = inner.timeout_s if inner is not None else ctx.timeout_s
    pair = (1 + len(mutants)) * limit + 10.0
    request = {
        "job": (inner or harness_jobs.checks_job(ctx, None)).to_json(),
        "kernel": ctx.kernel.own_file()[0],  # where the job holds it (project mode: mutant/)
        "pair_timeout_s": round(pair, 1),
    }
    if len(mutants) == 1:
        request["mutant_source"] = mutants[0].source
    else:
        request["mutant_sources"] = {m.id: m.source for m in mutants}
    return harness_jobs.harness_job(ctx, "oracle:run", CHECK, request, 2 * pair + 15.0)


@dataclass(frozen=True)
class OracleJobs:
    """Oracle jobs for several mutants, up to ``PER_JOB`` beside one run of the original
    in each: ``jobs`` by key, ``members`` the mutants each compares."""

    jobs: dict[str, Job]
    members: dict[str, tuple[str, ...]]

    @property
    def covered(self) -> set[str]:
        """The mutants these jobs compare."""
        return {mid for ids in self.members.values() for mid in ids}

    def per_mutant(
        self, results: dict[str, tuple[JobResult, bool]]
    ) -> dict[str, tuple[JobResult, bool]]:
        """Each mutant's answer, as its own job's would read (``compare``). A mutant a
        job compared with others has none where that job gave no answer or a variant
        of it timed out (the group's deadline cut those still running): run it alone."""
        answers = {}
        for key, (result, cached) in results.items():
            ids = self.members.get(key, ())
            if len(ids) == 1:
                answers[ids[0]] = (result, cached)
            else:
                answers.update(_group_answers(result, cached, ids))
        return answers


def _group_answers(
    result: JobResult, cached: bool, ids: tuple[str, ...]
) -> dict[str, tuple[JobResult, bool]]:
    """The answers of a job that compared several mutants (``ids``), each as its own job's
    would read; none for a mutant it has no answer for or whose variant timed out."""
    data = harness_jobs.harness_data(result, CHECK) or {}
    answers = {}
    for mid in ids:
        one = (data.get("mutants") or {}).get(mid)
        if one is None or one.get("timed_out"):
            continue
        harness = {**(result.extra or {}).get("harness", {}), CHECK: one}
        answers[mid] = (replace(result, extra={**result.extra, "harness": harness}), cached)
    return answers


#: a survivor whose own job ran this many times the median survivor's (and over a
#: second) is compared in a job of its own, started first: a group's job lasts as long
#: as its slowest variant, twice where undefined lanes are poisoned again
SLOW_FACTOR = 3.0


def _own_seconds(ctx: StageContext, mutant: Mutant) -> float:
    """How long the mutant's own job ran (0 where it has no verdict yet)."""
    outcome = ctx.ledger.outcome(mutant.id)
    return outcome.duration_s if outcome is not None else 0.0


def slow_ones(seconds: dict[str, float]) -> set[str]:
    """The mutants (by id) whose own job took ``SLOW_FACTOR`` times the median's."""
    if len(seconds) < 2:
        return set()
    typical = median(seconds.values())
    return {mid for mid, s in seconds.items() if s > 1.0 and s > SLOW_FACTOR * typical}


def oracle_jobs(
    ctx: StageContext,
    mutants: list[Mutant],
    inner: Job | None = None,
    per_job: int = PER_JOB,
    spread: int = 1,
    alone: set[str] | frozenset[str] = frozenset(),
) -> OracleJobs:
    """The oracle's jobs for ``mutants``: at most ``per_job`` in one, and at least
    ``spread`` jobs where there are mutants enough (a job holds a worker as long as its
    slowest variant runs). In project mode each runs on the cases that launch its
    mutants' function, not the whole suite. Those in ``alone`` (slow ones) come first, a job each. A job
    of one mutant is ``oracle_job``'s (keyed by its id), a job of several is keyed by
    theirs joined."""
    if inner is None and ctx.coverage is not None:
        return _per_function_jobs(ctx, mutants, per_job, spread, alone)
    jobs, members = {}, {}
    for chunk in _chunks(mutants, per_job, spread, alone):
        if not chunk:
            continue
        key = "+".join(m.id for m in chunk)
        jobs[key] = _job(ctx, chunk, inner)
        members[key] = tuple(m.id for m in chunk)
    return OracleJobs(jobs, members)


def _per_function_jobs(
    ctx: StageContext,
    mutants: list[Mutant],
    per_job: int,
    spread: int,
    alone: set[str] | frozenset[str],
) -> OracleJobs:
    """A library's suite: each mutant beside the original on the cases that launch its
    function only (the whole suite took minutes a module on a CPU), so a job holds
    mutants of one function."""
    groups: dict[str | None, list[Mutant]] = {}
    for m in mutants:
        groups.setdefault(harness_jobs.selected(m), []).append(m)
    jobs: dict[str, Job] = {}
    members: dict[str, tuple[str, ...]] = {}
    for function, group in groups.items():
        inner_f = harness_jobs.checks_job(ctx, None, function)
        part = oracle_jobs(ctx, group, inner_f, per_job, max(1, spread // len(groups)), alone)
        jobs.update(part.jobs)
        members.update(part.members)
    return OracleJobs(jobs, members)


def _chunks(
    mutants: list[Mutant], per_job: int, spread: int, alone: set[str] | frozenset[str]
) -> list[list[Mutant]]:
    """The mutants in ``alone`` one a chunk, then the rest dealt round into at most
    ``per_job`` a chunk, in at least ``spread`` chunks where there are enough (some may
    be empty)."""
    chunks = [[m] for m in mutants if m.id in alone]
    rest = [m for m in mutants if m.id not in alone]
    count = max(math.ceil(len(rest) / max(1, per_job)), min(len(rest), spread - len(chunks)))
    chunks += [rest[i::count] for i in range(count)]
    return chunks


def variant_run(result: JobResult, side: str = "mutant") -> JobResult | None:
    """One side's run of the checks inside an oracle job (a mutant's answer, as
    ``per_mutant`` gives it): what a job of its own running the same checks would
    answer, the sandbox's wrapping aside (``harness/oracle._variant``). None where that
    side did not end in time or the answer has no runs (one cached before they were kept)."""
    data = harness_jobs.harness_data(result, CHECK)
    run = ((data or {}).get("runs") or {}).get(side)
    if data is None or data.get("timed_out") or not run:
        return None
    return replace(JobResult.from_json(run), network_cut=result.network_cut)


def _number(x: float | None) -> str:
    if x is None:
        return "n/a"
    if x == 0 or 1e-3 <= abs(x) < 1e5:
        return f"{x:.3g}"
    return f"{x:.2e}"


def _index(index: list | None) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]" if index is not None else "?"


def _argument(agg: dict, kernels: int) -> str:
    name = agg["argument"] if kernels <= 1 else f"{agg['kernel']}.{agg['argument']}"
    parts = []
    if agg["max_abs"] is not None:
        parts.append(f"max abs {_number(agg['max_abs'])}")
    if agg["nonfinite"]:
        parts.append(f"{agg['nonfinite']} NaN/inf mismatches")
    parts.append(f"first at {_index(agg['first_index'])}")
    return f"{name} ({', '.join(parts)})"


def describe_arguments(by_argument: list[dict]) -> str:
    kernels = len({a["kernel"] for a in by_argument})
    shown = [_argument(a, kernels) for a in by_argument[:SHOWN_ARGUMENTS]]
    more = len(by_argument) - len(shown)
    text = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    return text + (f" and {more} more" if more > 0 else "")


def _launches(n: int) -> str:
    return {1: "the only launch", 2: "both launches"}.get(n, f"all {n} launches")


def sentence(data: dict, verdict: Verdict, checks: int) -> str:
    """The oracle's one sentence for one mutant (without any claim)."""
    if data["timed_out"]:
        return "the oracle could not compare: its runs timed out"
    if data["divergence"]:
        text = f"the launches diverge: {data['divergence']}"
        if data["by_argument"]:
            text += f"; before that, outputs differ in {describe_arguments(data['by_argument'])}"
        return text
    n = data["launches"]
    if n == 0:
        return "the checks launch no kernel: nothing compared, no evidence either way"
    if data["identical"]:
        return f"outputs identical on {_launches(n)}" + _masked_lanes_caveat(data)
    return _differ_sentence(data, n, verdict, checks)


def _masked_lanes_caveat(data: dict) -> str:
    """What an "identical" owes to masked-off lanes, if anything ("" where nothing)."""
    poisoned = data.get("poisoned") or {}
    if data["masked_only"]:
        return (
            "; the mutant changes values only on masked-off lanes, which a GPU never "
            "stores (interpreter-dependent)"
        )
    if poisoned and not poisoned.get("identical", True) and poisoned.get("by_argument"):
        return (
            "; but only because the interpreter fills undefined masked-off lanes with 0: "
            f"with them poisoned, {describe_arguments(poisoned['by_argument'])} "
            "(interpreter-dependent)"
        )
    if data["interpreter_dependent"]:
        return (
            "; the mutant changes values only on masked-off lanes (it leaves them undefined, "
            "the interpreter fills them with 0), which a GPU never stores "
            "(interpreter-dependent)"
        )
    return ""


def _differ_sentence(data: dict, n: int, verdict: Verdict, checks: int) -> str:
    """The sentence for outputs that differ on some of ``n`` launches."""
    where = describe_arguments(data["by_argument"]) if data["by_argument"] else "launch errors"
    k = data["launches_differing"]
    text = f"outputs differ in {where} on {_launches(n) if k == n else f'{k} of {n} launches'}"
    if verdict is Verdict.SURVIVED:
        text += "; the test passes anyway" if checks == 1 else "; the tests pass anyway"
    if data["checks"].get("mutant") not in ("passed", None):
        text += f" (in the oracle's run the mutant's checks {data['checks']['mutant']})"
    return text


def _equivalent_claims(ctx: StageContext, mutant: Mutant) -> list[dict]:
    claims = ctx.ledger.details(mutant.id).get("claims", [])
    return [c for c in claims if isinstance(c, dict) and c.get("claim") == "equivalent"]


def record(ctx: StageContext, mutant: Mutant, result: JobResult) -> tuple[dict, str]:
    """The mutant's ``oracle`` report field and its sentence; its equivalence claims get
    the oracle's sentence (through the ledger)."""
    claims = _equivalent_claims(ctx, mutant)
    field, text = compare(ctx, mutant, result, claims)
    if claims:
        said = claims[0]["oracle"]  # compare's sentence for the claims

        def heard(had: list) -> list:
            return [
                {**c, "oracle": said}
                if isinstance(c, dict) and c.get("claim") == "equivalent"
                else c
                for c in had
            ]

        ctx.ledger.update_row(mutant.id, "claims", heard, [])
    return field, text


def compare(
    ctx: StageContext, mutant: Mutant, result: JobResult, claims: list[dict] | None = None
) -> tuple[dict, str]:
    """An oracle job's answer as a report field and one sentence. ``claims``: the
    equivalence claims to weigh (they get the sentence; outputs that differ contradict
    them); none when the oracle ran for another reason (a test's kill evidence)."""
    claims = claims or []
    data = harness_jobs.harness_data(result, CHECK)
    verdict = ctx.ledger.verdict(mutant.id) or Verdict.SURVIVED
    if data is None:
        text = f"the oracle could not compare: {harness_jobs.failure(result)}"
        field = {"sentence": text, "launches": 0, "identical": None, "diffs": []}
        field.update({"interpreter_dependent": None, "contradiction": False})
        return field, text
    text = sentence(data, verdict, len(ctx.kernel.checks))
    differs = not data["identical"] and not data["timed_out"]
    contradiction = bool(claims) and differs
    for claim in claims:
        claim["oracle"] = text
    if contradiction:
        text = _contradiction(text, claims)
    return _field(data, text, contradiction), text


def _contradiction(text: str, claims: list[dict]) -> str:
    """The oracle's sentence ``text`` as the contradiction of the writers' ``claims``."""
    who = " and ".join(sorted({c.get("by", "a writer") for c in claims}))
    return f"CONTRADICTION: {who} claims this mutant is equivalent, but {text}"


#: what the report keeps of each differing launch's argument
_DIFF_KEYS = ("launch", "kernel", "argument", "max_abs", "max_rel", "first_index", "count")


def _diffs(diffs: list[dict]) -> list[dict]:
    """The report's copy of the oracle's diffs: ``_DIFF_KEYS`` of each."""
    return [{k: d.get(k) for k in _DIFF_KEYS} for d in diffs]


def _poisoned_field(poisoned: dict | None) -> dict | None:
    """The report's part of the run with undefined masked-off lanes poisoned."""
    if poisoned is None:
        return None
    return {
        "identical": poisoned["identical"],
        "masked_only": poisoned["masked_only"],
        "diffs": _diffs(poisoned["diffs"]),
    }


def _field(data: dict, text: str, contradiction: bool) -> dict:
    """The mutant's ``oracle`` report field from an oracle job's answer."""
    poisoned = data.get("poisoned")
    return {
        "sentence": text,
        "launches": data["launches"],
        "timed_out": data["timed_out"],
        # No launch, no evidence: "identical" needs at least one launch to compare.
        "identical": None if data["timed_out"] or not data["launches"] else data["identical"],
        "diffs": _diffs(data["diffs"]),
        "interpreter_dependent": data["interpreter_dependent"],
        "contradiction": contradiction,
        "masked_only": data["masked_only"],
        # lane digests of every load and store: what "identical" rests on (survivor kinds)
        "active_lanes_differ": data.get("active_lanes_differ"),
        "masked_lanes_differ": data.get("masked_lanes_differ"),
        "undefined_lanes": data["undefined_lanes"],
        "divergence": data["divergence"],
        "poisoned": _poisoned_field(poisoned),
        "checks": data["checks"],
        "seconds": data["seconds"] + (poisoned["seconds"] if poisoned else 0.0),
    }


def diff_oracle_stage(ctx: StageContext, mutants: list[Mutant]) -> Iterator[Event]:
    """Survivor stage (also on claimed-equivalent mutants): compare side by side."""
    summary = {
        "mutants": len(mutants),
        "identical": 0,
        "differs": 0,
        "interpreter_dependent": 0,
        "contradictions": 0,
        "errors": 0,
        "seconds_per_mutant": None,
        "skipped": None,
    }
    yield from harness_jobs.publishing(ctx, CHECK, summary, _diff_oracle(ctx, mutants, summary))


def _diff_oracle(ctx: StageContext, mutants: list[Mutant], summary: dict) -> Iterator[Event]:
    """The check's work; ``summary`` goes into the run's ``checks`` section when it ends."""
    yield CheckStarted(None, CHECK, total=len(mutants))
    if ctx.settings.mode != "interpret":
        why = "it traces launches in Triton's interpreter; this run is in compiled mode"
        summary["skipped"] = why
        yield CheckFinished(None, CHECK, f"diff-oracle skipped: {why}", 0, len(mutants))
        return
    durations: list[float] = []
    done = yield from _compare_all(ctx, mutants, summary, durations)
    if durations:
        summary["seconds_per_mutant"] = round(mean(durations), 3)
    yield CheckFinished(None, CHECK, overall(summary), done, len(mutants))


def _compare_all(
    ctx: StageContext, mutants: list[Mutant], summary: dict, durations: list[float]
) -> Generator[Event, None, int]:
    """Run the oracle's jobs and record each answer; returns how many were answered.

    Several mutants beside one run of the original in a job; those a job of several
    gave no answer (one of them hung and cut the others) run again alone."""
    by_id = {m.id: m for m in mutants}
    done = 0
    todo = list(mutants)
    slow = slow_ones({m.id: _own_seconds(ctx, m) for m in mutants})
    for per_job in (PER_JOB, 1):
        jobs = oracle_jobs(ctx, todo, per_job=per_job, spread=ctx.workers, alone=slow)
        done, todo = yield from _oracle_round(
            ctx, jobs, by_id, (done, len(mutants)), summary, durations
        )
        if not todo:
            break
    return done


def _oracle_round(
    ctx: StageContext,
    jobs: OracleJobs,
    by_id: dict[str, Mutant],
    progress: tuple[int, int],
    summary: dict,
    durations: list[float],
) -> Generator[Event, None, tuple[int, list[Mutant]]]:
    """Run one round of the oracle's jobs and record each answer; ``progress``: how many
    were answered before it, of how many. Returns how many are answered now and the
    mutants left without an answer."""
    done, total = progress
    todo: list[Mutant] = []
    for event in ctx.run_jobs(jobs.jobs):
        members = [by_id[mid] for mid in jobs.members[event.key]]
        if event.result is None:  # started
            for mutant in members:
                yield CheckStarted(mutant, CHECK)
            continue
        answers = jobs.per_mutant({event.key: (event.result, event.cached)})
        todo += [m for m in members if m.id not in answers]
        for mid, (answer, _) in answers.items():
            mutant = by_id[mid]
            done += 1
            field, text = _recorded(ctx, mutant, answer, len(members), summary, durations)
            yield CheckFinished(mutant, CHECK, text, done, total)
            if field["contradiction"]:
                yield from _refuted(ctx, mutant, field)
    return done, todo


def _recorded(
    ctx: StageContext,
    mutant: Mutant,
    answer: JobResult,
    sharing: int,
    summary: dict,
    durations: list[float],
) -> tuple[dict, str]:
    """Put one mutant's answer in the ledger and count it in ``summary``; each of the
    ``sharing`` mutants of a job counts its share of the job's seconds."""
    field, text = record(ctx, mutant, answer)
    ctx.ledger.put_row(mutant.id, CHECK, field)
    if field["identical"] is None:
        summary["errors"] += 1
    else:
        durations.append(answer.duration_s / sharing)
        summary["identical" if field["identical"] else "differs"] += 1
    summary["interpreter_dependent"] += bool(field["interpreter_dependent"])
    summary["contradictions"] += field["contradiction"]
    return field, text


def _refuted(ctx: StageContext, mutant: Mutant, field: dict) -> Iterator[Event]:
    """A claim the evidence contradicts excludes nothing from the score: the mutant is
    a survivor again; the claim and the contradiction stay on record."""
    evidence = f"EQUIVALENT claim contradicted by the diff-oracle: {field['sentence']}"
    outcome = ctx.ledger.refute(mutant.id, evidence, stage=CHECK)
    yield from ctx.updated(mutant, outcome)


def overall(summary: dict) -> str:
    if summary.get("skipped"):
        return f"diff-oracle skipped: {summary['skipped']}"
    line = (
        f"diff-oracle: {summary['mutants']} mutants, {summary['identical']} identical "
        f"({summary['interpreter_dependent']} interpreter-dependent), "
        f"{summary['differs']} differ"
    )
    if summary["errors"]:
        line += f", {summary['errors']} not compared"
    if summary["contradictions"]:
        line += f"; {summary['contradictions']} EQUIVALENT claims contradicted"
    if summary["seconds_per_mutant"] is not None:
        line += f"; {summary['seconds_per_mutant']:.2f} s per mutant"
    return line
