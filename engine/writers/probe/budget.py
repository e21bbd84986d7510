"""The probe's time and what it spent: a ``Budget`` of job seconds (and of the wall clock's
path its rounds take) with a floor below which every kind is tried, and the ``Spend``
record that goes into the run's ``writers.probe.spend``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ...job import JobResult
from ...jobs import Meter
from ...stage import StageContext
from .jobs import answer_of

#: the probe's default time, a part of the mutants' job seconds: its last round's
#: estimates come out short, and the tool's own work between rounds and around the
#: proofs is not a job's; with the whole of it the phase ran past the mutants' (on
#: examples/softmax, 1.02 of it, where the budget ends the search)
BUDGET_PART = 0.8

#: the budget's floor, in seconds of the probe's jobs (``--probe-time`` where given): below
#: it no survivor is left with a kind of input never tried, whatever the mutants took (a
#: row softmax's mutants took 3.5 s: its probe stopped six survivors after 2 of 13 kinds)
FLOOR_S = 30.0

#: the part of the time left on the wall clock (the path) a round is planned to fill: a
#: survivor's round is as long as its slowest candidate, and estimates come out short by
#: up to a third on the examples (the measured over the estimated seconds of a round)
PATH_MARGIN = 0.7


def time_budget(ctx: StageContext) -> tuple[float | None, str]:
    """The probe's time in seconds of jobs, and how to say it: ``--probe-time``, or
    ``BUDGET_PART`` of what the mutants' jobs took (None: no limit but the number of
    inputs)."""
    given = ctx.settings.writers.probe_time
    if given == 0:
        return None, ""
    if given is not None:
        return given, f"the probe's time ({given:g} s of jobs, --probe-time)"
    mutants = BUDGET_PART * ctx.mutant_job_seconds()
    return mutants, (
        f"the probe's time ({mutants:.1f} s of jobs, {BUDGET_PART:g} of what the mutants' took)"
    )


@dataclass
class Spend:
    """What the probe spent, in the run's ``writers.probe.spend`` (added to by each run of
    the stage: a rerun's, stage 2's)."""

    planned: int = 0  # candidates planned, all survivors together (up to --probes each)
    mutant_runs: int = 0  # candidate runs on a mutant
    original_runs: int = 0  # candidate runs on the original
    originals_saved: int = 0  # mutant runs with no original run of their own
    unusable: int = 0  # candidates the original rejects or varies on: no survivor runs them
    jobs: int = 0  # compare jobs (the proofs of hits not counted)
    cached_jobs: int = 0  # of them served from the cache (their runs not counted)
    retried: int = 0  # survivors whose candidates ran again after a shared job failed
    seconds: float = 0.0  # the probe's wall time, proofs included
    job_s: float = 0.0  # its sandbox jobs' seconds (at their time when run), against budget_s
    path_s: float = 0.0  # its rounds of jobs one after the other (``JobRunner.metered``)
    ahead: int = 0  # the original's jobs on the first inputs started beside the mutant phase
    #: inputs whose original outputs came back whole (run twice alike) and went to the
    #: compare jobs: a mutant differing there runs no original of its own
    shipped: int = 0
    #: the time budgets of the stage's runs, added up (none: no run had one)
    budget_s: float | None = None

    @classmethod
    def of(cls, record: dict | None) -> Spend:
        """A run's recorded spend (a record from before a key existed counts it 0)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (record or {}).items() if k in known})

    def to_json(self) -> dict:
        record = asdict(self)
        if self.budget_s is None:
            del record["budget_s"]
        return record

    def job(self, result: JobResult, cached: bool) -> None:
        """A harness job: counted, and (run now, not from the cache) its runs."""
        self.jobs += 1
        if cached:
            self.cached_jobs += 1
            return
        runs = (answer_of(result) or {}).get("runs") or {}
        self.original_runs += int(runs.get("original", 0))
        self.mutant_runs += int(runs.get("mutant", 0))

    def ended(self, wall_s: float, meter: Meter | None) -> None:
        """A run of the stage ended after ``wall_s`` seconds, its jobs metered."""
        self.originals_saved = max(0, self.mutant_runs - self.original_runs)
        self.seconds = round(self.seconds + wall_s, 2)
        if meter is not None:
            self.job_s = round(self.job_s + meter.job_s, 2)
            self.path_s = round(self.path_s + meter.path_s, 2)


#: the spend's counts, in the order the report has them
SPEND = tuple(f.name for f in fields(Spend) if f.name != "budget_s")


class Budget:
    """The probe's time in one run of its stage: seconds of its jobs (``time_budget``), and
    on the wall clock as long as the mutants' phase (its rounds one after the other may
    take the budget's seconds over the workers: ``JobRunner.metered``'s path); below its
    floor every kind is tried. It reads the stage's ``Meter``, which counts from the
    stage's start, and learns how the jobs' measured seconds compare with the estimates."""

    def __init__(self, ctx: StageContext, meter: Meter, spend: Spend) -> None:
        self.meter = meter
        self.workers = ctx.workers
        self.limit, self.says = time_budget(ctx)
        #: below it (seconds of the probe's jobs), a round tries every kind never tried
        self.floor = ctx.settings.writers.probe_time or FLOOR_S
        self.started = meter.job_s
        self.path_limit: float | None = None
        if self.limit is not None:
            spend.budget_s = round((spend.budget_s or 0.0) + self.limit, 3)
            self.path_limit = meter.path_s + self.limit / max(1, ctx.workers)
            self.limit += meter.job_s
        self.estimated = 0.0  # the probe's harness jobs: their estimated seconds
        self.measured = 0.0  # ... and their measured seconds

    @property
    def limited(self) -> bool:
        return self.limit is not None

    def clocked(self, estimate: float, result: JobResult) -> None:
        """A harness job's estimated seconds and its measured seconds."""
        self.estimated += estimate
        self.measured += result.spent_s

    def scale(self) -> float:
        """The jobs' measured over estimated seconds so far (0.5 to 50; 1 before any)."""
        if not self.estimated:
            return 1.0
        return min(50.0, max(0.5, self.measured / self.estimated))

    def left(self) -> float:
        """The seconds of jobs the next round may take: what is left of the budget, and a
        part of the path that is left (``PATH_MARGIN``: a round takes its slowest job, the
        rest covers estimates that came out short)."""
        assert self.limit is not None and self.path_limit is not None
        path_left = PATH_MARGIN * (self.path_limit - self.meter.path_s) * self.workers
        return min(self.limit - self.meter.job_s, path_left)

    def under_floor(self) -> bool:
        return self.meter.job_s - self.started < self.floor

    def spent(self) -> bool:
        """The budget ran out (its job seconds or its path)."""
        if self.limit is None or self.path_limit is None:
            return False
        return self.meter.job_s >= self.limit or self.meter.path_s >= self.path_limit
