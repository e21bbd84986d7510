"""Frozen value records that the stages hand each other.

Everything here is plain data: a Mutant is what the mutate stage produces, a
MutantOutcome is what the pipeline decides for it. Enums are string enums so
they serialise as their value.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from .vocabulary import Verdict

__all__ = ["JitFunction", "Mutant", "MutantOutcome", "Verdict"]


@dataclass(frozen=True)
class JitFunction:
    """A ``@triton.jit`` function of the kernel file. ``line`` is the line of the
    ``def`` keyword (decorators excluded); ``end_line`` the last line of the body;
    ``node`` its libcst node when parsed in this process (None when the kernel file
    was loaded from the cache)."""

    name: str
    node: Any = field(compare=False)
    line: int
    end_line: int


@dataclass(frozen=True)
class Mutant:
    """One rewrite at one place inside a ``@triton.jit`` function.

    ``line``/``col`` are 1-based/0-based positions of the rewritten node in the
    original file; ``source`` is the whole mutated file; ``diff`` is a unified
    diff against the original file.
    """

    id: str
    operator: str
    family: str
    function: str
    line: int
    col: int
    end_line: int
    end_col: int
    before: str
    after: str
    source: str
    diff: str
    in_launcher: bool = False

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def judging_function(self) -> str | None:
        """The function whose test cases judge this mutant (None, every case: a launcher's)."""
        return None if self.in_launcher else self.function

    @staticmethod
    def make_id(
        operator: str, line: int, col: int, end_line: int, end_col: int, source: str
    ) -> str:
        text = f"{operator}\0{line}:{col}-{end_line}:{end_col}\0{source}"
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class MutantOutcome:
    """The verdict for one mutant and why.

    ``by`` is set for killed mutants: own-check | test:NAME | bounds | crash | timeout.
    """

    mutant_id: str
    verdict: Verdict
    by: str | None
    reason: str
    duration_s: float
    cached: bool

    def to_json(self) -> dict:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        return data
