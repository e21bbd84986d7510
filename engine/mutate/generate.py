"""Turn a kernel file into Mutant records, quickly and deterministically.

The file is parsed once, and one code generation pass over the tree records
every node's span in the original text. For each node inside a jit function
body, the operators that accept its type propose replacement nodes; only the
replacement is rendered (inside the indentation of its block), and it is
spliced into the original text at the node's span. A mutant therefore costs
one small render and one string splice, never a regeneration of the module.

Checking that a mutant still parses, and diffing it, are also local: only the
statement holding the rewrite can have changed, so only that statement is
parsed (``ast``, inside an ``if 1:`` block for its indentation) and only the
lines around it are diffed (hunk headers shifted back to file lines).
Compiling and diffing whole files cost ~1.5 ms per mutant; this is ~0.05 ms.

Rules (see DESIGN.md, "Mutants"):
- only nodes in a jit function's body: decorators, signature and default
  values are never touched;
- a line with ``# mutant-gate: skip`` excludes every mutant whose node starts on it;
- order is (line, col, operator name, replacement text); the first of several
  mutants with the same mutated source wins; a mutant equal to the original,
  or one that no longer parses, is dropped.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import difflib
import itertools
import os
import re
from collections.abc import Iterator, Sequence

import libcst as cst

from ..records import Mutant
from .base import Operator
from .diff import LocalDiffer
from .layout import jit_units, render
from .syntax import parenthesize, precedence, required_precedence

SKIP_COMMENT = re.compile(r"#\s*mutant-gate:\s*skip\b")
_NEWLINE = re.compile(r"\r\n|\r|\n")  # what Python and libcst count as a line break

# Fields that never hold a node an operator could rewrite; skipping them
# roughly halves the walk.
_INERT_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "comma",
        "semicolon",
        "leading_lines",
        "header",
        "footer",
        "trailing_whitespace",
        "lines_after_decorators",
    }
)
_FIELDS: dict[type, tuple[str, ...]] = {}


def _children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    names = _FIELDS.get(type(node))
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(node)
            if f.name not in _INERT_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS[type(node)] = names
    for name in names:
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            yield value
        elif isinstance(value, (tuple, list)):
            for item in value:
                if isinstance(item, cst.CSTNode):
                    yield item


@dataclasses.dataclass(frozen=True)
class _Site:
    """A node some operator accepts, with what splicing needs to know."""

    node: cst.CSTNode
    parent: cst.CSTNode | None
    statement: cst.CSTNode | None  # the innermost statement holding the node
    indents: tuple[str, ...]
    operators: tuple[Operator, ...]


def _sites(
    function: cst.FunctionDef,
    indents: tuple[str, ...],
    default_indent: str,
    dispatch: dict[type, tuple[Operator, ...]],
    operators: Sequence[Operator],
) -> Iterator[_Site]:
    """Every node of the function body that at least one operator accepts."""
    Entry = tuple[cst.CSTNode, cst.CSTNode, cst.CSTNode | None, tuple[str, ...]]
    stack: list[Entry] = [(function.body, function, None, indents)]
    while stack:
        node, parent, statement, node_indents = stack.pop()
        kind = type(node)
        accepted = dispatch.get(kind)
        if accepted is None:
            accepted = tuple(op for op in operators if issubclass(kind, op.node_types))
            dispatch[kind] = accepted
        if accepted:
            yield _Site(node, parent, statement, node_indents, accepted)
        if isinstance(node, cst.IndentedBlock):
            block_indent = node.indent if node.indent is not None else default_indent
            node_indents = (*node_indents, block_indent)
        elif isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            statement = node
        stack.extend((child, node, statement, node_indents) for child in _children(node))


def _fitted(site: _Site, new: cst.CSTNode) -> cst.CSTNode:
    """Parenthesise a replacement that binds more loosely than its place needs
    (``2 * tl.cdiv(a, b)`` -> ``2 * (a // b)``)."""
    if (
        isinstance(new, cst.BaseExpression)
        and not new.lpar
        and precedence(new) < required_precedence(site.node, site.parent)
    ):
        return parenthesize(new)
    return new


_ALL_FIELDS: dict[type, tuple[str, ...]] = {}


def _changed_part(old: cst.CSTNode, new: cst.CSTNode) -> tuple[cst.CSTNode, cst.CSTNode]:
    """The smallest pair (original subnode, replacement subnode) that differs.

    Operators build replacements with ``with_changes``, so everything they did
    not touch is the very same object as in the original tree. Descending while
    exactly one child differs lets a ``+`` -> ``-`` mutant render one operator
    token instead of the whole expression."""
    while type(old) is type(new):
        names = _ALL_FIELDS.get(type(old))
        if names is None:
            names = _ALL_FIELDS[type(old)] = tuple(f.name for f in dataclasses.fields(old))
        pair = None
        for name in names:
            a, b = getattr(old, name), getattr(new, name)
            if a is b:
                continue
            if isinstance(a, cst.CSTNode) and isinstance(b, cst.CSTNode):
                found = (a, b)
            elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
                differing = [(x, y) for x, y in zip(a, b, strict=True) if x is not y]
                if len(differing) != 1 or not isinstance(differing[0][0], cst.CSTNode):
                    return old, new
                found = differing[0]
            elif type(a) is type(b) and a == b and not isinstance(a, cst.CSTNode):
                continue
            else:
                return old, new
            if pair is not None:
                return old, new
            pair = found
        if pair is None or not isinstance(pair[1], cst.CSTNode):
            return old, new
        old, new = pair
    return old, new


@dataclasses.dataclass(frozen=True)
class _Candidate:
    line: int
    col: int
    operator: str
    after: str
    end_line: int
    end_col: int
    family: str
    function: str
    before: str
    begin: int
    end: int
    statement: tuple[int, int] | None
    source: str


def _skipped_lines(source: str) -> set[int]:
    if "mutant-gate" not in source:
        return set()
    return {
        number
        for number, line in enumerate(_NEWLINE.split(source), start=1)
        if SKIP_COMMENT.search(line)
    }


def _line_starts(source: str) -> list[int]:
    return [0, *(match.end() for match in _NEWLINE.finditer(source))]


def _candidates(source: str, operators: Sequence[Operator]) -> Iterator[_Candidate]:
    line_starts = _line_starts(source)

    def line_col(offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(line_starts, offset)
        return line, offset - line_starts[line - 1]

    skipped = _skipped_lines(source)
    dispatch: dict[type, tuple[Operator, ...]] = {}
    for unit in jit_units(source, line_starts):
        name = unit.function.name.value
        sites = _sites(
            unit.function, unit.indents, unit.module.default_indent, dispatch, operators
        )
        for site in sites:
            begin, end = unit.span(site.node)
            line, col = line_col(begin)
            if line in skipped:
                continue
            proposals = [(op, new) for op in site.operators for new in op.mutations(site.node)]
            if not proposals:
                continue
            end_line, end_col = line_col(end)
            statement = None if site.statement is None else unit.span(site.statement)
            before = source[begin:end]
            for op, new in proposals:
                new = _fitted(site, new)
                old_part, new_part = _changed_part(site.node, new)
                if old_part is site.node or not unit.layout.has(old_part):
                    old_part, new_part = site.node, new
                part_begin, part_end = unit.span(old_part)
                text = render(new_part, unit.module, site.indents)
                mutated = source[:part_begin] + text + source[part_end:]
                after = mutated[begin : end + len(mutated) - len(source)]
                yield _Candidate(
                    line=line,
                    col=col,
                    operator=op.name,
                    after=after,
                    end_line=end_line,
                    end_col=end_col,
                    family=op.family,
                    function=name,
                    before=before,
                    begin=begin,
                    end=end,
                    statement=statement,
                    source=mutated,
                )


def _parses(candidate: _Candidate, path: str) -> bool:
    """Does the mutated file still parse? Only the rewritten statement changed,
    so only it is parsed (the whole file when the rewrite is in no statement)."""
    text = candidate.source
    if candidate.statement is not None:
        first, last = candidate.statement
        grown = len(candidate.after) - (candidate.end - candidate.begin)
        text = "if 1:\n" + text[first : last + grown]
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def generate_mutants(
    source: str, path: str, operators: Sequence[Operator] | None = None
) -> list[Mutant]:
    """All mutants of the jit functions in ``source`` (the text of ``path``)."""
    if operators is None:
        from .registry import all_operators

        operators = all_operators()
    candidates = sorted(
        _candidates(source, operators),
        key=lambda c: (c.line, c.col, c.operator, c.after),
    )
    diff = LocalDiffer(source, path)
    seen = {source}
    mutants = []
    for c in candidates:
        if c.source in seen:
            continue
        seen.add(c.source)
        if not _parses(c, path):
            continue
        mutants.append(
            Mutant(
                id=Mutant.make_id(c.operator, c.line, c.col, c.end_line, c.end_col, c.source),
                operator=c.operator,
                family=c.family,
                function=c.function,
                line=c.line,
                col=c.col,
                end_line=c.end_line,
                end_col=c.end_col,
                before=c.before,
                after=c.after,
                source=c.source,
                diff=diff(c.source, c.begin, c.end),
            )
        )
    return mutants
