"""masks: the guards that keep a block's lanes inside the tensor.

A kernel whose tests only use sizes that are multiples of BLOCK never
exercises its masks; these mutants find out.

    mask-drop            tl.load(p + offs, mask=m, other=0.0) -> tl.load(p + offs)
                         tl.store(p + offs, y, mask=m)        -> tl.store(p + offs, y)
    other-drop           tl.load(p, mask=m, other=-float("inf")) -> tl.load(p, mask=m)
    other-change         other=0.0 -> other=1.0 and other=-float("inf");  other=1 -> other=0;
                         other=2.0 -> other=0.0 and other=-float("inf");
                         other=-float("inf") -> other=0.0;  other=NEG_INF -> other=0.0;
                         other=float("inf") -> other=0.0 and other=-float("inf");
                         other=pad_value -> other=0.0 and other=-float("inf")
                         (a fill that already is -inf, literally or by its name, gets
                         no -inf; an integer literal gets none either)
    boundary-check-drop  tl.load(block_ptr, boundary_check=(0, 1)) -> tl.load(block_ptr)
    mask-and-or          (rm[:, None] < M) & (rn[None, :] < N)
                      -> (rm[:, None] < M) | (rn[None, :] < N)
    mask-term-drop       (rm[:, None] < M) & (rn[None, :] < N) -> (rm[:, None] < M)
                         tl.load(p, mask=(offs < n) and (offs >= lo)) -> mask=(offs < n)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import libcst as cst

from .base import Example, Operator
from .syntax import (
    find_arg,
    is_infinity,
    number_value,
    remove_args,
    replace_arg_value,
    same_whitespace,
    tl_call,
)

_LOAD_STORE_MASK_POSITION = {"load": 1, "store": 2}


def _is_none(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _mask_index(call: cst.Call, kind: str) -> int | None:
    index = find_arg(call, "mask", _LOAD_STORE_MASK_POSITION[kind])
    if index is None or _is_none(call.args[index].value):
        return None
    return index


class MaskDrop(Operator):
    name = "mask-drop"
    family = "masks"
    description = "remove mask= from tl.load/tl.store (and the load's other=, invalid without it)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr + offs, x, mask=offs < n)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(y_ptr + offs, x, mask=offs < n)
            """,
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr + offs, x, mask=offs < n)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr + offs, x)
            """,
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(
                x_ptr + offs,
                mask=offs < n,
                other=0.0,
            )
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(
                x_ptr + offs,
            )
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        kind = tl_call(node)
        if kind not in _LOAD_STORE_MASK_POSITION:
            return
        mask = _mask_index(node, kind)
        if mask is None:
            return
        drop = [mask]
        if kind == "load":
            other = find_arg(node, "other", 2)
            if other is not None:
                drop.append(other)
        yield remove_args(node, drop)


class OtherDrop(Operator):
    name = "other-drop"
    family = "masks"
    description = "remove other= from a masked tl.load (masked-off lanes read garbage)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if tl_call(node) != "load" or _mask_index(node, "load") is None:
            return
        other = find_arg(node, "other", 2)
        if other is not None:
            yield remove_args(node, [other])


_NEGATIVE_INFINITY = cst.UnaryOperation(
    operator=cst.Minus(),
    expression=cst.Call(func=cst.Name("float"), args=[cst.Arg(cst.SimpleString('"inf"'))]),
)
#: Names that are no fill value to change.
_NOT_FILLS = frozenset({"None", "True", "False"})


#: A name that stands for an infinity (``inf``, ``NEG_INF``, ``MINUS_INFINITY``,
#: ``ninf``), and one that says it is the negative one.
_INFINITY_NAME = re.compile(r"inf(inity)?$", re.IGNORECASE)
_NEGATIVE_NAME = re.compile(r"neg|minus|^n_?inf", re.IGNORECASE)


def _is_negative_infinity(value: cst.BaseExpression) -> bool:
    """``-float("inf")``, ``float("-inf")``, ``-math.inf``, ``-inf``, ``NEG_INF``,
    ``-INF``: a fill that already is minus infinity (``-NEG_INF`` is not)."""
    negative = False
    while type(value) is cst.UnaryOperation and type(value.operator) in (cst.Minus, cst.Plus):
        negative ^= type(value.operator) is cst.Minus
        value = value.expression
    if type(value) is cst.Name:
        if not _INFINITY_NAME.search(value.value):
            return False
        return negative ^ bool(_NEGATIVE_NAME.search(value.value))
    if not is_infinity(value):
        return False
    if type(value) is cst.Call:  # float("-inf")
        negative ^= value.args[0].value.evaluated_value.strip().startswith("-")
    return negative


def _changed_fills(value: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The fills ``value`` changes to: 0 <-> 1 for a zero and a one, else 0; and
    -inf (a sum's padding written as a max's) for any fill that could be a float
    and is not -inf already."""
    is_int = isinstance(value, cst.Integer) or (
        isinstance(value, cst.UnaryOperation) and isinstance(value.expression, cst.Integer)
    )
    changed = _changed_fill(value, is_int)
    if changed is None:
        return
    yield changed
    if not is_int and not _is_negative_infinity(value):
        yield _NEGATIVE_INFINITY


