"""arith: reductions and the arithmetic around them.

max-min         tl.max(x, axis=0) -> tl.min(x, axis=0);  tl.maximum(a, b) -> tl.minimum(a, b)
                tl.argmax <-> tl.argmin
sum-axis        tl.sum(x, axis=0) -> tl.sum(x, axis=1);  tl.sum(x, 1) -> tl.sum(x, 0)
                (not on a block known to be 1-D: it has no axis 1)
add-sub         a + b -> a - b;  acc += x -> acc -= x  (and back)
mul-div         a * b -> a / b;  acc *= s -> acc /= s  (and back)
                pid * BLOCK -> pid // BLOCK  (integer index arithmetic: a float offset
                would not compile)
epsilon-change  var + 1e-5 -> var + 0.0;  tl.sqrt(var + eps) -> tl.sqrt(var)
where-swap      tl.where(c, a, b) -> tl.where(c, b, a)
exp-exp2        tl.exp(x) <-> tl.exp2(x);  tl.log(x) <-> tl.log2(x)
where-drop      tl.where(c, a, b) -> a, and -> b  (a literal fill as tl.zeros_like(a) + fill)
abs-drop        tl.abs(x) -> x;  abs(x) -> x
clamp-drop      tl.maximum(x, 1e-6) -> x;  tl.minimum(x, MAX) -> x;  tl.clamp(x, lo, hi) -> x
reduce-axis-drop
                tl.sum(x, axis=1) -> tl.zeros_like(tl.sum(x, axis=1)) + tl.sum(x)
                (a reduction over every axis where one was meant, broadcast back to the
                shape the kernel expects so that it still compiles; axis 0 is left alone:
                on the 1-D blocks most kernels reduce it is the only axis)
acc-init-hoist  for tile in range(pid, n_tiles, step):      acc = tl.zeros(...)
                    acc = tl.zeros(...)                -> for tile in range(pid, n_tiles, step):
                    for k in ...: acc += ...                    for k in ...: acc += ...
                for row in range(pid, n_rows, step):        acc = 0.0
                    acc = 0.0                          -> for row in range(pid, n_rows, step):
                    for k in ...: acc += tl.sum(...)            for k in ...: acc += tl.sum(...)
                (the accumulator is not reset for the next tile of a grid-stride loop; a
                scalar initialiser, ``0.0``, ``0`` or ``-float("inf")``, moves only when the
                loop updates it in nested loops or ifs, where Triton keeps its type, and
                never by a value known to be a block)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst
from libcst import matchers as m

from .base import Example, Operator
from .scope import INT, Scope
from .syntax import (
    binop,
    find_arg,
    int_value,
    is_infinity,
    number_value,
    remove_args,
    rename_attr,
    replace_arg_value,
    same_whitespace,
    sole_name_assignment,
    spaced,
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
    description = "reduce a tl.sum over the other axis (0 <-> 1) of a block with two or more"
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

    def mutations_in(self, node: cst.CSTNode, scope: Scope) -> Iterator[cst.CSTNode]:
        """A 1-D block has no axis 1: leave reductions of blocks known to be 1-D alone."""
        if tl_call(node) == "sum" and node.args and node.args[0].keyword is None:
            rank = scope.rank(node.args[0].value)
            if rank is not None and rank < 2:
                return
        yield from self.mutations(node)


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
    description = "swap * and / (also *= and /=); on integer index arithmetic * -> //"
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
        Example.kernel(
            "offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
            "offs = tl.program_id(0) // BLOCK + tl.arange(0, BLOCK)",
        ),
        Example.kernel(
            """
            x_ptrs = x_ptr + tl.arange(0, BLOCK)
            x_ptrs += BLOCK * n
            """,
            """
            x_ptrs = x_ptr + tl.arange(0, BLOCK)
            x_ptrs += BLOCK // n
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from _swap_operator(
            node,
            {cst.Multiply: cst.Divide, cst.Divide: cst.Multiply},
            {cst.MultiplyAssign: cst.DivideAssign, cst.DivideAssign: cst.MultiplyAssign},
        )

    def mutations_in(self, node: cst.CSTNode, scope: Scope) -> Iterator[cst.CSTNode]:
        """``pid * BLOCK`` -> ``pid / BLOCK`` is a float offset no pointer takes and
        no loop bound accepts: on integers the division bug is ``//``."""
        floor_division = _integer_floor_division(node, scope)
        if floor_division is not None:
            yield floor_division
            return
        yield from self.mutations(node)


