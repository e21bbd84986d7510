"""Where every node's text lies, and rendering a node in place.

One code generation pass records, for every node, the characters it produced;
since libcst reproduces its input exactly, those are the node's characters in
the parsed text. A span covers everything the node renders (its parentheses
and, for a small statement, its semicolon), so a replacement node rendered
with the same indentation fits it exactly.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState

_NO_POSITION = contextlib.nullcontext()


@dataclass
class RenderState(CodegenState):
    """libcst's code generation state without per-node position bookkeeping
    (its default makes a generator-based context manager for every node)."""

    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        return _NO_POSITION


@dataclass
class _SpanRecorder(RenderState):
    """Code generation that notes, for every node, which tokens it produced."""

    token_spans: dict[cst.CSTNode, tuple[int, int]] = field(default_factory=dict)
    _open: list[int] = field(default_factory=list)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._open.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        self.token_spans[node] = (self._open.pop(), len(self.tokens))


def render(node: cst.CSTNode, module: cst.Module, indents: Sequence[str]) -> str:
    """A node's text as it appears inside blocks indented by ``indents``."""
    state = RenderState(module.default_indent, module.default_newline, indent_tokens=[*indents])
    node._codegen(state)
    return "".join(state.tokens)


class Layout:
    """Character spans of every node of a parsed text."""

    def __init__(self, module: cst.Module, text: str) -> None:
        state = _SpanRecorder(module.default_indent, module.default_newline)
        module._codegen(state)
        self._spans = state.token_spans
        self._offsets = [0, *itertools.accumulate(map(len, state.tokens))]
        if self._offsets[-1] != len(text) or "".join(state.tokens) != text:
            raise ValueError("libcst did not reproduce the file exactly; cannot place mutants")

    def has(self, node: cst.CSTNode) -> bool:
        return node in self._spans

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        first, last = self._spans[node]
        end = len(self._offsets) - 1  # a file without a final newline drops a token
        return self._offsets[min(first, end)], self._offsets[min(last, end)]
