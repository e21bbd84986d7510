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
class BaselineFinished:
    result: JobResult
    cached: bool
    mutant_timeout_s: float


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


Event = (
    RunStarted
    | BaselineStarted
    | BaselineFinished
    | MutantStarted
    | MutantFinished
    | MutantUpdated
    | RunFinished
)
