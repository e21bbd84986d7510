"""What the tolerance hid: each survivor said by the closeness assertion that let it through.

Every job records the closeness assertions its checks make (``harness/closeness.py``: per
test case and line, the tolerances in force and the error each let through). For every
survivor of the user's tests (a mutant only a written test kills is one: the score is the
user's) this check pairs its job's records on the user's tests with the original's on the
same cases (one job of the original per function: the cases that judge its mutants) and
finds the line and case where the mutant needs the most more than the original to pass:
the atol at the call's rtol, else the rtol at its atol, else an atol with rtol 0 (``ROUTES``).
A round value between the two, with room on both sides, is a proposal; it is a kill
condition only once checked: the test runs again with it in force at that line in that case
(``Job.tighten``), the original on ``SEEDS`` seeds (it must pass every one) and the survivor
(it must fail there), each running that case alone. A checked proposal makes the survivor
``hidden by tolerance`` (``survivor_kinds``); otherwise the row says what was observed and that no tolerance was
shown to separate them. Nothing here changes a verdict or a score: it explains survivors
and proposes a test change.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from ..events import CheckFinished, CheckStarted, Event
from ..job import Job, JobResult, JobStatus
from ..kernel_file import GIVEN
from ..records import Mutant, MutantOutcome
from ..stage import Stage, StageContext
from ..vocabulary import CHECK_NAMES, TEST_PREFIX, Verdict
from . import harness_jobs

CHECK = CHECK_NAMES["tolerance"]
#: the original runs with a proposed tolerance on this many seeds, and must pass each
SEEDS = 3
#: a proposal leaves the original this much headroom over its worst error seen
HEADROOM = 2.0
#: the tolerances tried in turn: the atol at the call's rtol, the rtol at its atol, then the
#: atol alone (rtol 0) where the call's own atol and rtol each cover both errors
ROUTES = ("atol", "rtol", "abs")
#: the per-test-line view names this many lines at most
SHOWN_LINES = 5
#: a survivor's line where its tests' run recorded no closeness assertion
NO_ASSERTION = "its tests made no closeness assertion on its run (assert_close, allclose, approx or a helper named for them)"
#: where no line's error grew
NOT_GROWN = "no closeness assertion's error grew on this mutant"


def number(value: object) -> float:
    """A recorded number (``"inf"`` for an infinite one) as a float; nan if absent."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def short(x: float) -> str:
    """A tolerance or an error, in few characters: 0.061, 3.1e-04, inf."""
    if math.isinf(x):
        return "inf"
    return f"{x:.2g}" if x == 0 or 1e-3 <= abs(x) < 1e4 else f"{x:.1e}"


def nice_between(low: float, high: float) -> float | None:
    """A round value (1, 2 or 5 times a power of ten) between ``low`` (the original's
    worst error) and ``high`` (the mutant's) with ``HEADROOM`` on both sides (the
    original's rounding varies with its inputs, and a GPU's with it), nearest their
    geometric mean; None where the two are too close for one."""
    if not high > low >= 0 or math.isnan(high):
        return None
    if math.isinf(high):
        high = max(low, 1e-30) * 1e4
    roomy = [v for v in NICE if v >= HEADROOM * low and v * HEADROOM <= high and v > low]
    if not roomy:
        return None
    target = math.sqrt(low * high) if low > 0 else high / 10
    return min(roomy, key=lambda v: abs(math.log(v / target)))


#: the round values a proposal is drawn from
NICE = tuple(float(f"{m}e{e}") for e in range(-12, 7) for m in (1, 2, 5))


@dataclass(frozen=True)
class Site:
    """One test case's closeness calls of one function at one test line (``case`` empty:
    the calls of every case there, joined)."""

    where: str
    fn: str
    atol: float
    rtol: float
    atol_needed: float
    rtol_needed: float
    max_abs: float
    calls: int
    varied: bool
    nan_mismatch: bool
    case: str = ""

    @property
    def words(self) -> str:
        varied = ", varying by call" if self.varied else ""
        case = f" in {self.case.split('::')[-1]}" if self.case else ""
        return f"{self.where} {self.fn}(atol={short(self.atol)}, rtol={short(self.rtol)}{varied}){case}"

    @property
    def key(self) -> str:
        """The ``Job.tighten`` key of its calls: the line, in its one case where it has one."""
        return f"{self.where}|{self.case}" if self.case else self.where


