"""Find the ``@triton.jit`` functions of a kernel file: the only code mutated.

A jit function is a ``def`` at module level, or nested in a class or an
``if``/``else``/``try``/``with``/``for``/``while`` block (not inside another
function), with a decorator that is ``triton.jit``, ``triton.jit(...)``,
``<alias>.jit`` after ``import triton as <alias>``, or a name bound by
``from triton import jit [as name]``; other decorators (``triton.autotune``,
``triton.heuristics``) may be stacked above it.

The rule lives in :class:`JitNames`; it is applied to a libcst tree (the
public :func:`find_jit_functions`) and to an ``ast`` tree (generation, which
parses only the jit functions with libcst because libcst parsing dominates
its cost).
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import libcst as cst

from ..records import JitFunction
from .spans import Layout

_NEWLINE = re.compile(r"\r\n|\r|\n")
_JIT_MODULES = frozenset({"triton", "triton.runtime", "triton.runtime.jit"})


@dataclass
class JitNames:
    """How one file spells ``triton.jit``, learnt from its module-level imports."""

    modules: set[str] = field(default_factory=lambda: {"triton"})
    functions: set[str] = field(default_factory=set)

    def note_import(self, module: str | None, asname: str | None) -> None:
        if module == "triton" and asname:
            self.modules.add(asname)

    def note_import_from(self, module: str | None, name: str | None, asname: str | None) -> None:
        if module in _JIT_MODULES and name == "jit":
            self.functions.add(asname or name)

    def is_jit(self, decorator: str | None) -> bool:
        """``decorator``: the dotted name of a decorator (or of the callee when
        it is called, as in ``@triton.jit(debug=True)``)."""
        if decorator is None:
            return False
        head, _, last = decorator.rpartition(".")
        if not head:
            return decorator in self.functions
        return last == "jit" and head in self.modules


# -- libcst --------------------------------------------------------------------


def _cst_dotted(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _cst_dotted(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


def _cst_names(module: cst.Module) -> JitNames:
    names = JitNames()
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            _cst_note_import(names, small)
    return names


def _cst_note_import(names: JitNames, small: cst.BaseSmallStatement) -> None:
    """Note in ``names`` what an ``import`` or absolute ``from ... import`` binds."""
    if isinstance(small, cst.Import):
        for alias in small.names:
            names.note_import(_cst_dotted(alias.name), _cst_dotted(_cst_asname(alias)))
    elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
        if small.relative:
            return
        for alias in small.names:
            names.note_import_from(
                _cst_dotted(small.module),
                _cst_dotted(alias.name),
                _cst_dotted(_cst_asname(alias)),
            )


def _cst_asname(alias: cst.ImportAlias) -> cst.CSTNode | None:
    """The name of an import's ``as`` clause, else None."""
    return alias.asname.name if alias.asname else None


def _cst_decorator(decorator: cst.Decorator) -> str | None:
    target = decorator.decorator
    return _cst_dotted(target.func if isinstance(target, cst.Call) else target)


def _cst_blocks(statement: cst.CSTNode) -> Iterator[cst.IndentedBlock]:
    """Indented blocks directly owned by a compound statement, in source order;
    a ``def``'s body is not one of them."""
    if not isinstance(statement, (cst.ClassDef, cst.With, cst.For, cst.While, cst.If, cst.Try)):
        return
    bodies: list[cst.BaseSuite] = [statement.body]
    if isinstance(statement, cst.Try):
        bodies += [handler.body for handler in statement.handlers]
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):  # elif
        yield from (b for b in bodies if isinstance(b, cst.IndentedBlock))
        yield from _cst_blocks(orelse)
        return
    bodies += _cst_closing_bodies(statement, orelse)
    yield from (b for b in bodies if isinstance(b, cst.IndentedBlock))


def _cst_closing_bodies(statement: cst.CSTNode, orelse: cst.CSTNode | None) -> list[cst.BaseSuite]:
    """A compound statement's ``else:`` body and a ``try``'s ``finally:`` body, where present."""
    bodies = []
    if orelse is not None:
        bodies.append(orelse.body)
    if isinstance(statement, cst.Try) and statement.finalbody is not None:
        bodies.append(statement.finalbody.body)
    return bodies


def walk_jit_functions(
    module: cst.Module, names: JitNames | None = None
) -> Iterator[tuple[cst.FunctionDef, tuple[str, ...]]]:
    """Yield each jit ``FunctionDef`` with the indent strings of the blocks
    around it (empty at module level), in source order."""
    names = _cst_names(module) if names is None else names
    default_indent = module.default_indent

    def visit(statements: Sequence[cst.CSTNode], indents: tuple[str, ...]):
        for statement in statements:
            if isinstance(statement, cst.FunctionDef):
                if any(names.is_jit(_cst_decorator(d)) for d in statement.decorators):
                    yield statement, indents
                continue
            for block in _cst_blocks(statement):
                inner = block.indent if block.indent is not None else default_indent
                yield from visit(block.body, (*indents, inner))

    yield from visit(module.body, ())


def find_jit_functions(module: cst.Module) -> list[JitFunction]:
    """The jit functions of ``module`` in source order."""
    code = module.code
    layout = Layout(module, code)
    line_starts = [0, *(m.end() for m in _NEWLINE.finditer(code))]

    def line_of(offset: int) -> int:
        return bisect.bisect_right(line_starts, offset)

    found = []
    for node, _ in walk_jit_functions(module):
        body = node.body
        last = body.body[-1] if isinstance(body, cst.IndentedBlock) and body.body else body
        found.append(
            JitFunction(
                node.name.value,
                node,
                line=line_of(layout.span(node.name)[0]),
                end_line=line_of(layout.span(last)[1] - 1),
            )
        )
    return found


# -- ast -----------------------------------------------------------------------


def _ast_dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _ast_dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _ast_names(tree: ast.Module) -> JitNames:
    names = JitNames()
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                names.note_import(alias.name, alias.asname)
        elif isinstance(statement, ast.ImportFrom) and not statement.level:
            for alias in statement.names:
                names.note_import_from(statement.module, alias.name, alias.asname)
    return names


def _ast_decorator(decorator: ast.expr) -> str | None:
    return _ast_dotted(decorator.func if isinstance(decorator, ast.Call) else decorator)


def ast_jit_functions(tree: ast.Module) -> Iterator[ast.FunctionDef]:
    """The same functions as :func:`walk_jit_functions`, found in an ``ast`` tree."""
    names = _ast_names(tree)
    compound = (ast.ClassDef, ast.With, ast.For, ast.While, ast.If, ast.Try)

    def visit(statements: Sequence[ast.stmt]) -> Iterator[ast.FunctionDef]:
        for statement in statements:
            if isinstance(statement, ast.FunctionDef):
                if any(names.is_jit(_ast_decorator(d)) for d in statement.decorator_list):
                    yield statement
            elif isinstance(statement, compound):
                yield from visit(statement.body)
                for handler in getattr(statement, "handlers", ()):
                    yield from visit(handler.body)
                yield from visit(getattr(statement, "orelse", ()))
                yield from visit(getattr(statement, "finalbody", ()))

    yield from visit(tree.body)
