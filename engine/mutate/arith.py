"""arith: reductions and the arithmetic around them.

max-min         tl.max(x, axis=0) -> tl.min(x, axis=0);  tl.maximum(a, b) -> tl.minimum(a, b)
                tl.argmax <-> tl.argmin
sum-axis        tl.sum(x, axis=0) -> tl.sum(x, axis=1);  tl.sum(x, 1) -> tl.sum(x, 0)
add-sub         a + b -> a - b;  acc += x -> acc -= x  (and back)
mul-div         a * b -> a / b;  acc *= s -> acc /= s  (and back)
epsilon-change  var + 1e-5 -> var + 0.0;  tl.sqrt(var + eps) -> tl.sqrt(var)
where-swap      tl.where(c, a, b) -> tl.where(c, b, a)
exp-exp2        tl.exp(x) <-> tl.exp2(x);  tl.log(x) <-> tl.log2(x)
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst import matchers as m

from .base import Example, Operator
from .syntax import (
    find_arg,
    int_value,
    rename_attr,
    replace_arg_value,
    same_whitespace,
    swap_arg_values,
    tl_call,
)


def _rename_tl_call(node: cst.CSTNode, renames: dict[str, str]) -> Iterator[cst.CSTNode]:
    new = renames.get(tl_call(node) or "")
    if new is not None:
        yield node.with_changes(func=rename_attr(node.func, new))


_MAX_MIN = {
    "max": "min",
    "min": "max",
    "maximum": "minimum",
    "minimum": "maximum",
    "argmax": "argmin",
    "argmin": "argmax",
}


class MaxMin(Operator):
    name = "max-min"
    family = "arith"
    description = "swap tl.max/tl.min, tl.maximum/tl.minimum, tl.argmax/tl.argmin"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            "m = tl.max(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0)",
            "m = tl.min(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0)",
        ),
        Example.kernel(
            "y = tl.maximum(tl.load(x_ptr + tl.arange(0, BLOCK)), 0.0)",
            "y = tl.minimum(tl.load(x_ptr + tl.arange(0, BLOCK)), 0.0)",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from _rename_tl_call(node, _MAX_MIN)


_TILE = "x = tl.load(x_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :])\n"


class SumAxis(Operator):
    name = "sum-axis"
    family = "arith"
    description = "reduce a tl.sum over the other axis (0 <-> 1)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(_TILE + "s = tl.sum(x, axis=0)", _TILE + "s = tl.sum(x, axis=1)"),
        Example.kernel(_TILE + "s = tl.sum(x, 1)", _TILE + "s = tl.sum(x, 0)"),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if tl_call(node) != "sum":
            return
        index = find_arg(node, "axis", 1)
        if index is None:
            return
        axis = int_value(node.args[index].value)
        if axis in (0, 1):
            yield replace_arg_value(node, index, cst.Integer(str(1 - axis)))


def _swap_operator(
    node: cst.CSTNode,
    binary: dict[type, type[cst.CSTNode]],
    augmented: dict[type, type[cst.CSTNode]],
) -> Iterator[cst.CSTNode]:
    if isinstance(node, cst.BinaryOperation):
        new = binary.get(type(node.operator))
    elif isinstance(node, cst.AugAssign):
        new = augmented.get(type(node.operator))
    else:
        return
    if new is not None:
        yield node.with_changes(operator=same_whitespace(new, node.operator))


class AddSub(Operator):
    name = "add-sub"
    family = "arith"
    description = "swap + and - (also += and -=)"
    node_types = (cst.BinaryOperation, cst.AugAssign)
    examples = (
        Example.kernel(
            "y = tl.load(x_ptr + tl.arange(0, BLOCK)) + 1.0",
            "y = tl.load(x_ptr + tl.arange(0, BLOCK)) - 1.0",
        ),
        Example.kernel(
            """
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            acc += tl.load(x_ptr + tl.arange(0, BLOCK))
            """,
            """
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            acc -= tl.load(x_ptr + tl.arange(0, BLOCK))
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from _swap_operator(
            node,
            {cst.Add: cst.Subtract, cst.Subtract: cst.Add},
            {cst.AddAssign: cst.SubtractAssign, cst.SubtractAssign: cst.AddAssign},
        )