def _integer_floor_division(node: cst.CSTNode, scope: Scope) -> cst.CSTNode | None:
    """An integer ``a * b`` as ``a // b`` (``a *= b`` as ``a //= b``); None for anything else."""
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Multiply:
        if scope.kind(node) == INT:
            return node.with_changes(operator=same_whitespace(cst.FloorDivide, node.operator))
    elif type(node) is cst.AugAssign and type(node.operator) is cst.MultiplyAssign:
        if scope.kind(node.target) == INT and scope.kind(node.value) == INT:
            new = same_whitespace(cst.FloorDivideAssign, node.operator)
            return node.with_changes(operator=new)
    return None


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
            kept = _without_epsilon(node)
            if kept is not None:
                yield kept


def _without_epsilon(node: cst.BinaryOperation) -> cst.BaseExpression | None:
    """Of ``x + eps``, ``x - eps`` or ``eps + x``, the ``x``; None where no epsilon name is
    added or subtracted."""
    if _is_epsilon_name(node.right):
        return node.left
    if _is_epsilon_name(node.left) and isinstance(node.operator, cst.Add):
        return node.right
    return None


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


def _is_literal(node: cst.CSTNode) -> bool:
    return number_value(node) is not None or is_infinity(node)


def _kept_branch(
    branch: cst.BaseExpression, other: cst.BaseExpression, namespace: cst.BaseExpression
) -> cst.BaseExpression:
    """``branch`` in place of the whole ``tl.where``; a literal fill keeps the other
    branch's shape (``tl.zeros_like(a) + fill``), or a reduction of it would not compile."""
    if not _is_literal(branch) or _is_literal(other):
        return branch
    zeros = cst.Call(
        func=cst.Attribute(value=namespace, attr=cst.Name("zeros_like")),
        args=[cst.Arg(other)],
    )
    return zeros if number_value(branch) == 0 else binop(zeros, spaced(cst.Add), branch)


class WhereDrop(Operator):
    name = "where-drop"
    family = "arith"
    description = "replace tl.where(cond, a, b) by one branch (the selection is lost)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            x = tl.where(offs < n, x - 1.0, 0.0)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            x = x - 1.0
            """,
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            x = tl.where(offs < n, x - 1.0, 0.0)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            x = tl.zeros_like(x - 1.0)
            """,
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.where(offs < n, float("-inf"), tl.load(x_ptr + offs))
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.zeros_like(tl.load(x_ptr + offs)) + float("-inf")
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if tl_call(node) == "where" and m.matches(node, _THREE_POSITIONAL):
            a, b = node.args[1].value, node.args[2].value
            yield _kept_branch(a, b, node.func.value)
            yield _kept_branch(b, a, node.func.value)