def sites(result: JobResult | None, written: frozenset[str]) -> dict[tuple[str, str, str], Site]:
    """A job's closeness records by (test line, function, case): the user's tests only,
    not the written ones. Cases stay apart: a line a test parametrises by dtype has a
    float16 case's error beside a float32 case's, and only the latter may show a change."""
    found: dict[tuple[str, str, str], Site] = {}
    for rec in (result.extra.get("closeness") or []) if result is not None else []:
        if not _users_record(rec, written):
            continue
        one = _site(rec)
        was = found.get((one.where, one.fn, one.case))
        found[(one.where, one.fn, one.case)] = one if was is None else _joined(was, one)
    return found


def _users_record(rec: dict, written: frozenset[str]) -> bool:
    """Is ``rec`` a closeness record with its numbers, made at a line of the user's tests?"""
    where = str(rec.get("where") or "")
    if not where or rec.get("stats") is False:
        return False
    return os.path.basename(where.rsplit(":", 1)[0]) not in written


def _site(rec: dict) -> Site:
    """One closeness record as a ``Site``."""
    return Site(
        str(rec.get("where") or ""),
        str(rec.get("fn") or ""),
        number(rec.get("atol")),
        number(rec.get("rtol")),
        number(rec.get("atol_needed")),
        number(rec.get("rtol_needed")),
        number(rec.get("max_abs")),
        int(rec.get("calls") or 1),
        bool(rec.get("varied")),
        bool(rec.get("nan_mismatch")),
        str(rec.get("case") or ""),
    )


def _joined(a: Site, b: Site) -> Site:
    return replace(
        a,
        rtol=max(a.rtol, b.rtol),
        atol_needed=max(a.atol_needed, b.atol_needed),
        rtol_needed=max(a.rtol_needed, b.rtol_needed),
        max_abs=max(a.max_abs, b.max_abs),
        calls=a.calls + b.calls,
        varied=a.varied or b.varied or (a.atol, a.rtol) != (b.atol, b.rtol),
        nan_mismatch=a.nan_mismatch or b.nan_mismatch,
    )


@dataclass(frozen=True)
class Finding:
    """A survivor's closest call: the line, the original's and the mutant's errors there,
    which tolerance separates them (``route``: "atol" at the call's rtol, else "rtol" at
    its atol) and a proposed value between them (None where none fits)."""

    site: Site
    original: Site
    proposal: float | None
    route: str = "atol"

    def needed(self, site: Site) -> float:
        """What ``site`` needs of the route's tolerance to pass: the atol at its rtol, the
        rtol at its atol, or (``abs``: both of its own are loose enough for either) the
        atol with no rtol, its largest absolute error."""
        return {"atol": site.atol_needed, "rtol": site.rtol_needed}.get(self.route, site.max_abs)

    @property
    def tighten(self) -> dict:
        """The tolerances in force at the line while the proposal is checked."""
        if self.route == "atol":
            return {"atol": self.proposal, "rtol": self.site.rtol}
        if self.route == "rtol":
            return {"atol": self.site.atol, "rtol": self.proposal}
        return {"atol": self.proposal, "rtol": 0.0}

    def line(self, checked: bool | None) -> str:
        """The row's sentence; ``checked``: None (not run), True (the original passed the
        proposal on every seed and the mutant failed it), False (it did not)."""
        o, m = self.original, self.site
        head = (
            f"{m.words}: the original passes at max abs {short(o.max_abs)}, "
            f"this mutant at {short(m.max_abs)}"
        )
        if m.nan_mismatch:
            return f"{head}; it has NaN where the original has none and the call passes anyway"
        if self.proposal is None:
            r = self.route if self.route != "abs" else "atol with rtol 0"
            return f"{head}; no {r} separates them (needed: {self._needed_words()})"
        r, p = self._proposal_words()
        if checked:
            return (
                f"{head}; {r} {p} fails the mutant and passes the original (checked, {SEEDS} seeds)"
            )
        if checked is False:
            return f"{head}; {r} {p} was tried and did not separate them"
        return f"{head}; {r} {p} would fail the mutant and pass the original (not checked)"

    def _needed_words(self) -> str:
        """What the original and the mutant each need of the route's tolerance, told apart."""
        o, m = self.original, self.site
        low, high = short(self.needed(o)), short(self.needed(m))
        if low == high:  # apart only past two digits: say more of them
            low, high = f"{self.needed(o):.4g}", f"{self.needed(m):.4g}"
        return f"{low} against {high}"

    def _proposal_words(self) -> tuple[str, str]:
        """(the tolerance proposed, the proposal with what stays as it is)."""
        p = short(self.proposal)
        if self.route == "abs":
            return "atol", f"{p} with rtol 0"
        if self.route == "atol":
            return "atol", f"{p} (rtol {short(self.site.rtol)} as it is)"
        return self.route, f"{p} (atol {short(self.site.atol)} as it is)"


