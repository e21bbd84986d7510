"""Big-index check: kill an overflow mutant that differs only past 2^31 elements.

An ``int64-cast-drop`` or ``int-narrow`` survivor gives the original's outputs on
every input a test can allocate: its int32 offsets wrap only past 2^31 elements.
This check runs the original's checks, then each such survivor's, in the
interpreter with every kernel's first launch replayed at a size past 2^31 elements
along each grid axis (``harness/bigindex.py``: only the last programs run, no memory
is allocated or touched; the original's replay finds which integer arguments grow
with the problem, and each survivor's is replayed the same way). For each kernel and
axis whose original replay stays inside its tensors, a survivor whose replay
addresses memory outside them is ``killed`` by ``big-index`` (the reason says
"differs only past 2^31 elements").

A survivor the check cannot judge says so in its reason, in one line beginning "not
judged by the big-index check:": compiled mode (the replay needs the interpreter),
the original's replay failed or wraps too, its kernel's replay was not kept, or its
kernel loads integers (offsets computed from loaded indices read as zeros in the
replay, so they were never reached). "All checks passed" never hides that the check
did not look.

Per mutant the report gets ``big_index`` (the replays); the run gets
``checks.big_index``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

from ..events import CheckFinished, CheckStarted, Event
from ..job import Job, JobResult
from ..jobs import JobEvent
from ..project import jit_callers
from ..records import Mutant
from ..stage import StageContext
from ..vocabulary import CHECK_NAMES, By
from . import harness_jobs

CHECK = CHECK_NAMES["big-index"]
#: The operators whose mutants only differ past 2^31 elements.
OVERFLOW_OPERATORS = frozenset({"int64-cast-drop", "int-narrow"})


NOT_JUDGED = "not judged by the big-index check"


def _job(
    ctx: StageContext, source: str | None, function: str | None, plans: dict | None = None
) -> Job:
    """The replay of ``source`` (None: the original) on the test cases that launch
    ``function`` (a survivor's), not a library's whole suite."""
    request: dict = {"job": harness_jobs.checks_job(ctx, source, function).to_json()}
    if plans is not None:
        request["plans"] = plans
    return harness_jobs.harness_job(ctx, "bigindex:run", CHECK, request, ctx.settings.timeout_s * 2)


def _not_judged(ctx: StageContext, mutants: list[Mutant], why: str) -> Iterator[Event]:
    """Each of ``mutants`` says in its reason that the check could not judge it."""
    for mutant in mutants:
        ctx.ledger.put_row(mutant.id, CHECK, {"not_judged": why})
        yield from ctx.updated(mutant, ctx.ledger.annotate(mutant.id, f"{NOT_JUDGED}: {why}"))


def _replays(result: JobResult) -> tuple[list[dict] | None, str | None]:
    data = harness_jobs.harness_data(result, CHECK)
    if data is None:
        return None, harness_jobs.failure(result)
    return data["replays"], None


def _replayed_functions(ctx: StageContext, chosen: list[Mutant]) -> list[str | None]:
    """The functions whose cases the original is replayed on (None: every case)."""
    if ctx.coverage is None:  # no record of which cases launch what: every case
        return [None]
    return sorted({harness_jobs.selected(m) for m in chosen}, key=lambda f: f or "")


def _original_replays(
    ctx: StageContext, chosen: list[Mutant]
) -> tuple[list[dict] | None, str | None]:
    """The original's replays on the cases that launch the survivors' functions (one job
    each, where they differ); None and why where one failed."""
    jobs = {f or "": _job(ctx, None, f) for f in _replayed_functions(ctx, chosen)}
    results = {e.key: e.result for e in ctx.run_jobs(jobs) if e.result is not None}
    replays: list[dict] = []
    for key in jobs:
        if key not in results:
            return None, "cancelled"
        found, why = _replays(results[key])
        if found is None:
            return None, why
        replays += [r for r in found if r not in replays]
    return replays, None


def big_index_stage(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """Survivor stage: replay the original, then every overflow survivor, past 2^31."""
    chosen = [m for m in survivors if m.operator in OVERFLOW_OPERATORS]
    summary: dict = {"survivors": len(chosen), "killed": 0, "skipped": None, "original": []}
    if not chosen:
        return
    yield from harness_jobs.publishing(ctx, CHECK, summary, _big_index(ctx, chosen, summary))


def _big_index(ctx: StageContext, chosen: list[Mutant], summary: dict) -> Iterator[Event]:
    """The check's work; ``summary`` goes into the run's ``checks`` section when it ends."""
    yield CheckStarted(None, CHECK, total=len(chosen))
    if ctx.settings.mode != "interpret":
        why = "the replay past 2^31 elements runs in the interpreter only"
        yield from _skipped(ctx, chosen, summary, why, 0)
        return
    original, why = _original_replays(ctx, chosen)
    if original is None:
        yield from _skipped(ctx, chosen, summary, f"the original's replay failed: {why}", 0)
        return
    summary["original"] = original
    clean = _clean_replays(original)
    wraps = _wrapping_kernels(original, clean)
    if wraps:
        summary["original_wraps"] = wraps
    if not clean:
        yield from _skipped(ctx, chosen, summary, _nothing_clean(wraps), len(chosen))
        return
    yield from _replay_survivors(ctx, chosen, clean, original, summary)


def _wrapping_kernels(original: list[dict], clean: dict[tuple[str, int], dict]) -> list[str]:
    """The kernels whose original replay wrapped and none of whose replays stayed clean."""
    return sorted({r["kernel"] for r in original if r.get("wrapped")} - {k for k, _ in clean})


def _nothing_clean(wraps: list[str]) -> str:
    """Why the check skips where no original replay stayed inside its tensors."""
    if wraps:
        return f"the original's offsets wrap past 2^31 elements too ({', '.join(wraps)})"
    return "no kernel's original replay stays inside its tensors past 2^31 elements"


def _skipped(
    ctx: StageContext, chosen: list[Mutant], summary: dict, why: str, total: int
) -> Iterator[Event]:
    """The check does not run: every survivor says why, and so does the summary."""
    summary["skipped"] = why
    yield from _not_judged(ctx, chosen, why)
    yield CheckFinished(None, CHECK, f"big-index check skipped: {why}", 0, total)


def _clean_replays(original: list[dict]) -> dict[tuple[str, int], dict]:
    """The original's replays that scaled and stayed inside their tensors, by (kernel, axis)."""
    return {
        (r["kernel"], r.get("axis", 0)): r
        for r in original
        if r.get("factor") and not r.get("wrapped") and not r.get("error")
    }


def _replay_survivors(
    ctx: StageContext,
    chosen: list[Mutant],
    clean: dict[tuple[str, int], dict],
    original: list[dict],
    summary: dict,
) -> Iterator[Event]:
    """Replay every chosen survivor along the kernels and axes the original keeps clean."""
    plans: dict[str, dict[str, list[str]]] = {}
    for (kernel, axis), r in clean.items():
        plans.setdefault(kernel, {})[str(axis)] = r.get("scaled", [])

    jobs = {m.id: _job(ctx, m.source, harness_jobs.selected(m), plans) for m in chosen}
    by_id = {m.id: m for m in chosen}
    done = 0
    for event in ctx.run_jobs(jobs):
        mutant, result = by_id[event.key], event.result
        if result is None:  # started
            yield CheckStarted(mutant, CHECK)
            continue
        done += 1
        line = yield from _judge(ctx, mutant, event, clean, original, summary)
        yield CheckFinished(mutant, CHECK, line, done, len(chosen))
    yield CheckFinished(
        None,
        CHECK,
        f"big-index check: {summary['killed']} of {len(chosen)} overflow survivors differ "
        "only past 2^31 elements",
        done,
        len(chosen),
    )


def _judge(
    ctx: StageContext,
    mutant: Mutant,
    event: JobEvent,
    clean: dict[tuple[str, int], dict],
    original: list[dict],
    summary: dict,
) -> Generator[Event, None, str]:
    """Record one survivor's replays and kill it where one wraps; returns its line."""
    replays, why = _replays(event.result)
    if replays is None:
        ctx.ledger.put_row(mutant.id, CHECK, {"error": why})
        yield from ctx.updated(
            mutant, ctx.ledger.annotate(mutant.id, f"{NOT_JUDGED}: its replay failed: {why}")
        )
        return f"big-index check failed: {why}"
    ctx.ledger.put_row(mutant.id, CHECK, {"replays": replays})
    wrapped = next(
        (r for r in replays if (r["kernel"], r.get("axis", 0)) in clean and r.get("wrapped")),
        None,
    )
    if wrapped is None:
        line = "no offset wraps in the replay past 2^31 elements"
        blind = _blind_spot(ctx, mutant, clean, original)
        if blind:
            line = f"{NOT_JUDGED}: {blind}"
            yield from ctx.updated(mutant, ctx.ledger.annotate(mutant.id, line))
        return line
    summary["killed"] += 1
    return (yield from _kill(ctx, mutant, event, wrapped))


def _kill(
    ctx: StageContext, mutant: Mutant, event: JobEvent, wrapped: dict
) -> Generator[Event, None, str]:
    """Kill a survivor whose replay wraps where the original's does not; returns the reason."""
    message = wrapped["wrapped"]["message"]
    axis = wrapped.get("axis", 0)
    reason = (
        f"differs only past 2^31 elements: in {wrapped['kernel']} (grid "
        f"{wrapped['grid'][axis]} programs along axis {axis}, last {wrapped['programs']} "
        f"run), {message}"
    )
    evidence = (
        f"the original's replay of {wrapped['kernel']} stays inside its tensors; "
        f"the mutant's {message}"
    )
    outcome = ctx.ledger.kill(
        mutant.id,
        by=By.BIG_INDEX.value,
        reason=reason,
        duration_s=event.result.duration_s,
        cached=event.cached,  # a rerun serves the replay from the cache
        stage=CHECK,
        evidence=evidence,
    )
    yield from ctx.updated(mutant, outcome)
    return reason


def _blind_spot(ctx: StageContext, mutant: Mutant, clean: dict, original: list[dict]) -> str | None:
    """Why a survivor that did not wrap may still differ past 2^31 elements, where the
    replay could not look: its kernel's replay was not kept, or loads integers."""
    reach = jit_callers(ctx.kernel.source, mutant.function)
    mine = [r for r in original if r["kernel"] in reach]
    if not mine:
        return f"no check launches {mutant.function} (or a kernel calling it)"
    kept = [r for r in mine if (r["kernel"], r.get("axis", 0)) in clean]
    if not kept:
        kernels = ", ".join(sorted({r["kernel"] for r in mine}))
        return f"the original's replay of {kernels} wraps or failed, so it judges nothing"
    loads = sorted({r["kernel"] for r in kept if r.get("int_loads")})
    if loads:
        return (
            f"{', '.join(loads)} loads integers (indices?), which the replay reads as zeros: "
            "offsets computed from them were never past 2^31 elements"
        )
    return None
