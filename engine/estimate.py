"""The estimate of a run's mutant phase, said once, as its first job starts.

It rests on one measurement: the original's time on the checks each mutant runs
(``StageContext.original_s``: the whole baseline, or in project mode and with selected
test cases, the cases that launch its kernel), less the imports the original paid that a
warm runner keeps loaded for the jobs after it (``harness/imports.py``: a real library's
test files import seconds of third-party code once). Each mutant still to run is counted at
that time, shared over the workers (never less than the longest one); results served
from the cache and mutants no check reaches cost nothing. A killed mutant often stops
at its first failing check, sooner than that; one that hangs runs to its limit; the
writers and checks after the mutants are not in it. The run's report keeps it
(``estimate``) beside what the phase took (``sandbox.mutants_wall_s``).
"""

from __future__ import annotations

from collections import Counter

from .events import RunEstimated
from .job import Job
from .jobs import JobEvent
from .kernel_file import GIVEN
from .records import Mutant
from .stage import StageContext

#: past this many seconds, the estimate names what would cut the run
CUT_AFTER_S = 180.0
BASIS = (
    "each mutant to run at the original's time on the checks it runs, over the workers; "
    "cached results and unreached mutants cost nothing; a killed mutant often stops sooner, "
    "a hung one runs to its limit; writers and checks after the mutants not included"
)


class Watch:
    """The mutant phase's job stream as it begins: cached results come first
    (``JobRunner.run_jobs``); at the first job that runs, or at the end of a stream
    served whole from the cache, ``see`` / ``end`` give the estimate (once), also put in
    the report's ``estimate`` section."""

    def __init__(
        self, ctx: StageContext, jobs: dict[str, Job], mutants: dict[str, Mutant], total: int
    ) -> None:
        self.ctx, self.jobs, self.mutants, self.total = ctx, jobs, mutants, total
        self.cached: set[str] = set()
        self.said = False

    def see(self, event: JobEvent) -> RunEstimated | None:
        if event.cached:
            self.cached.add(event.key)
            return None
        return self.end()

    def end(self) -> RunEstimated | None:
        if self.said:
            return None
        self.said = True
        event = estimate(self.ctx, self.jobs, self.mutants, self.cached, self.total)
        self.ctx.ledger.put_section("estimate", record(event))
        return event


def estimate(
    ctx: StageContext,
    jobs: dict[str, Job],
    mutants: dict[str, Mutant],
    cached: set[str],
    total: int,
) -> RunEstimated:
    """The phase's estimate: ``jobs`` (key ``ID@config``) of ``mutants`` (by id), the
    ``cached`` ones served from the cache, ``total`` mutants in the plan."""
    seconds: dict[str, float] = {}
    for key, job in jobs.items():
        if key not in cached:
            mutant_id = key.split("@")[0]
            seconds[mutant_id] = seconds.get(mutant_id, 0.0) + ctx.original_s(job.checks, True)
    workers = max(1, ctx.workers)
    wall = max(sum(seconds.values()) / workers, max(seconds.values(), default=0.0))
    to_run = [mutants[i] for i in seconds]
    return RunEstimated(
        mutants=total,
        to_run=len(to_run),
        cached=len(mutants) - len(to_run),
        not_reached=total - len(mutants),
        workers=workers,
        job_s=sum(seconds.values()) / len(seconds) if seconds else 0.0,
        seconds=wall,
        cuts=cuts(ctx, to_run) if wall > CUT_AFTER_S else (),
    )


def cuts(ctx: StageContext, to_run: list[Mutant]) -> tuple[str, ...]:
    """The flags that would cut the run, those that apply to it: fewer operators (the
    families with the most mutants), only changed functions, fewer test cases, a GPU."""
    settings, kernel = ctx.settings, ctx.kernel
    most = Counter(m.family for m in to_run).most_common(2)
    said = [f"--operators (most mutants: {', '.join(f'{f} {n}' for f, n in most)})"]
    if settings.changed_since is None:
        said.append("--changed-since REF")
    if kernel.project is not None or any(t.origin == GIVEN for t in kernel.tests):
        said.append("-k EXPR")
    if settings.mode == "interpret":
        said.append("--mode compiled on a GPU")
    return tuple(said)


def record(event: RunEstimated) -> dict:
    """The report's ``estimate`` section."""
    return {
        "mutants": event.mutants,
        "to_run": event.to_run,
        "cached": event.cached,
        "not_reached": event.not_reached,
        "workers": event.workers,
        "job_s": round(event.job_s, 3),
        "seconds": round(event.seconds, 1),
        "cuts": list(event.cuts),
        "basis": BASIS,
    }