class AbsDrop(Operator):
    name = "abs-drop"
    family = "arith"
    description = "drop an absolute value: tl.abs(x) / abs(x) -> x"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            "err = tl.max(tl.abs(tl.load(x_ptr + tl.arange(0, BLOCK))), axis=0)",
            "err = tl.max(tl.load(x_ptr + tl.arange(0, BLOCK)), axis=0)",
        ),
        Example.kernel(
            "scale = abs(tl.load(x_ptr)) + 1.0",
            "scale = tl.load(x_ptr) + 1.0",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if type(node) is not cst.Call or len(node.args) != 1:
            return
        arg = node.args[0]
        if arg.keyword is not None or arg.star:
            return
        if _is_abs_call(node):
            yield arg.value


def _is_abs_call(call: cst.Call) -> bool:
    """``tl.abs(...)`` or Python's ``abs(...)``."""
    func = call.func
    return tl_call(call) == "abs" or (type(func) is cst.Name and func.value == "abs")


def _is_bound(node: cst.CSTNode) -> bool:
    """A clamp's bound: a number, an infinity, or a constant-looking name (``EPS``,
    ``eps``, ``min_val``); a value computed in the kernel is not one."""
    if number_value(node) is not None or is_infinity(node):
        return True
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        node = node.expression
    if type(node) is not cst.Name:
        return False
    name = node.value
    lowered = name.lower()
    return name.isupper() or any(word in lowered for word in ("eps", "min", "max", "clip"))


class ClampDrop(Operator):
    name = "clamp-drop"
    family = "arith"
    description = (
        "drop a clamp against a constant: tl.maximum(x, eps) -> x, tl.clamp(x, lo, hi) -> x"
    )
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            var = tl.load(x_ptr + tl.arange(0, BLOCK))
            rstd = 1 / tl.sqrt(tl.maximum(var, 1e-6))
            """,
            """
            var = tl.load(x_ptr + tl.arange(0, BLOCK))
            rstd = 1 / tl.sqrt(var)
            """,
        ),
        Example.kernel(
            "y = tl.minimum(MAX, tl.load(x_ptr + tl.arange(0, BLOCK)))",
            "y = tl.load(x_ptr + tl.arange(0, BLOCK))",
            params="x_ptr, n, BLOCK: tl.constexpr, MAX: tl.constexpr",
        ),
        Example.kernel(
            "y = tl.clamp(tl.load(x_ptr + tl.arange(0, BLOCK)), -1.0, 1.0)",
            "y = tl.load(x_ptr + tl.arange(0, BLOCK))",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        kind = tl_call(node)
        if kind not in ("maximum", "minimum", "clamp"):
            return
        args = node.args
        if not _first_two_positional(args):
            return
        if kind == "clamp":
            yield args[0].value
            return
        clamped = _clamped(args[0].value, args[1].value)
        if clamped is not None:
            yield clamped


def _first_two_positional(args: Sequence[cst.Arg]) -> bool:
    """Whether a call's first two arguments are there and plain positional ones."""
    return len(args) >= 2 and all(arg.keyword is None and not arg.star for arg in args[:2])


def _clamped(a: cst.BaseExpression, b: cst.BaseExpression) -> cst.BaseExpression | None:
    """Of ``tl.maximum(a, b)``'s operands, the value clamped against the other, a
    bound; None where both or neither are bounds."""
    first, second = _is_bound(a), _is_bound(b)
    if second and not first:
        return a
    if first and not second:
        return b
    return None


def _is_integer(node: cst.CSTNode) -> bool:
    """An integer literal, optionally negated (``1``, ``-1``)."""
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        node = node.expression
    return type(node) is cst.Integer


#: Reductions that take ``axis=None`` (every axis); argmax/argmin need an axis.
_REDUCTIONS = frozenset({"sum", "max", "min", "xor_sum"})


class ReduceAxisDrop(Operator):
    name = "reduce-axis-drop"
    family = "arith"
    description = "reduce over every axis where one axis was meant (kept in the expected shape)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            _TILE + "s = tl.sum(x, axis=1)",
            _TILE + "s = tl.zeros_like(tl.sum(x, axis=1)) + tl.sum(x)",
        ),
        Example.kernel(
            _TILE + "m = tl.max(x, 1)[:, None]",
            _TILE + "m = (tl.zeros_like(tl.max(x, 1)) + tl.max(x))[:, None]",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        kind = tl_call(node)
        if kind not in _REDUCTIONS or find_arg(node, "return_indices") is not None:
            return
        index = _droppable_axis(node)
        if index is None:
            return
        zeros = cst.Call(
            func=cst.Attribute(value=node.func.value, attr=cst.Name("zeros_like")),
            args=[cst.Arg(node)],
        )
        yield binop(zeros, spaced(cst.Add), remove_args(node, [index]))


def _droppable_axis(call: cst.Call) -> int | None:
    """Index of a reduction's ``axis`` argument where it is a non-zero integer literal
    whose removal moves no other positional argument; else None."""
    index = find_arg(call, "axis", 1)
    if index is None:
        return None
    axis = number_value(call.args[index].value)
    if axis is None or axis == 0 or not _is_integer(call.args[index].value):
        return None
    if call.args[index].keyword is None and index + 1 < len(call.args):
        if call.args[index + 1].keyword is None:  # tl.sum(x, 1, True): keep positions
            return None
    return index


_INITIALISERS = frozenset({"zeros", "full"})


def _is_scalar_init(value: cst.BaseExpression) -> bool:
    """``0.0``, ``0``, ``-1``, ``-float("inf")``, ``math.inf``: a scalar initialiser."""
    return number_value(value) is not None or is_infinity(value)


def _assigned_name(statement: cst.CSTNode) -> tuple[str, bool] | None:
    """``acc = tl.zeros(...)`` / ``tl.full(...)`` alone on its line -> ("acc", False);
    ``acc = 0.0`` (a scalar literal) -> ("acc", True)."""
    found = sole_name_assignment(statement)
    if found is None:
        return None
    name, value = found
    if tl_call(value) in _INITIALISERS:
        return name, False
    if _is_scalar_init(value):
        return name, True
    return None


def _names_in(node: cst.CSTNode) -> set[str]:
    return {name.value for name in m.findall(node, m.Name())}


def _accumulates(statements, name: str) -> bool:
    """Does one of ``statements`` (at any depth) update ``name`` from its own value?"""
    for statement in statements:
        if m.findall(statement, m.AugAssign(target=m.Name(name))):
            return True
        for found in m.findall(statement, m.Assign(targets=[m.AssignTarget(m.Name(name))])):
            if name in _names_in(found.value):
                return True
    return False


def _assigned_names(statements) -> set[str]:
    names: set[str] = set()
    for statement in statements:
        for target in m.findall(statement, m.AssignTarget() | m.AugAssign()):
            names |= _names_in(target.target)
    return names


def _updated_values(statements, name: str) -> list[cst.BaseExpression]:
    """The values ``name`` is given in ``statements`` (``name = v`` / ``name += v``), at any depth."""
    values = []
    for statement in statements:
        for found in m.findall(statement, m.AugAssign(target=m.Name(name))):
            values.append(found.value)
        for found in m.findall(statement, m.Assign(targets=[m.AssignTarget(m.Name(name))])):
            values.append(found.value)
    return values


def _keeps_scalar_type(statements, name: str, scope: Scope | None) -> bool:
    """May a scalar ``name`` become loop-carried across ``statements`` (the rest of a
    loop body) without changing type? Yes when every update sits in a nested loop or
    if (where Triton already requires its type to stay) and none is known to be a
    block (``acc += tl.load(block)``: the original cannot compile either)."""
    for statement in statements:
        if type(statement) is cst.SimpleStatementLine and _updated_values([statement], name):
            return False  # a straight-line update may turn it into a block
    if scope is None:
        return True
    return not any((scope.rank(v) or 0) > 0 for v in _updated_values(statements, name))


class AccInitHoist(Operator):
    name = "acc-init-hoist"
    family = "arith"
    description = (
        "move an accumulator's initialisation (tl.zeros/tl.full or a scalar such as 0.0)"
        " out of the loop it is reset in"
    )
    node_types = (cst.IndentedBlock,)
    examples = (
        Example.kernel(
            """
            for tile in range(tl.program_id(0), n, tl.num_programs(0)):
                acc = tl.zeros((BLOCK,), dtype=tl.float32)
                for k in range(0, n, BLOCK):
                    acc += tl.load(x_ptr + k + tl.arange(0, BLOCK))
                tl.store(y_ptr + tile * BLOCK + tl.arange(0, BLOCK), acc)
            """,
            """
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for tile in range(tl.program_id(0), n, tl.num_programs(0)):
                for k in range(0, n, BLOCK):
                    acc += tl.load(x_ptr + k + tl.arange(0, BLOCK))
                tl.store(y_ptr + tile * BLOCK + tl.arange(0, BLOCK), acc)
            """,
        ),
        Example.kernel(
            """
            for row in range(tl.program_id(0), n, tl.num_programs(0)):
                acc = 0.0
                for k in range(0, n, BLOCK):
                    acc += tl.sum(tl.load(x_ptr + row * n + k + tl.arange(0, BLOCK)), axis=0)
                tl.store(y_ptr + row, acc)
            """,
            """
            acc = 0.0
            for row in range(tl.program_id(0), n, tl.num_programs(0)):
                for k in range(0, n, BLOCK):
                    acc += tl.sum(tl.load(x_ptr + row * n + k + tl.arange(0, BLOCK)), axis=0)
                tl.store(y_ptr + row, acc)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from self._hoisted(node, None)

    def mutations_in(self, node: cst.CSTNode, scope: Scope) -> Iterator[cst.CSTNode]:
        yield from self._hoisted(node, scope)

    def _hoisted(self, node: cst.CSTNode, scope: Scope | None) -> Iterator[cst.CSTNode]:
        if type(node) is not cst.IndentedBlock:
            return
        for position, loop in enumerate(node.body):
            if type(loop) is not cst.For or type(loop.body) is not cst.IndentedBlock:
                continue
            for index in _hoistable_inits(loop, scope):
                yield _with_init_hoisted(node, position, loop, index)


def _hoistable_inits(loop: cst.For, scope: Scope | None) -> Iterator[int]:
    """Where in ``loop``'s body an accumulator is initialised that could move out of
    it: not last, its value independent of the loop, then updated from its own value
    (a scalar only where that keeps its type)."""
    body = loop.body.body
    local = None
    for index, statement in enumerate(body):
        found = _assigned_name(statement)
        if found is None or index == len(body) - 1:
            continue
        name, scalar = found
        if local is None:
            local = _assigned_names(body) | _names_in(loop.target)
        if _names_in(statement.body[0].value) & local:
            continue  # its value depends on the loop: it cannot move out
        if _accumulates_after(body[index + 1 :], name, scalar, scope):
            yield index


def _accumulates_after(
    rest: Sequence[cst.BaseStatement], name: str, scalar: bool, scope: Scope | None
) -> bool:
    """Whether the statements after an init update ``name`` from its own value (a scalar:
    keeping its type)."""
    if not _accumulates(rest, name):
        return False
    return not scalar or _keeps_scalar_type(rest, name, scope)


def _with_init_hoisted(
    block: cst.IndentedBlock, position: int, loop: cst.For, index: int
) -> cst.IndentedBlock:
    """``block`` with statement ``index`` of its loop at ``position`` moved just before
    that loop (taking the loop's leading lines)."""
    body = loop.body.body
    statement = body[index]
    rest = (*body[:index], *body[index + 1 :])
    moved = statement.with_changes(leading_lines=loop.leading_lines)
    new_loop = loop.with_changes(leading_lines=(), body=loop.body.with_changes(body=rest))
    return block.with_changes(
        body=(*block.body[:position], moved, new_loop, *block.body[position + 1 :])
    )


OPERATORS: tuple[Operator, ...] = (
    MaxMin(),
    SumAxis(),
    AddSub(),
    MulDiv(),
    EpsilonChange(),
    WhereSwap(),
    ExpExp2(),
    WhereDrop(),
    AbsDrop(),
    ClampDrop(),
    ReduceAxisDrop(),
    AccInitHoist(),
)
