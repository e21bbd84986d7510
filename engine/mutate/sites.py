"""Walk a jit function's body and offer each node to the operators that accept
its type, with the context a splice needs: parent (for parentheses), the
innermost statement (for the parse check), and the indentation of its block
(for rendering multi-line replacements).

The walk is the hot loop of generation, so it caches per node type what it
learns (fields that can hold nodes, whether a type is a block or a statement,
which operators accept it) instead of calling ``isinstance`` against libcst's
abstract classes for every node.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Sequence

import libcst as cst

from .base import Operator
from .scope import Scope

# Fields that never hold a node an operator could rewrite.
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
_OTHER, _BLOCK, _STATEMENT = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class Site:
    """A node some operator accepts, with what splicing needs to know."""

    node: cst.CSTNode
    parent: cst.CSTNode
    statement: cst.CSTNode | None  # innermost statement (an elif's is its whole if)
    indents: tuple[str, ...]
    operators: tuple[Operator, ...]
    scope: Scope  # the function's, for operators that ask about context


# Per node type, shared by every walk: fields that may hold nodes, whether a
# type is a node, and its role (block, statement or other).
_FIELDS: dict[type, tuple[str, ...]] = {}
_IS_NODE: dict[type, bool] = {}
_ROLE: dict[type, int] = {}


class SiteWalker:
    """Walks jit function bodies for one set of operators; reuse it (see
    :func:`walker_for`) so its per-type caches stay warm."""

    def __init__(self, operators: Sequence[Operator]) -> None:
        self.operators = tuple(operators)
        self._accepts: dict[type, tuple[Operator, ...]] = {}
        self._fields = _FIELDS
        self._is_node = _IS_NODE
        self._kind = _ROLE

    def _accepted(self, kind: type) -> tuple[Operator, ...]:
        accepted = self._accepts.get(kind)
        if accepted is None:
            accepted = tuple(op for op in self.operators if issubclass(kind, op.node_types))
            self._accepts[kind] = accepted
        return accepted

    def _kind_of(self, kind: type) -> int:
        found = self._kind.get(kind)
        if found is None:
            if issubclass(kind, cst.IndentedBlock):
                found = _BLOCK
            elif issubclass(kind, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                found = _STATEMENT
            else:
                found = _OTHER
            self._kind[kind] = found
        return found

    def _children(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        kind = type(node)
        names = self._fields.get(kind)
        if names is None:
            names = self._fields[kind] = _child_fields(node)
        is_node = self._is_node
        children = []
        for name in names:
            value = getattr(node, name)
            value_type = type(value)
            if value_type is tuple or value_type is list:
                for item in value:
                    item_type = type(item)
                    flag = is_node.get(item_type)
                    if flag is None:
                        flag = is_node[item_type] = issubclass(item_type, cst.CSTNode)
                    if flag:
                        children.append(item)
                continue
            flag = is_node.get(value_type)
            if flag is None:
                flag = is_node[value_type] = issubclass(value_type, cst.CSTNode)
            if flag:
                children.append(value)
        return children

    def sites(
        self, function: cst.FunctionDef, indents: tuple[str, ...], default_indent: str
    ) -> Iterator[Site]:
        """Every node of the function body that at least one operator accepts."""
        scope = Scope(function)
        stack: list[tuple[cst.CSTNode, cst.CSTNode, cst.CSTNode | None, tuple[str, ...]]]
        stack = [(function.body, function, None, indents)]
        while stack:
            node, parent, statement, node_indents = stack.pop()
            kind = type(node)
            accepted = self._accepted(kind)
            if accepted:
                yield Site(node, parent, statement, node_indents, accepted, scope)
            role = self._kind_of(kind)
            if role == _BLOCK:
                block_indent = node.indent if node.indent is not None else default_indent
                node_indents = (*node_indents, block_indent)
            elif role == _STATEMENT and not (kind is cst.If and type(parent) is cst.If):
                statement = node
            stack.extend((child, node, statement, node_indents) for child in self._children(node))


def _child_fields(node: cst.CSTNode) -> tuple[str, ...]:
    """The fields of ``node``'s type that may hold child nodes (no whitespace, nothing inert)."""
    return tuple(
        f.name
        for f in dataclasses.fields(node)
        if f.name not in _INERT_FIELDS and not f.name.startswith("whitespace")
    )


@functools.lru_cache(maxsize=16)
def walker_for(operators: tuple[Operator, ...]) -> SiteWalker:
    return SiteWalker(operators)
