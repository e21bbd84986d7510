"""Parse only the jit functions of a file with libcst.

libcst parsing dominates the cost of generation, so ``ast`` (ten times
faster) finds the jit functions and each is parsed on its own, an indented one
inside ``if 1:``. Anything unexpected falls back to parsing the whole file.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from .jit import ast_jit_functions, walk_jit_functions
from .spans import Layout

_INDENTED_PREFIX = "if 1:\n"


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


def _function_text(
    source: str, line_starts: Sequence[int], found: ast.FunctionDef
) -> tuple[str, int]:
    """(text, offset) of one function's lines, its decorators included; an indented one
    behind ``_INDENTED_PREFIX`` (the offset moved back by its length)."""
    first = min([found.lineno, *(d.lineno for d in found.decorator_list)])
    begin = line_starts[first - 1]
    last = found.end_lineno or found.lineno
    end = line_starts[last] if last < len(line_starts) else len(source)
    text = source[begin:end]
    if text[:1] in (" ", "\t"):
        text = _INDENTED_PREFIX + text
        begin -= len(_INDENTED_PREFIX)
    return text, begin


def jit_units(source: str, line_starts: Sequence[int]) -> list[Unit]:
    """The jit functions of ``source``, in source order. ``line_starts``: the
    offset of each line. Raises SyntaxError if the file does not parse."""
    units = []
    for found in ast_jit_functions(ast.parse(source)):
        text, begin = _function_text(source, line_starts, found)
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError:
            return _whole_file_units(source)
        sole = _sole_function(module)
        if sole is None or sole[0].name.value != found.name:
            return _whole_file_units(source)
        units.append(Unit(sole[0], sole[1], module, Layout(module, text), begin))
    return units
