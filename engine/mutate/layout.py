"""Parse the jit functions of a file and learn where every node's text lies.

libcst parsing and code generation dominate the cost of generation, so only
the jit functions are parsed with libcst: ``ast`` (ten times faster) finds
them, and each is parsed on its own, an indented one inside ``if 1:``. One
code generation pass per function records, for every node, the characters it
produced; since libcst reproduces its input exactly, those are the node's
characters in the file. Anything unexpected falls back to parsing the whole
file with libcst.
"""

from __future__ import annotations

import ast
import contextlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState

from .jit import ast_jit_functions, walk_jit_functions

_NO_POSITION = contextlib.nullcontext()
_INDENTED_PREFIX = "if 1:\n"


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
    """Character spans of every node of a parsed text.

    A span covers everything the node renders (its parentheses and, for a
    small statement, its semicolon), so a rendered replacement fits it exactly."""

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


@dataclass(frozen=True)
class Unit:
    """One jit function parsed with libcst, and where its text lies in the file."""

    function: cst.FunctionDef
    indents: tuple[str, ...]  # of the blocks around the def
    module: cst.Module
    layout: Layout
    shift: int  # file offset = layout offset + shift

    def span(self, node: cst.CSTNode) -> tuple[int, int]:
        begin, end = self.layout.span(node)
        return begin + self.shift, end + self.shift


def _sole_function(module: cst.Module) -> tuple[cst.FunctionDef, tuple[str, ...]] | None:
    body, indents = module.body, ()
    if len(body) == 1 and isinstance(body[0], cst.If):
        block = body[0].body
        if isinstance(block, cst.IndentedBlock):
            body, indents = block.body, (block.indent or module.default_indent,)
    if len(body) == 1 and isinstance(body[0], cst.FunctionDef):
        return body[0], indents
    return None


def _whole_file_units(source: str) -> list[Unit]:
    module = cst.parse_module(source)
    layout = Layout(module, source)
    return [Unit(f, indents, module, layout, 0) for f, indents in walk_jit_functions(module)]


def jit_units(source: str, line_starts: Sequence[int]) -> list[Unit]:
    """The jit functions of ``source``, in source order. ``line_starts``: the
    offset of each line. Raises SyntaxError if the file does not parse."""
    units = []
    for found in ast_jit_functions(ast.parse(source)):
        first = min([found.lineno, *(d.lineno for d in found.decorator_list)])
        begin = line_starts[first - 1]
        last = found.end_lineno or found.lineno
        end = line_starts[last] if last < len(line_starts) else len(source)
        text = source[begin:end]
        if text[:1] in (" ", "\t"):
            text = _INDENTED_PREFIX + text
            begin -= len(_INDENTED_PREFIX)
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            return _whole_file_units(source)
        sole = _sole_function(module)
        if sole is None or sole[0].name.value != found.name:
            return _whole_file_units(source)
        units.append(Unit(sole[0], sole[1], module, Layout(module, text), begin))
    return units
