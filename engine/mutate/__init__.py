"""Mutants for Triton kernels: small, Triton-specific bugs planted inside
``@triton.jit`` functions.

- :mod:`.base`: the ``Operator`` interface and ``Example``;
- one module per family: :mod:`.masks`, :mod:`.boundaries`,
  :mod:`.precision`, :mod:`.indexing`, :mod:`.arith`;
- :mod:`.registry`: every operator, and ``--operators`` selection;
- :mod:`.jit`: which functions are jit functions;
- :mod:`.generate`: spans, splicing and the ``Mutant`` records.
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