def _changed_fill(value: cst.BaseExpression, is_int: bool) -> cst.BaseExpression | None:
    """The first fill ``value`` changes to: 0 <-> 1, any other number or an infinity ->
    0, a named fill -> 0.0; None where ``value`` is no fill to change."""
    number = number_value(value)
    if number == 0:
        return cst.Integer("1") if is_int else cst.Float("1.0")
    if number is not None:
        return cst.Integer("0") if is_int else cst.Float("0.0")
    if is_infinity(value) or _is_named_fill(value):
        return cst.Float("0.0")  # other=float("inf"), other=NEG_INF, other=-inf, other=pad
    return None


def _is_named_fill(value: cst.BaseExpression) -> bool:
    """A fill given by a name, maybe negated (``NEG_INF``, ``-inf``, ``pad``), that is one."""
    minus = type(value) is cst.UnaryOperation and type(value.operator) is cst.Minus
    named = value.expression if minus else value
    return type(named) is cst.Name and named.value not in _NOT_FILLS


class OtherChange(Operator):
    name = "other-change"
    family = "masks"
    description = (
        "change a tl.load's other= fill value (0 <-> 1, a fill -> 0.0, a float or named fill"
        " -> -inf)"
    )
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            "x = tl.load(x_ptr + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n, other=0.0)",
            "x = tl.load(x_ptr + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n, other=1.0)",
        ),
        Example.kernel(
            "x = tl.load(x_ptr + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n, other=1)",
            "x = tl.load(x_ptr + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < n, other=0)",
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
            m = tl.max(x, axis=0)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            m = tl.max(x, axis=0)
            """,
        ),
        Example.kernel(
            "x = tl.load(x_ptr + tl.arange(0, BLOCK), other=float('-inf'), mask=n > 0)",
            "x = tl.load(x_ptr + tl.arange(0, BLOCK), other=0.0, mask=n > 0)",
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            s = tl.sum(x, axis=0)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
            s = tl.sum(x, axis=0)
            """,
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=NEG_INF)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            """,
            params="x_ptr, n, BLOCK: tl.constexpr, NEG_INF: tl.constexpr",
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=-inf)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            """,
            params="x_ptr, n, inf, BLOCK: tl.constexpr",
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=pad_value)
            m = tl.max(x, axis=0)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
            m = tl.max(x, axis=0)
            """,
            params="x_ptr, n, pad_value, BLOCK: tl.constexpr",
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=pad_value)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            """,
            params="x_ptr, n, pad_value, BLOCK: tl.constexpr",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if tl_call(node) != "load":
            return
        other = find_arg(node, "other", 2)
        if other is None:
            return
        for new in _changed_fills(node.args[other].value):
            yield replace_arg_value(node, other, new)


