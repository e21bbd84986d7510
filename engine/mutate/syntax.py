"""Small libcst helpers the operators share: naming Triton calls, editing call
arguments, and building expressions that keep their meaning when spliced.

Recognising ``tl.load`` is the hot path of generation (every operator looks at
every call of every kernel), so ``tl_call`` and friends use exact type checks;
operators use ``libcst.matchers`` (~25 us a match) only after such a cheap
filter has said "maybe".
"""

from __future__ import annotations

from collections.abc import Iterable

import libcst as cst
from libcst import matchers as m

#: The Triton language namespace: ``tl`` or ``triton.language``.
TL = m.Name("tl") | m.Attribute(value=m.Name("triton"), attr=m.Name("language"))
#: ``tl.float32`` / ``triton.language.float32``.
FLOAT32 = m.Attribute(value=TL, attr=m.Name("float32"))


# These run for every call of every kernel, once per operator: exact type
# checks (libcst's concrete node classes are final) avoid the slow abstract
# ``isinstance`` path.


def is_tl_namespace(node: cst.CSTNode) -> bool:
    """True for ``tl`` and ``triton.language``."""
    kind = type(node)
    if kind is cst.Name:
        return node.value == "tl"
    return (
        kind is cst.Attribute
        and node.attr.value == "language"
        and type(node.value) is cst.Name
        and node.value.value == "triton"
    )


def tl_attr(node: cst.CSTNode) -> str | None:
    """``tl.X`` / ``triton.language.X`` -> ``"X"``; anything else -> None."""
    if type(node) is cst.Attribute and is_tl_namespace(node.value):
        return node.attr.value
    return None


def tl_call(node: cst.CSTNode) -> str | None:
    """The ``X`` of a call ``tl.X(...)`` / ``triton.language.X(...)``, else None."""
    if type(node) is cst.Call:
        return tl_attr(node.func)
    return None


def rename_attr(node: cst.Attribute, new: str) -> cst.Attribute:
    """``tl.max`` -> ``tl.min`` keeping the prefix the author wrote."""
    return node.with_changes(attr=node.attr.with_changes(value=new))


def find_arg(call: cst.Call, keyword: str, position: int | None = None) -> int | None:
    """Index in ``call.args`` of the argument passed as ``keyword=`` or, when
    ``position`` is given, as that positional argument; None when absent."""
    for index, arg in enumerate(call.args):
        if arg.keyword is not None and arg.keyword.value == keyword:
            return index
    if position is not None and position < len(call.args):
        arg = call.args[position]
        if arg.keyword is None and arg.star == "":
            return position
    return None


def replace_arg_value(call: cst.Call, index: int, value: cst.BaseExpression) -> cst.Call:
    args = list(call.args)
    args[index] = args[index].with_changes(value=value)
    return call.with_changes(args=args)


def remove_args(call: cst.Call, indices: Iterable[int]) -> cst.Call:
    """Drop arguments; the new last argument inherits the old last one's comma
    so ``f(a, b=1)`` becomes ``f(a)`` and a trailing comma layout survives."""
    drop = set(indices)
    kept = [arg for index, arg in enumerate(call.args) if index not in drop]
    if kept and len(call.args) - 1 in drop:
        kept[-1] = kept[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=kept)


def swap_arg_values(call: cst.Call, first: int, second: int) -> cst.Call:
    args = list(call.args)
    a, b = args[first], args[second]
    args[first] = a.with_changes(value=b.value)
    args[second] = b.with_changes(value=a.value)
    return call.with_changes(args=args)


