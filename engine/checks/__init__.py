"""Checks that say what is really known about each survivor, run after the writers.

- ``compile_check``: compile original and survivors for CUDA targets without a GPU;
  a survivor the compiler rejects is ``not_compilable``.
- ``diff_oracle``: run original and survivor side by side and compare every tensor
  argument after every launch; one sentence per survivor.
"""

from __future__ import annotations

from ..settings import DEFAULT_TARGETS, RunSettings, parse_targets
from ..stage import Stage
from ..vocabulary import Verdict
from .compile_check import compile_check_stage
from .diff_oracle import diff_oracle_stage

__all__ = ["CHECKS", "DEFAULT_TARGETS", "check_stages", "parse_targets"]

#: The survivor checks by the name the explorer toggles them by, in the order they run:
#: the compile-check first, so the oracle skips what cannot compile. The oracle also
#: takes mutants a writer claimed equivalent: to weigh the claim.
CHECKS: dict[str, Stage] = {
    "compile-check": Stage(
        "compile-check", compile_check_stage, (Verdict.SURVIVED, Verdict.EQUIVALENT)
    ),
    "diff-oracle": Stage("diff-oracle", diff_oracle_stage, (Verdict.SURVIVED, Verdict.EQUIVALENT)),
}


def check_stages(settings: RunSettings) -> list[Stage]:
    """The checks the settings turn on, in order."""
    on = {"compile-check": settings.compile_check, "diff-oracle": settings.diff_oracle}
    return [stage for name, stage in CHECKS.items() if on[name]]