class MulDiv(Operator):
    name = "mul-div"
    family = "arith"
    description = "swap * and / (also *= and /=)"
    node_types = (cst.BinaryOperation, cst.AugAssign)
    examples = (
        Example.kernel(
            "y = tl.load(x_ptr + tl.arange(0, BLOCK)) / n",
            "y = tl.load(x_ptr + tl.arange(0, BLOCK)) * n",
        ),
        Example.kernel(
            """
            acc = tl.load(x_ptr + tl.arange(0, BLOCK))
            acc *= 0.5
            """,
            """
            acc = tl.load(x_ptr + tl.arange(0, BLOCK))
            acc /= 0.5
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from _swap_operator(
            node,
            {cst.Multiply: cst.Divide, cst.Divide: cst.Multiply},
            {cst.MultiplyAssign: cst.DivideAssign, cst.DivideAssign: cst.MultiplyAssign},
        )


_EPSILON_NAMES = ("eps", "epsilon")
_EPSILON_MAX = 1e-3


def _is_epsilon_name(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value.lower() in _EPSILON_NAMES


class EpsilonChange(Operator):
    name = "epsilon-change"
    family = "arith"
    description = "remove a numerical-safety epsilon (small literal -> 0.0, x + eps -> x)"
    node_types = (cst.Float, cst.BinaryOperation)
    examples = (
        Example.kernel(
            """
            var = tl.load(x_ptr + tl.arange(0, BLOCK))
            rstd = 1 / tl.sqrt(var + 1e-5)
            """,
            """
            var = tl.load(x_ptr + tl.arange(0, BLOCK))
            rstd = 1 / tl.sqrt(var + 0.0)
            """,
        ),
        Example.kernel(
            """
            var = tl.load(x_ptr + tl.arange(0, BLOCK))
            rstd = 1 / tl.sqrt(var + eps)
            """,
            """
            var = tl.load(x_ptr + tl.arange(0, BLOCK))
            rstd = 1 / tl.sqrt(var)
            """,
            params="x_ptr, eps, BLOCK: tl.constexpr",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if isinstance(node, cst.Float):
            if 0 < float(node.evaluated_value) <= _EPSILON_MAX:
                yield node.with_changes(value="0.0")
        elif isinstance(node, cst.BinaryOperation) and isinstance(
            node.operator, (cst.Add, cst.Subtract)
        ):
            if _is_epsilon_name(node.right):
                yield node.left
            elif _is_epsilon_name(node.left) and isinstance(node.operator, cst.Add):
                yield node.right


_POSITIONAL = m.Arg(keyword=None, star="")
_THREE_POSITIONAL = m.Call(args=[_POSITIONAL, _POSITIONAL, _POSITIONAL])


class WhereSwap(Operator):
    name = "where-swap"
    family = "arith"
    description = "swap the two branches of tl.where(cond, a, b)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            y = tl.where(offs < n, tl.load(x_ptr + offs), 0.0)
            """,
            """
            offs = tl.arange(0, BLOCK)
            y = tl.where(offs < n, 0.0, tl.load(x_ptr + offs))
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if tl_call(node) == "where" and m.matches(node, _THREE_POSITIONAL):
            yield swap_arg_values(node, 1, 2)


_EXP_LOG = {"exp": "exp2", "exp2": "exp", "log": "log2", "log2": "log"}


class ExpExp2(Operator):
    name = "exp-exp2"
    family = "arith"
    description = (
        "swap natural and base-2 exponent/logarithm (tl.exp <-> tl.exp2, tl.log <-> tl.log2)"
    )
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            "y = tl.exp(tl.load(x_ptr + tl.arange(0, BLOCK)))",
            "y = tl.exp2(tl.load(x_ptr + tl.arange(0, BLOCK)))",
        ),
        Example.kernel(
            "y = tl.log2(tl.load(x_ptr + tl.arange(0, BLOCK)))",
            "y = tl.log(tl.load(x_ptr + tl.arange(0, BLOCK)))",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from _rename_tl_call(
            node, {"exp": "exp2", "exp2": "exp", "log": "log2", "log2": "log"}
        )


OPERATORS: tuple[Operator, ...] = (
    MaxMin(),
    SumAxis(),
    AddSub(),
    MulDiv(),
    EpsilonChange(),
    WhereSwap(),
    ExpExp2(),
)
