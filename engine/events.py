"""Typed events the pipeline yields; the CLI and the TUI are two observers of them."""

from __future__ import annotations

from dataclasses import dataclass

from .job import JobResult
from .kernel_file import KernelFile
from .records import Mutant, MutantOutcome


@dataclass(frozen=True)
class RunStarted:
    run_id: str
    kernel: KernelFile
    mutants: tuple[Mutant, ...]
    generation_s: float


@dataclass(frozen=True)
class BaselineStarted:
    timeout_s: float


@dataclass(frozen=True)
class BaselineProgress:
    """The original's run, as it goes: a test file's cases collected (``case`` empty,
    ``total`` set) or one case through (its status and seconds); ``done`` cases so far."""

    check: str
    case: str
    status: str
    duration_s: float
    done: int
    total: int


@dataclass(frozen=True)
class BaselineFinished:
    result: JobResult
    cached: bool
    mutant_timeout_s: float
    #: each mutant runs only the cases that launch its kernel, its limit from their time
    selected: bool = False


@dataclass(frozen=True)
class OwnCheckJudged:
    """Whether the own check can see a wrong result (``Run.judge_own_check``)."""

    asserts: bool
    evidence: str  # one sentence: how this was decided
    note: str  # what it means for the run ("" when the check asserts)


@dataclass(frozen=True)
class RunEstimated:
    """What the mutants' phase should take, said as its first job starts: ``to_run``
    mutants in the sandbox at ``job_s`` seconds each on average (the original's time on
    the checks each runs) over ``workers``; the ``cached`` and the ``not_reached`` cost
    nothing. ``cuts``: what would cut a long run (empty when it is short)."""

    mutants: int
    to_run: int
    cached: int
    not_reached: int
    workers: int
    job_s: float
    seconds: float
    cuts: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """``25 mutants: about 40 s at 2 workers (the original's 3.1 s each)``, then what
        would cut it when there is something to say."""
        run = f"{self.to_run} to run, " if self.to_run != self.mutants else ""
        workers = f"{self.workers} worker" + ("s" if self.workers != 1 else "")
        said = [
            f"{self.mutants} mutant{'s' if self.mutants != 1 else ''}: {run}about {about(self.seconds)} at {workers} "
            f"(the original's {self.job_s:.1f} s each)"
        ]
        if self.cuts:
            said.append("to cut it: " + ", ".join(self.cuts))
        return said


def about(seconds: float) -> str:
    """``40 s``, ``55 min``, ``1 h 20 min``: a duration as an estimate says it."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


@dataclass(frozen=True)
class MutantStarted:
    mutant: Mutant


@dataclass(frozen=True)
class MutantFinished:
    mutant: Mutant
    outcome: MutantOutcome
    done: int
    total: int


@dataclass(frozen=True)
class MutantUpdated:
    """A later stage changed a mutant's verdict (killer test, compile failure...)."""

    mutant: Mutant
    outcome: MutantOutcome


@dataclass(frozen=True)
class RunFinished:
    report: dict


@dataclass(frozen=True)
class WriterNote:
    """A test writer says what it is doing, or why it stopped (``level`` error)."""

    writer: str  # stage1 | stage2 | probe | llm
    message: str
    level: str = "info"  # info | warning | error
    mutant_id: str | None = None


@dataclass(frozen=True)
class TestAccepted:
    """A written test proved itself in the sandbox and joined the run."""

    __test__ = False  # not a pytest test class

    origin: str  # stage1 | stage2 | probe
    file: str
    tests: tuple[str, ...]  # its test functions
    mutant_id: str | None = None  # the survivor it was written for (stage 2, probe)
    kills: tuple[str, ...] = ()  # mutant ids it killed
    duration_s: float | None = None  # its time on the original (its proof's slowest run)


@dataclass(frozen=True)
class TestRejected:
    """A written test failed its proof (fails the original, flaky, spares the mutant...)."""

    __test__ = False

    origin: str
    attempt: int
    reason: str
    mutant_id: str | None = None


@dataclass(frozen=True)
class CheckStarted:
    """A check (``compile`` | ``oracle``) starts on a mutant; ``mutant`` None: the
    check as a whole starts on ``total`` mutants."""

    mutant: Mutant | None
    check: str
    total: int = 0


@dataclass(frozen=True)
class CheckFinished:
    """A check's one-line result for a mutant (``mutant`` None: for the whole run,
    e.g. why it was skipped); ``done`` of ``total`` mutants are through."""

    mutant: Mutant | None
    check: str
    summary: str
    done: int = 0
    total: int = 0


Event = (
    RunStarted
    | BaselineStarted
    | BaselineProgress
    | BaselineFinished
    | OwnCheckJudged
    | RunEstimated
    | MutantStarted
    | MutantFinished
    | MutantUpdated
    | RunFinished
    | CheckStarted
    | CheckFinished
    | WriterNote
    | TestAccepted
    | TestRejected
)
