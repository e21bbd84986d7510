"""The probe writer's sandbox side: stdlib, torch, triton and numpy only.

Two entry points, reached through a ``harness`` check (``runner._run_harness``):

``capture`` (``capturing``): import the kernel module, wrap its public functions
(top-level, not ``_private``, not ``test*``, not kernels), run the own check (the
``__main__`` block in the module's namespace, and/or its ``test_*`` functions under
pytest) and record each outermost call: function, parameter names, every argument
(tensors as shape, dtype and value range; scalars, tuples and dtypes as values), the
kernel launches it made, their integer constexprs (block sizes) and grids (in the
interpreter), and its duration.

``compare`` (``comparing``): for each candidate input (a seeded setup snippet and a
call, written by the tool), run the original and each mutant module of the request
(several survivors share one job, each loaded under its own module name) on identical
inputs and compare every output (the return value and any tensor argument the original
changed) with ``torch.testing.assert_close``'s dtype-aware defaults; a bounds violation
or an exception only on the mutant side is a difference too. The original's run on a
candidate does not depend on the mutant: a job without mutants runs it once and returns
its digest (``digest``: the outputs' exact bytes), and later jobs get it with the
request; a mutant whose outputs are bit-identical to it is the same without the original
running again, and otherwise the original runs beside it as before (in the interpreter,
a digest that then differs from the shipped one means the original itself varies on that
input: no evidence either way). In the interpreter a job of the original alone on the
first round's inputs (``ship``) also returns its outputs whole where they are small
enough (``SHIP_JOB_BYTES``), once a second run there gave the same bits; shipped with
the digest, they stand for the original's run in later jobs (their digest checked
first). A mutant stops at its first difference whose outputs can be kept; for it the
original's outputs come back as golden values (else for the best difference: values
before exceptions before bounds, then the first; where no difference's outputs can be
kept, the golden entry names the best one and says why, ``error``). Before each side
starts a marker line is printed (candidate id, then ``original`` or the mutant's
module), so that when the job times out or crashes the output tail says which candidate
on which side did it.

What both use (arguments described, outputs compared, golden values, digests, outputs
shipped whole, ``VERSION`` and ``MARKER``) is in ``values``.
"""

from __future__ import annotations

from .capturing import GRAD_HELPER, capture
from .comparing import compare
from .values import MARKER, VERSION

# ``bounds`` (numpy) is imported where a job uses it: the tool's process imports this
# package for ``VERSION`` and ``MARKER`` only, and a cached run never needs numpy.

__all__ = ["GRAD_HELPER", "MARKER", "VERSION", "capture", "compare"]
