"""Mutants for Triton kernels: small, Triton-specific bugs planted inside
``@triton.jit`` functions.

Where things are:
- :mod:`.base`: the ``Operator`` interface and ``Example``;
- one module per family: :mod:`.masks`, :mod:`.boundaries`,
  :mod:`.precision`, :mod:`.indexing`, :mod:`.arith` (helpers in :mod:`.syntax`);
- :mod:`.registry`: every operator, and ``--operators`` selection;
- :mod:`.jit`: which functions are jit functions;
- :mod:`.generate`: the ``Mutant`` records and the rules they follow, helped by
  :mod:`.units` (parse the jit functions), :mod:`.spans` (where each node's text
  lies), :mod:`.sites` (which nodes to offer to which operators) and
  :mod:`.diff` (unified diffs around one change).
"""

from .base import FAMILIES, Example, Operator
from .generate import generate_mutants
from .jit import JitFunction, find_jit_functions
from .registry import all_operators, select_operators

__all__ = [
    "FAMILIES",
    "Example",
    "JitFunction",
    "Operator",
    "all_operators",
    "find_jit_functions",
    "generate_mutants",
    "select_operators",
]