def finding(original: dict, mutant: dict) -> Finding | None:
    """The line where the mutant's error stands furthest above the original's (by the
    ``atol`` each needs at the call's rtol, else the ``rtol`` at its atol), with a
    proposal between them; None where no line's error grew."""
    best: tuple[float, Finding] | None = None
    for key, m in mutant.items():
        o = original.get(key)
        candidate = None if o is None else _grown(o, m)
        if candidate is None:
            continue
        rank = _standing(candidate, o, m)
        if best is None or rank > best[0]:
            best = (rank, candidate)
    return best[1] if best else None


def _standing(candidate: Finding, o: Site, m: Site) -> float:
    """How far the mutant's need stands above the original's at a line: any proposal
    first, then the ratio of the two."""
    low, high = candidate.needed(o), candidate.needed(m)
    ratio = math.inf if low == 0 else high / low
    return (candidate.proposal is not None) * 1e300 + (ratio if not math.isnan(ratio) else 0)


def _grown(o: Site, m: Site) -> Finding | None:
    """The finding at one line where the mutant needs more than the original: of atol
    first, else of rtol; None where it needs no more of either."""
    if m.nan_mismatch:
        return Finding(m, o, None)
    for route in ROUTES:
        found = Finding(m, o, None, route)
        low, high = found.needed(o), found.needed(m)
        if high > low and not math.isinf(low):
            proposal = nice_between(low, high)
            return replace(found, proposal=proposal if proposal and proposal > 0 else None)
    return None


def original_job(ctx: StageContext, mutant: Mutant) -> Job:
    """The original on the user's cases that judge ``mutant``, to the end (its records),
    with the limit a mutant's job on those cases gets."""
    job = users(ctx, harness_jobs.checks_job(ctx, None, harness_jobs.selected(mutant)))
    if ctx.coverage is None:
        return job
    return replace(job, timeout_s=round(ctx.mutant_timeout(ctx.original_s(job.checks)), 1))


def mutant_job(ctx: StageContext, mutant: Mutant) -> Job:
    """``mutant``'s job on the user's tests: the mutant phase's own (served from the cache)
    where no test was written since."""
    return users(ctx, ctx.mutant_job(mutant))


def users(ctx: StageContext, job: Job) -> Job:
    """``job`` without the tests mutant-gate wrote (their files, data and checks)."""
    written = {f for t in ctx.kernel.tests if t.origin != GIVEN for f in (t.name, *dict(t.data))}
    if not written:
        return job
    return replace(
        job,
        files=tuple(f for f in job.files if f[0] not in written),
        checks=tuple(c for c in job.checks if c.path not in written),
    )


def written_kill(ctx: StageContext, mutant: Mutant) -> bool:
    """Whether a test mutant-gate wrote killed ``mutant`` (it survived the user's tests)."""
    name = _killing_test(ctx.ledger.outcome(mutant.id))
    if name is None:
        return False
    sources = (t.source for t in ctx.kernel.tests if t.origin != GIVEN)
    return any(re.search(rf"\bdef {re.escape(name)}\(", s) for s in sources)


