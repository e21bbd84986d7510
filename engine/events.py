"""Typed events the pipeline yields; the CLI and the TUI are two observers of them."""

from __future__ import annotations

from dataclasses import dataclass

from .kernel_file import KernelFile
from .records import Mutant, MutantOutcome
from .sandbox.job import JobResult


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


@dataclass(frozen=True)
class OwnCheckJudged:
    """Whether the own check can see a wrong result (``Run.judge_own_check``)."""

    asserts: bool
    evidence: str  # one sentence: how this was decided
    note: str  # what it means for the run ("" when the check asserts)


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
