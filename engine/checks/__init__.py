"""Checks that say what is really known about each survivor, run after the writers.

- ``compile_check``: compile original and survivors for CUDA targets without a GPU;
  a survivor the compiler rejects is ``not_compilable``.
- ``diff_oracle``: run original and survivor side by side and compare every tensor
  argument after every launch; one sentence per survivor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..settings import DEFAULT_TARGETS, parse_targets
from .compile_check import compile_check_stage
from .diff_oracle import diff_oracle_stage

if TYPE_CHECKING:
    from ..pipeline import Run

__all__ = [
    "DEFAULT_TARGETS",
    "compile_check_stage",
    "diff_oracle_stage",
    "install_checks",
    "parse_targets",
]


def install_checks(run: Run) -> None:
    """Append the enabled checks to ``run.survivor_stages`` (after any writer stage):
    the compile-check first, so the oracle skips what cannot compile."""
    if run.settings.compile_check:
        run.survivor_stages.append(compile_check_stage)
    if run.settings.diff_oracle:
        run.survivor_stages.append(diff_oracle_stage)