def _killing_test(outcome: MutantOutcome | None) -> str | None:
    """The name of the test that killed a mutant (its parameters left off), where a test
    did; else None."""
    by = str(outcome.by or "") if outcome is not None else ""
    if outcome is None or outcome.verdict is not Verdict.KILLED or not by.startswith(TEST_PREFIX):
        return None
    return by.removeprefix(TEST_PREFIX).split("[")[0]


def checking_jobs(ctx: StageContext, mutant: Mutant, found: Finding) -> dict[str, Job]:
    """The proposal in force at its line: the original on ``SEEDS`` seeds, the mutant once;
    each runs only the case the proposal is for, where it names one of a test file's cases
    (``site_case_only``): the tightened call is there, every other case runs as it did."""
    tighten = {found.site.key: found.tighten}
    base = site_case_only(original_job(ctx, mutant), found.site)
    jobs = {
        f"original:{n}": replace(base, tighten=tighten, seed=base.seed + n) for n in range(SEEDS)
    }
    jobs["mutant"] = replace(site_case_only(mutant_job(ctx, mutant), found.site), tighten=tighten)
    return jobs


def site_case_only(job: Job, site: Site) -> Job:
    """``job`` with its one test file check that holds ``site``'s case, selecting that case
    alone; ``job`` as it is where the site names no case (the calls of every case joined, or
    an own check's) or no one check holds it. A proposal is checked where it is in force: a
    job to the end of every case repeated, per seed, the original's whole time on them (on
    a real library's module on an H100, four jobs of about 90 s for one proposal)."""
    path, sep, name = site.case.partition("::")
    if not sep:
        return job
    holding = [c for c in job.checks if name in c.select and _same_file(path, c.path)]
    if len(holding) != 1:
        return job
    return replace(job, checks=(replace(holding[0], select=(name,)),))


def _same_file(nodeid_path: str, check_path: str) -> bool:
    """A case's file (relative to pytest's root) and a check's (relative to the job's
    folder, or absolute where a project's tests are read where they lie): the same file
    where one is the other's tail."""
    a, b = nodeid_path.removeprefix("./"), check_path.removeprefix("./")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def checked(results: dict[str, tuple[JobResult, bool]], site: Site) -> bool | None:
    """True where every original run passed and the mutant's failed at ``site`` itself
    (its record there, in its case, says a call failed with the proposal in force); None
    where a run gave no answer (a timeout, an error)."""
    if len(results) < SEEDS + 1 or not _all_answered(results):
        return None
    originals = all(r.status is JobStatus.PASSED for k, (r, _) in results.items() if k != "mutant")
    mutant = results["mutant"][0]
    failed_there = any(_failed_at(r, site) for r in mutant.extra.get("closeness") or [])
    return originals and mutant.status is JobStatus.FAILED and failed_there


def _all_answered(results: dict[str, tuple[JobResult, bool]]) -> bool:
    """Whether every run passed or failed (none timed out or broke)."""
    return all(r.status in (JobStatus.PASSED, JobStatus.FAILED) for r, _ in results.values())


def _failed_at(rec: dict, site: Site) -> bool:
    """Does closeness record ``rec`` say a call failed at ``site``, in its case?"""
    return bool(
        rec.get("where") == site.where
        and (not site.case or rec.get("case") == site.case)
        and rec.get("failed")
    )


def row_field(found: Finding | None, verdict: bool | None, note: str = "") -> dict:
    """The row's ``tolerance`` section."""
    if found is None:
        return {
            "line": note or NOT_GROWN,
            "hidden": False,
        }
    o, m = found.original, found.site
    return {
        "line": found.line(verdict),
        "where": m.where,
        "case": m.case,
        "fn": m.fn,
        "atol": m.atol,
        "rtol": m.rtol,
        "route": found.route,
        "original": {
            "max_abs": o.max_abs,
            "atol_needed": o.atol_needed,
            "rtol_needed": o.rtol_needed,
        },
        "mutant": {
            "max_abs": m.max_abs,
            "atol_needed": m.atol_needed,
            "rtol_needed": m.rtol_needed,
        },
        "proposal": None if found.proposal is None else found.tighten,
        "checked": verdict,
        "hidden": bool(verdict),
    }