class BoundaryCheckDrop(Operator):
    name = "boundary-check-drop"
    family = "masks"
    description = "remove boundary_check= (and padding_option=) from a block-pointer load/store"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            block = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
            x = tl.load(block, boundary_check=(0,), padding_option="zero")
            """,
            """
            block = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
            x = tl.load(block)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if tl_call(node) not in _LOAD_STORE_MASK_POSITION:
            return
        check = find_arg(node, "boundary_check")
        if check is None:
            return
        padding = find_arg(node, "padding_option")
        yield remove_args(node, [check] if padding is None else [check, padding])


def _mask_conjunction(node: cst.CSTNode) -> bool:
    """``a & b`` where neither side is a literal (``x & 0xFF`` is bit twiddling)."""
    return (
        isinstance(node, cst.BinaryOperation)
        and isinstance(node.operator, cst.BitAnd)
        and number_value(node.left) is None
        and number_value(node.right) is None
    )


_MASK_2D = """
    rm = tl.arange(0, BLOCK)
    rn = tl.arange(0, BLOCK)
    mask = (rm[:, None] < n) & (rn[None, :] < n)
"""


class MaskAndOr(Operator):
    name = "mask-and-or"
    family = "masks"
    description = "combine two masks with | instead of & (lets out-of-range lanes through)"
    node_types = (cst.BinaryOperation,)
    examples = (
        Example.kernel(_MASK_2D, _MASK_2D.replace(") & (", ") | (")),
        Example.kernel(
            "m = (offs < n) & (offs >= 1) & (offs > 2)",
            "m = ((offs < n) | (offs >= 1)) & (offs > 2)",
            params="x_ptr, offs, n",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if _mask_conjunction(node):
            yield node.with_changes(operator=same_whitespace(cst.BitOr, node.operator))


def _is_and(node: cst.CSTNode) -> bool:
    return type(node) is cst.BooleanOperation and type(node.operator) is cst.And


class MaskTermDrop(Operator):
    name = "mask-term-drop"
    family = "masks"
    description = "keep only one side of a mask conjunction a & b, or a and b (one bound unguarded)"
    node_types = (cst.BinaryOperation, cst.Call, cst.Assign)
    examples = (
        Example.kernel(_MASK_2D, _MASK_2D.replace(" & (rn[None, :] < n)", "")),
        Example.kernel(_MASK_2D, _MASK_2D.replace("(rm[:, None] < n) & ", "")),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=(offs < n) and (offs >= 1), other=0.0)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=(offs >= 1), other=0.0)
            """,
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            in_bounds_mask = offs < n and offs >= 1
            tl.store(y_ptr + offs, 1.0, mask=in_bounds_mask)
            """,
            """
            offs = tl.arange(0, BLOCK)
            in_bounds_mask = offs < n
            tl.store(y_ptr + offs, 1.0, mask=in_bounds_mask)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        kind = type(node)
        if kind is cst.BinaryOperation:
            if _mask_conjunction(node):
                yield node.left
                yield node.right
        elif kind is cst.Call:
            yield from _dropped_in_mask_arg(node)
        elif kind is cst.Assign and len(node.targets) == 1 and _is_and(node.value):
            yield from _dropped_in_mask_assign(node)


def _dropped_in_mask_arg(call: cst.Call) -> Iterator[cst.Call]:
    """``tl.load(.., mask=a and b)`` with the mask ``a``, then ``b``."""
    kind = tl_call(call)
    if kind not in _LOAD_STORE_MASK_POSITION:
        return
    index = _mask_index(call, kind)
    if index is not None and _is_and(call.args[index].value):
        value = call.args[index].value
        yield replace_arg_value(call, index, value.left)
        yield replace_arg_value(call, index, value.right)


def _dropped_in_mask_assign(assign: cst.Assign) -> Iterator[cst.Assign]:
    """``mask = a and b`` (a ``*mask*`` name) with the value ``a``, then ``b``."""
    target = assign.targets[0].target
    if type(target) is cst.Name and "mask" in target.value.lower():
        yield assign.with_changes(value=assign.value.left)
        yield assign.with_changes(value=assign.value.right)


OPERATORS: tuple[Operator, ...] = (
    MaskDrop(),
    OtherDrop(),
    OtherChange(),
    BoundaryCheckDrop(),
    MaskAndOr(),
    MaskTermDrop(),
)