def sole_name_assignment(statement: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    """``name = value`` alone on its line, to one plain name -> (name, value); else None."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if type(small) is not cst.Assign or len(small.targets) != 1:
        return None
    target = small.targets[0].target
    return (target.value, small.value) if type(target) is cst.Name else None


def int_value(node: cst.CSTNode) -> int | None:
    """The value of an integer literal without parentheses, else None."""
    if isinstance(node, cst.Integer) and not node.lpar:
        try:
            return int(node.value.replace("_", ""), 0)
        except ValueError:
            return None
    return None


def number_value(node: cst.CSTNode) -> float | None:
    """Numeric value of an int/float literal, optionally negated; else None."""
    sign = 1.0
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        sign, node = -1.0, node.expression
    if isinstance(node, (cst.Integer, cst.Float)):
        return sign * float(node.evaluated_value)
    return None


_FLOAT_OF_STRING = m.Call(func=m.Name("float"), args=[m.Arg(value=m.SimpleString(), keyword=None)])
_INFINITY = m.Attribute(value=m.Name(), attr=m.Name("inf"))  # math.inf, np.inf


def is_infinity(node: cst.CSTNode) -> bool:
    """``float("inf")``, ``float('-inf')``, ``-float("inf")``, ``math.inf``, ``-math.inf``."""
    if m.matches(node, m.UnaryOperation(operator=m.Minus() | m.Plus())):
        node = node.expression
    if m.matches(node, _INFINITY):
        return True
    if m.matches(node, _FLOAT_OF_STRING):
        text = node.args[0].value.evaluated_value
        return isinstance(text, str) and text.strip().lstrip("+-").lower() in ("inf", "infinity")
    return False


# -- precedence ----------------------------------------------------------------

_BINARY_PRECEDENCE: dict[type[cst.BaseBinaryOp], int] = {
    cst.BitOr: 6,
    cst.BitXor: 7,
    cst.BitAnd: 8,
    cst.LeftShift: 9,
    cst.RightShift: 9,
    cst.Add: 10,
    cst.Subtract: 10,
    cst.Multiply: 11,
    cst.Divide: 11,
    cst.FloorDivide: 11,
    cst.Modulo: 11,
    cst.MatrixMultiply: 11,
    cst.Power: 13,
}
ATOM = 14


_FIXED_PRECEDENCE: dict[type, int] = {
    cst.Comparison: 5,
    cst.IfExp: 1,
    cst.Lambda: 0,
    cst.NamedExpr: 0,
}


def precedence(node: cst.CSTNode) -> int:
    """Python operator precedence of an expression (higher binds tighter)."""
    if getattr(node, "lpar", None):
        return ATOM
    kind = type(node)
    if kind is cst.BinaryOperation:
        return _BINARY_PRECEDENCE[type(node.operator)]
    if kind is cst.UnaryOperation:
        return 4 if type(node.operator) is cst.Not else 12
    if kind is cst.BooleanOperation:
        return 3 if type(node.operator) is cst.And else 2
    return _FIXED_PRECEDENCE.get(kind, ATOM)


#: what an operand needs in a place whose need does not depend on its operator
_FIXED_REQUIRED: dict[type, int] = {
    **dict.fromkeys((cst.Attribute, cst.Subscript, cst.Call, cst.Await), ATOM),
    cst.Comparison: 6,
    cst.ComparisonTarget: 6,
    cst.IfExp: 2,
}


def required_precedence(node: cst.CSTNode, parent: cst.CSTNode | None) -> int:
    """The lowest precedence ``node`` may have, in its place under ``parent``,
    without parentheses."""
    kind = type(parent)
    if kind is cst.BinaryOperation:
        own = _BINARY_PRECEDENCE[type(parent.operator)]
        if type(parent.operator) is cst.Power or parent.right is node:
            return own + 1
        return own
    if kind is cst.UnaryOperation:
        return 5 if type(parent.operator) is cst.Not else 12
    if kind is cst.BooleanOperation:
        return 4 if type(parent.operator) is cst.And else 3
    return _FIXED_REQUIRED.get(kind, 0)


def parenthesize(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def binop(left: cst.BaseExpression, op: cst.BaseBinaryOp, right: cst.BaseExpression):
    """``left op right`` with operands parenthesised where precedence needs it."""
    node = cst.BinaryOperation(left=left, operator=op, right=right)
    if precedence(left) < required_precedence(left, node):
        node = node.with_changes(left=parenthesize(left))
    if precedence(right) < required_precedence(right, node):
        node = node.with_changes(right=parenthesize(right))
    return node


def spaced(op: type[cst.BaseBinaryOp]) -> cst.BaseBinaryOp:
    """A binary operator with one space either side, as formatters write it."""
    return op(
        whitespace_before=cst.SimpleWhitespace(" "),
        whitespace_after=cst.SimpleWhitespace(" "),
    )


def same_whitespace(new: type[cst.CSTNode], old: cst.CSTNode) -> cst.CSTNode:
    """An operator token of type ``new`` carrying ``old``'s surrounding spaces."""
    return new(whitespace_before=old.whitespace_before, whitespace_after=old.whitespace_after)