def survivors_of_the_users_tests(ctx: StageContext, mutants: list[Mutant]) -> list[Mutant]:
    """The survivors, and the mutants only a test mutant-gate wrote killed."""
    return [
        m for m in mutants if ctx.ledger.verdict(m.id) is Verdict.SURVIVED or written_kill(ctx, m)
    ]


def tolerance_ahead(ctx: StageContext) -> None:
    """The original's jobs the stage asks for first (one per function with a survivor
    known now), started beside the mutant phase: the stage waited for them after the last
    mutant otherwise (on an H100, 74-90 s of a Liger module's 240-480 s run)."""
    known = [m for m in ctx.mutants if ctx.ledger.verdict(m.id) is Verdict.SURVIVED]
    firsts = {harness_jobs.selected(m): m for m in reversed(known) if ctx.ledger.reached(m.id)}
    ctx.start_ahead(original_job(ctx, m) for m in firsts.values())


@dataclass(frozen=True)
class UsersSurvivors(Stage):
    """A stage over the survivors of the user's tests: it runs only where there is one."""

    def targets(self, ctx: StageContext, mutants: list[Mutant] | None = None) -> list[Mutant]:
        return survivors_of_the_users_tests(ctx, super().targets(ctx, mutants))


def tolerance_stage(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """The check over the survivors of the user's tests (``UsersSurvivors.targets`` chose
    them: every stage runs on its targets)."""
    summary: dict = {"mutants": len(survivors), "hidden": 0, "proposals": 0, "lines": []}
    yield from harness_jobs.publishing(ctx, CHECK, summary, _tolerance(ctx, survivors, summary))


def _written(ctx: StageContext) -> frozenset[str]:
    return frozenset(os.path.basename(t.name) for t in ctx.kernel.tests if t.origin != GIVEN)


def _tolerance(ctx: StageContext, survivors: list[Mutant], summary: dict) -> Iterator[Event]:
    yield CheckStarted(None, CHECK, total=len(survivors))
    findings = _findings(ctx, survivors)
    proposed = {
        m.id: f
        for m in survivors
        if isinstance(f := findings.get(m.id), Finding) and f.proposal is not None
    }
    jobs = {
        f"{m.id}|{name}": job
        for m in survivors
        if m.id in proposed
        for name, job in checking_jobs(ctx, m, proposed[m.id]).items()
    }
    ran = ctx.run_all(jobs)  # every survivor's proposal at once, spread over the workers
    summary["proposals"] = len(proposed)
    rows: dict[str, dict] = {}
    for done, m in enumerate(survivors, 1):
        field = _row(m.id, findings, proposed, ran)
        ctx.ledger.put_row(m.id, CHECK, field)
        rows[m.id] = field
        summary["hidden"] += field["hidden"]
        yield CheckFinished(m, CHECK, field["line"], done, len(survivors))
    summary["lines"] = per_line(rows)
    yield CheckFinished(None, CHECK, overall(summary), len(survivors), len(survivors))


def _row(
    mid: str,
    findings: dict[str, Finding | str],
    proposed: dict[str, Finding],
    ran: dict[str, tuple[JobResult, bool]],
) -> dict:
    """One survivor's ``tolerance`` row: its finding, and whether its proposal (where it
    has one) was checked."""
    found, verdict = findings.get(mid, "no record of its run"), None
    if mid in proposed:
        mine = {k.split("|", 1)[1]: v for k, v in ran.items() if k.split("|", 1)[0] == mid}
        verdict = checked(mine, proposed[mid].site)
    if isinstance(found, Finding):
        return row_field(found, verdict)
    return row_field(None, None, found)


def _findings(ctx: StageContext, survivors: list[Mutant]) -> dict[str, Finding | str]:
    """Each survivor's closest call, from its own job's records (served from the cache)
    and those of the original on the same cases (one job per function); where there is
    none, why (its run recorded no assertion, or no error grew)."""
    written = _written(ctx)
    jobs = {f"m:{m.id}": mutant_job(ctx, m) for m in survivors}
    jobs.update({f"o:{harness_jobs.selected(m)}": original_job(ctx, m) for m in survivors})
    results = ctx.run_all(jobs)
    findings: dict[str, Finding | str] = {}
    for m in survivors:
        mine, theirs = results.get(f"m:{m.id}"), results.get(f"o:{harness_jobs.selected(m)}")
        if mine is None or theirs is None:
            continue
        ours = sites(mine[0], written)
        found = finding(sites(theirs[0], written), ours) if ours else None
        findings[m.id] = found or (NOT_GROWN if ours else NO_ASSERTION)
    return findings


def per_line(rows: dict[str, dict]) -> list[dict]:
    """Per test line, the survivors its tolerance let through with their outputs' error
    grown, and how many the tightest checked proposal there kills (``atol_checked``,
    ``rtol_checked``, ``abs_checked``: an atol with rtol 0; the original's worst need of
    each beside it): most kills first."""
    lines: dict[str, dict] = {}
    for mid, row in rows.items():
        if "where" not in row:
            continue
        one = lines.setdefault(row["where"], _new_line(row))
        one["survivors"].append(mid)
        for need in ORIGINAL_NEEDS:
            field = row["original"].get(need.removeprefix("original_")) or 0.0
            one[need] = max(one[need], field)
        if row["hidden"]:
            _add_kill(one, mid, row)
    return sorted(
        lines.values(), key=lambda x: (-len(x["killed"]), -len(x["survivors"]), x["where"])
    )


def _add_kill(line: dict, mid: str, row: dict) -> None:
    """Count survivor ``mid`` as killed at its line, keeping the tightest checked
    proposal of its route."""
    line["killed"].append(mid)
    route = row.get("route", "atol")
    key, p = f"{route}_checked", row["proposal"]["rtol" if route == "rtol" else "atol"]
    line[key] = p if line[key] is None else min(line[key], p)


#: a per-line entry's field for the original's worst need of each route's tolerance
ORIGINAL_NEEDS = ("original_atol_needed", "original_rtol_needed", "original_max_abs")


def _new_line(row: dict) -> dict:
    return {
        "where": row["where"], "fn": row["fn"], "atol": row["atol"], "rtol": row["rtol"],
        "survivors": [], "killed": [],
        **{f"{route}_checked": None for route in ROUTES},
        **dict.fromkeys(ORIGINAL_NEEDS, 0.0),
    }  # fmt: skip


def line_words(line: dict) -> str:
    """'test_x.py:88 lets 7 survivors through at atol 0.2; at atol 0.002 (the original
    needs 0.0004 there) the checked proposals kill 6' (the rtol, or an atol with rtol 0,
    where only such a proposal did)."""
    n = len(line["survivors"])
    head = f"{line['where']} lets {n} survivor{'s' if n != 1 else ''} through at atol {short(line['atol'])}"
    if not line["killed"]:
        return f"{head}; no checked tolerance separates them"
    route, need = _checked_route(line)
    value = f"{short(line[f'{route}_checked'])}" + (" with rtol 0" if route == "abs" else "")
    name = "rtol" if route == "rtol" else "atol"
    return (
        f"{head}; at {name} {value} (the original needs {short(line.get(need) or 0.0)} there) "
        f"the checked proposals kill {len(line['killed'])}"
    )


def _checked_route(line: dict) -> tuple[str, str]:
    """(the first route with a checked proposal at ``line``, its original-need field);
    atol's where none has one."""
    return next(
        (
            (r, o)
            for r, o in zip(ROUTES, ORIGINAL_NEEDS, strict=True)
            if line.get(f"{r}_checked") is not None
        ),
        ("atol", ORIGINAL_NEEDS[0]),
    )


def overall(summary: dict) -> str:
    line = (
        f"tolerance: {summary['hidden']} of {summary['mutants']} survivors hidden by a "
        f"closeness assertion's tolerance ({summary['proposals']} proposals checked)"
    )
    first = [line_words(x) for x in summary.get("lines", [])[:1] if x["killed"]]
    return line + (f"; {first[0]}" if first else "")
