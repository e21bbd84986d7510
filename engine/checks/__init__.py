"""Checks that say what is really known about each survivor, run after the writers.

- ``compile_check``: compile original and survivors for CUDA targets without a GPU;
  a survivor the compiler rejects is ``not_compilable``.
- ``big_index``: replay overflow survivors (``int64-cast-drop``, ``int-narrow``) past
  2^31 elements in the interpreter; one whose offsets wrap where the original's do
  not is ``killed`` by ``big-index``.
- ``diff_oracle``: run original and survivor side by side and compare every tensor
  argument after every launch; one sentence per survivor.
- ``tolerance``: the closeness assertion that let each survivor through, and a tighter
  tolerance checked by running it (``hidden by tolerance``).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..events import Event
from ..records import Mutant
from ..settings import DEFAULT_TARGETS, parse_targets
from ..stage import Stage, StageContext
from ..vocabulary import Verdict
from .big_index import big_index_stage
from .claims import claims_stage
from .diff_oracle import diff_oracle_stage
from .tolerance import UsersSurvivors, tolerance_ahead, tolerance_stage

__all__ = ["ALWAYS", "CHECKS", "DEFAULT_TARGETS", "parse_targets"]


def compile_check_stage(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """The compile-check, imported when it runs (it is off by default)."""
    from .compile_check import compile_check_stage as run

    yield from run(ctx, survivors)


#: The survivor checks by the name the explorer toggles them by, in the order they run:
#: the compile-check first (claimed mutants too: a claim hides nothing from it), so the
#: later checks skip what cannot compile; then the big-index replay of overflow
#: survivors (always on; no job when there is none); then the claims' evidence, always on; then the
#: diff-oracle, which also weighs what is left claimed; last (on unless ``--no-tolerance``) the closeness
#: assertion each survivor passed by, a tighter tolerance checked by running it.
CHECKS: dict[str, Stage] = {
    "compile-check": Stage(
        "compile-check", compile_check_stage, (Verdict.SURVIVED, Verdict.EQUIVALENT)
    ),
    "big-index": Stage("big-index", big_index_stage),
    "claims": Stage("claims", claims_stage),
    "diff-oracle": Stage("diff-oracle", diff_oracle_stage, (Verdict.SURVIVED, Verdict.EQUIVALENT)),
    # the survivors of the user's tests: those a written test killed too
    "tolerance": UsersSurvivors(
        "tolerance", tolerance_stage, (Verdict.SURVIVED, Verdict.KILLED), ahead=tolerance_ahead
    ),
}
#: Checks that run whatever the flags say.
ALWAYS = frozenset({"big-index", "claims"})
#: the survivor checks a face may turn on and off
TOGGLED = tuple(n for n in CHECKS if n not in ALWAYS)
