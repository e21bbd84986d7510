"""Turn a kernel file into Mutant records, quickly and deterministically.

Only the jit functions are parsed with libcst, and one code generation pass
records where every node's text lies (:mod:`.layout`). Each node of a jit
function body is offered to the operators that accept its type
(:mod:`.sites`); a replacement is spliced into the original text at the
node's span, rendering only the part that differs from the original node
(``+`` -> ``-`` renders one token). The module is never regenerated.

An operator that moves statements (``acc-init-hoist``) rewrites a block; such a
mutant is reported, spliced and diffed at the run of lines that changed, not at
the whole block (:func:`_moved_statements`).

A mutant changes one statement, so the check that it still parses compiles
that statement only (a compound statement's header only, when that is where
the change is), all candidates in one batch, each inside ``if 1:`` for its
indentation; diffs are computed around the change (:mod:`.diff`).

Rules (see DESIGN.md, "Mutants"):
- only nodes in a jit function's body: decorators, signature and default
  values are never touched;
- a line with ``# mutant-gate: skip`` excludes every mutant whose node starts on it
  (for moved statements: whose changed lines start on it);
- order is (line, col, operator name, replacement text); the first of several
  mutants with the same mutated source wins; a mutant equal to the original,
  or one that no longer parses, is dropped.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import keyword
import re
from collections.abc import Iterator, Sequence

import libcst as cst

from ..records import Mutant
from .base import Operator
from .diff import LocalDiffer
from .sites import Site, walker_for
from .spans import render
from .syntax import precedence, required_precedence
from .units import Unit, jit_units

SKIP_COMMENT = re.compile(r"#\s*mutant-gate:\s*skip\b")
_NEWLINE = re.compile(r"\r\n|\r|\n")  # what Python and libcst count as a line break
_INDENTED = "if 1:\n"


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
    begin: int  # the rewritten node's span in the original file
    end: int
    check: str  # the text whose parsing decides ("": nothing to check)
    source: str


def _needs_parens(site: Site, new: cst.CSTNode) -> bool:
    """Does a replacement bind more loosely than its place needs
    (``2 * tl.cdiv(a, b)`` -> ``2 * (a // b)``)?"""
    return precedence(new) < required_precedence(site.node, site.parent)


_ALL_FIELDS: dict[type, tuple[str, ...]] = {}
#: a field that differs in a way no descent can narrow (``_field_change``)
_STOP = object()


def _changed_part(old: cst.CSTNode, new: cst.CSTNode) -> tuple[cst.CSTNode, cst.CSTNode]:
    """The smallest pair (original subnode, replacement subnode) that differs.

    Operators build replacements with ``with_changes``, so everything they did
    not touch is the very same object as in the original tree. Descend while
    exactly one child differs."""
    while type(old) is type(new):
        pair = _changed_child(old, new)
        if pair is None:
            return old, new
        old, new = pair
    return old, new


def _all_fields(node: cst.CSTNode) -> tuple[str, ...]:
    """The names of every field of ``node``'s type (kept per type)."""
    names = _ALL_FIELDS.get(type(node))
    if names is None:
        names = _ALL_FIELDS[type(node)] = tuple(f.name for f in dataclasses.fields(node))
    return names


def _changed_child(old: cst.CSTNode, new: cst.CSTNode) -> tuple[cst.CSTNode, cst.CSTNode] | None:
    """The one pair of child nodes in which two nodes of one type differ; None where no
    field differs, several do, or one differs in a way that is not a child node's."""
    pair = None
    for name in _all_fields(old):
        change = _field_change(getattr(old, name), getattr(new, name))
        if change is None:
            continue
        if change is _STOP or pair is not None:
            return None
        pair = change
    if pair is None or not isinstance(pair[1], cst.CSTNode):
        return None
    return pair


def _field_change(a: object, b: object) -> tuple | object | None:
    """How one field differs between a node and its replacement: None (the same), the
    pair of children that differ (a child node, or the one element of a sequence of
    the same length), or ``_STOP``."""
    if a is b:
        return None
    if isinstance(a, cst.CSTNode) and isinstance(b, cst.CSTNode):
        return a, b
    if _sequences_of_one_length(a, b):
        return _element_change(a, b)
    if type(a) is type(b) and not isinstance(a, cst.CSTNode) and a == b:
        return None
    return _STOP


def _sequences_of_one_length(a: object, b: object) -> bool:
    """Both lists or tuples, of the same length."""
    return isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b)


def _element_change(a: Sequence, b: Sequence) -> tuple | object:
    """The one pair of elements that differs between two sequences of the same length,
    where the original's is a node; else ``_STOP``."""
    differing = [(x, y) for x, y in zip(a, b, strict=True) if x is not y]
    if len(differing) != 1 or not isinstance(differing[0][0], cst.CSTNode):
        return _STOP
    return differing[0]


# Swapping one token of these groups for another of the same group cannot
# change whether a file parses: any binary operator fits between two operands,
# any comparison between two comparands, any number where a number was, any
# identifier where an identifier was (not a keyword: ``None = x`` is invalid).
_TOKEN_GROUPS = (cst.BaseBinaryOp, cst.BaseCompOp, cst.BaseAugOp, cst.Name, cst.BaseNumber)
_GROUP_OF: dict[type, type | None] = {}


def _token_group(kind: type) -> type | None:
    if kind not in _GROUP_OF:
        _GROUP_OF[kind] = next((g for g in _TOKEN_GROUPS if issubclass(kind, g)), None)
    return _GROUP_OF[kind]


def _token_swap(old: cst.CSTNode, new: cst.CSTNode) -> bool:
    group = _token_group(type(old))
    if group is None or group is not _token_group(type(new)):
        return False
    return group is not cst.Name or not keyword.iskeyword(new.value)


def _replacement(
    unit: Unit, site: Site, new: cst.CSTNode, source: str
) -> tuple[cst.CSTNode, cst.CSTNode, str]:
    """(original node to overwrite, its replacement, the replacement's text).

    Only the part that differs is rendered; a replacement that is itself an
    original node (``a % M`` -> ``a``) is copied from the file, not rendered."""
    wrap = _needs_parens(site, new)
    old_part, new_part = (site.node, new) if wrap else _changed_part(site.node, new)
    if old_part is not site.node and not unit.layout.has(old_part):
        old_part, new_part = site.node, new
    if unit.layout.has(new_part):
        begin, end = unit.span(new_part)
        text = source[begin:end]
    else:
        text = render(new_part, unit.module, site.indents)
    return old_part, new_part, f"({text})" if wrap else text


def _moved_statements(
    unit: Unit, site: Site, old: cst.CSTNode, new: cst.CSTNode, source: str
) -> tuple[int, int, str] | None:
    """A rewrite of a block that moves statements (``acc-init-hoist``), as
    (begin, end, text): the run of whole lines that differ, not the whole block,
    so the mutant sits where the move is and reads as a few lines."""
    if type(old) is not cst.IndentedBlock or type(new) is not cst.IndentedBlock:
        return None
    before, after = old.body, new.body
    head, tail = _shared_ends(before, after)
    removed, added = before[head : len(before) - tail], after[head : len(after) - tail]
    if not removed:
        return None
    indents = (*site.indents, old.indent if old.indent is not None else unit.module.default_indent)
    begin, end = unit.span(removed[0])[0], unit.span(removed[-1])[1]
    old_lines = source[begin:end].splitlines(keepends=True)
    new_lines = "".join(render(s, unit.module, indents) for s in added).splitlines(keepends=True)
    return _without_shared_lines(old_lines, new_lines, begin, end)


def _shared_ends(before: Sequence, after: Sequence) -> tuple[int, int]:
    """(head, tail): how many statements two blocks share at their start, then at
    their end (the same nodes)."""
    head = 0
    while head < min(len(before), len(after)) and before[head] is after[head]:
        head += 1
    tail = 0
    while tail < min(len(before), len(after)) - head and before[-1 - tail] is after[-1 - tail]:
        tail += 1
    return head, tail


def _without_shared_lines(
    old_lines: list[str], new_lines: list[str], begin: int, end: int
) -> tuple[int, int, str]:
    """(begin, end, text) of the span ``begin:end`` of ``old_lines`` rewritten as
    ``new_lines``, less the lines both share at their start and at their end."""
    same = 0
    while same < min(len(old_lines), len(new_lines)) and old_lines[same] == new_lines[same]:
        begin += len(old_lines[same])
        same += 1
    old_lines, new_lines = old_lines[same:], new_lines[same:]
    while old_lines and new_lines and old_lines[-1] == new_lines[-1]:
        end -= len(old_lines.pop())
        new_lines.pop()
    return begin, end, "".join(new_lines)


def _check_text(unit: Unit, site: Site, mutated: str, end: int, grown: int) -> str:
    """What to parse to know that the mutated file parses: the statement that
    holds the rewrite (a compound statement's header alone when the rewrite is
    there), inside ``if 1:`` for its indentation; the whole file when the
    rewrite is in no statement."""
    statement = site.statement
    if statement is None:
        return mutated
    first, last = unit.span(statement)
    body = getattr(statement, "body", None)
    if isinstance(statement, cst.BaseCompoundStatement) and isinstance(body, cst.CSTNode):
        body_begin = unit.span(body)[0]
        if end <= body_begin:  # in the header: parse the header alone
            return _INDENTED + mutated[first : body_begin + grown] + " pass\n"
    text = mutated[first : last + grown]
    return _INDENTED + text + ("" if text.endswith(("\n", "\r")) else "\n")


def _skipped_lines(source: str) -> set[int]:
    if "mutant-gate" not in source:
        return set()
    return {
        number
        for number, line in enumerate(_NEWLINE.split(source), start=1)
        if SKIP_COMMENT.search(line)
    }


def _proposals(site: Site) -> Iterator[tuple[Operator, cst.CSTNode]]:
    for op in site.operators:
        try:
            for new in op.mutations_in(site.node, site.scope):
                yield op, new
        except cst.CSTValidationError:
            continue  # libcst refused to build the rewrite: invalid code, like a non-parsing one


def _candidates(source: str, operators: Sequence[Operator]) -> Iterator[_Candidate]:
    line_starts = [0, *(match.end() for match in _NEWLINE.finditer(source))]

    def line_col(offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(line_starts, offset)
        return line, offset - line_starts[line - 1]

    skipped = _skipped_lines(source)
    walker = walker_for(tuple(operators))
    for unit in jit_units(source, line_starts):
        for site in walker.sites(unit.function, unit.indents, unit.module.default_indent):
            yield from _site_candidates(unit, site, source, skipped, line_col)


def _site_candidates(
    unit: Unit, site: Site, source: str, skipped: set[int], line_col
) -> Iterator[_Candidate]:
    """The candidates of one site: each operator's rewrites of its node, less those
    on a skipped line."""
    name = unit.function.name.value
    begin, end = unit.span(site.node)
    line, col = line_col(begin)
    is_block = type(site.node) is cst.IndentedBlock
    if line in skipped and not is_block:
        return
    proposals = list(_proposals(site))
    if not proposals:
        return
    end_line, end_col = line_col(end)
    before = source[begin:end]
    for op, new in proposals:
        old_part, new_part, text = _replacement(unit, site, new, source)
        moved = _moved_statements(unit, site, old_part, new_part, source)
        if moved is not None:
            part_begin, part_end, text = moved
            if line_col(part_begin)[0] in skipped:
                continue
            mutated = source[:part_begin] + text + source[part_end:]
            yield _moved_candidate(
                unit, site, op, name, source, mutated, part_begin, part_end, line_col
            )
            continue
        if is_block and line in skipped:
            continue
        part_begin, part_end = unit.span(old_part)
        mutated = source[:part_begin] + text + source[part_end:]
        grown = len(mutated) - len(source)
        yield _Candidate(
            line=line,
            col=col,
            operator=op.name,
            after=mutated[begin : end + grown],
            end_line=end_line,
            end_col=end_col,
            family=op.family,
            function=name,
            before=before,
            begin=begin,
            end=end,
            check=""
            if _token_swap(old_part, new_part)
            else _check_text(unit, site, mutated, end, grown),
            source=mutated,
        )


def _moved_candidate(
    unit: Unit,
    site: Site,
    op: Operator,
    function: str,
    source: str,
    mutated: str,
    begin: int,
    end: int,
    line_col,
) -> _Candidate:
    """A statement move is reported at the lines it changes, not at its block."""
    grown = len(mutated) - len(source)
    line, col = line_col(begin)
    end_line, end_col = line_col(end)
    block_end = unit.span(site.node)[1]
    return _Candidate(
        line=line,
        col=col,
        operator=op.name,
        after=mutated[begin : end + grown],
        end_line=end_line,
        end_col=end_col,
        family=op.family,
        function=function,
        before=source[begin:end],
        begin=begin,
        end=end,
        check=_check_text(unit, site, mutated, block_end, grown),
        source=mutated,
    )


def _parses(text: str, path: str) -> bool:
    """Parse only: a ``return`` outside its function is fine here."""
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _still_parse(candidates: Sequence[_Candidate], path: str) -> list[_Candidate]:
    """The candidates whose mutated file parses: every changed statement in one
    compile, and one by one only if that fails."""
    if _parses("".join(c.check for c in candidates), path):
        return list(candidates)
    return [c for c in candidates if not c.check or _parses(c.check, path)]


def generate_mutants(
    source: str, path: str, operators: Sequence[Operator] | None = None
) -> list[Mutant]:
    """All mutants of the jit functions in ``source`` (the text of ``path``),
    in a stable order with stable ids. Raises SyntaxError if ``source`` does
    not parse."""
    if operators is None:
        from .registry import all_operators

        operators = all_operators()
    seen = {source}
    unique = []
    for c in sorted(
        _candidates(source, operators), key=lambda c: (c.line, c.col, c.operator, c.after)
    ):
        if c.source not in seen:
            seen.add(c.source)
            unique.append(c)
    diff = LocalDiffer(source, path)
    return [
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
        for c in _still_parse(unique, path)
    ]
