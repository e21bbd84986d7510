"""The operator interface: one small class per kind of planted bug.

An operator looks at one libcst node at a time and yields the nodes that could
replace it; it never sees the file, positions or other operators. Everything
about where a node sits, how it is spliced and whether the result still parses
belongs to :mod:`.generate`. Each operator carries its own before/after
examples, and one test walks every example of every operator in the registry.
"""

from __future__ import annotations

import textwrap
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from .scope import Scope

FAMILIES: tuple[str, ...] = ("masks", "boundaries", "precision", "indexing", "arith")

_KERNEL_HEAD = (
    "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef kernel({params}):\n"
)
DEFAULT_PARAMS = "x_ptr, y_ptr, n, BLOCK: tl.constexpr"


@dataclass(frozen=True)
class Example:
    """A complete little kernel file before, and one mutated source the
    operator must produce from it, exactly."""

    before: str
    after: str

    @classmethod
    def kernel(cls, before: str, after: str, params: str = DEFAULT_PARAMS) -> Example:
        """Wrap two function bodies (any indentation) in the same
        ``@triton.jit def kernel(...)`` file."""
        head = _KERNEL_HEAD.format(params=params)
        return cls(head + _body(before), head + _body(after))


def _body(text: str) -> str:
    return textwrap.indent(textwrap.dedent(text).strip("\n") + "\n", "    ")


class Operator(ABC):
    """Base class: subclasses set the class attributes and ``mutations``.

    ``node_types`` is a cheap pre-filter: the generator only offers nodes of
    these types, which keeps generation in the milliseconds.
    """

    name: ClassVar[str]
    family: ClassVar[str]
    description: ClassVar[str]
    examples: ClassVar[tuple[Example, ...]]
    node_types: ClassVar[tuple[type[cst.CSTNode], ...]] = (cst.CSTNode,)

    @abstractmethod
    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Yield replacement nodes for ``node``; yield nothing if it does not match."""

    def mutations_in(self, node: cst.CSTNode, scope: Scope) -> Iterator[cst.CSTNode]:
        """``mutations`` with the function around ``node`` at hand; an operator
        whose rewrite is valid Triton only in some contexts (an integer offset,
        a 2-D block, a loop-carried accumulator) overrides this."""
        return self.mutations(node)

    def __repr__(self) -> str:
        return f"<operator {self.family}/{self.name}>"
