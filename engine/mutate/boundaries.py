"""boundaries: off-by-one at the edges of masks, conditions, grids and loops.

    compare-lt-le      mask = offs < n          -> mask = offs <= n
    compare-gt-ge      if pid >= n:             -> if pid > n:
    cdiv-floordiv      tl.cdiv(K, BLOCK_K)      -> K // BLOCK_K
    range-bound-shift  for k in range(0, K, BLOCK_K):  -> range(0, K - BLOCK_K, BLOCK_K)
                                                      and range(0, K + BLOCK_K, BLOCK_K)
                                                      and range(0 + BLOCK_K, K, BLOCK_K)
                       for i in tl.range(n):    -> tl.range(n - 1), tl.range(n + 1)
    range-step-change  for row in tl.range(pid, n_rows, tl.num_programs(0)):
                    -> tl.range(pid, n_rows, 1) and tl.range(pid, n_rows, 2 * tl.num_programs(0))
                       for off in range(0, N, BLOCK): -> range(0, N, 1), range(0, N, 2 * BLOCK)
    guard-true         if EVEN_K: -> if True:     (also an elif's condition)

A loop's bounds move by its step when it has one (a shift by 1 would usually
run the same iterations: an equivalent mutant), else by 1; integer literals are
folded (``range(4)`` -> ``range(3)``).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst import matchers as m

from .base import Example, Operator
from .syntax import TL, binop, int_value, same_whitespace, spaced, tl_attr


def _swap_comparisons(
    node: cst.CSTNode, swap: dict[type, type[cst.BaseCompOp]]
) -> Iterator[cst.CSTNode]:
    if not isinstance(node, cst.Comparison):
        return
    for index, target in enumerate(node.comparisons):
        new_op = swap.get(type(target.operator))
        if new_op is None:
            continue
        targets = list(node.comparisons)
        targets[index] = target.with_changes(operator=same_whitespace(new_op, target.operator))
        yield node.with_changes(comparisons=targets)


class CompareLtLe(Operator):
    name = "compare-lt-le"
    family = "boundaries"
    description = "swap < and <= in a mask or condition"
    node_types = (cst.Comparison,)
    examples = (
        Example.kernel(
            "mask = tl.arange(0, BLOCK) < n",
            "mask = tl.arange(0, BLOCK) <= n",
        ),
        Example.kernel(
            "mask = (tl.arange(0, BLOCK) >= 1) & (tl.arange(0, BLOCK) <= n)",
            "mask = (tl.arange(0, BLOCK) >= 1) & (tl.arange(0, BLOCK) < n)",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from _swap_comparisons(
            node, {cst.LessThan: cst.LessThanEqual, cst.LessThanEqual: cst.LessThan}
        )


class CompareGtGe(Operator):
    name = "compare-gt-ge"
    family = "boundaries"
    description = "swap > and >= in a mask or condition"
    node_types = (cst.Comparison,)
    examples = (
        Example.kernel(
            """
            pid = tl.program_id(0)
            if pid >= n:
                return
            """,
            """
            pid = tl.program_id(0)
            if pid > n:
                return
            """,
        ),
        Example.kernel(
            "y = tl.where(tl.arange(0, BLOCK) > n, 1.0, 0.0)",
            "y = tl.where(tl.arange(0, BLOCK) >= n, 1.0, 0.0)",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from _swap_comparisons(
            node, {cst.GreaterThan: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.GreaterThan}
        )


def _is_cdiv(call: cst.CSTNode) -> bool:
    """``tl.cdiv``, ``triton.language.cdiv`` or ``triton.cdiv``."""
    func = getattr(call, "func", None)
    return (
        type(func) is cst.Attribute
        and func.attr.value == "cdiv"
        and m.matches(func.value, TL | m.Name("triton"))
    )


class CdivFloordiv(Operator):
    name = "cdiv-floordiv"
    family = "boundaries"
    description = (
        "replace tl.cdiv(a, b) / triton.cdiv(a, b) by a // b (drops the last partial block)"
    )
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            for k in range(0, tl.cdiv(n, BLOCK)):
                tl.store(y_ptr + k, k)
            """,
            """
            for k in range(0, n // BLOCK):
                tl.store(y_ptr + k, k)
            """,
        ),
        Example.kernel(
            "last = 2 * tl.cdiv(n + 1, BLOCK)",
            "last = 2 * ((n + 1) // BLOCK)",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if not _is_cdiv(node) or len(node.args) != 2:
            return
        a, b = node.args
        if a.keyword is None and b.keyword is None and not a.star and not b.star:
            yield binop(a.value, spaced(cst.FloorDivide), b.value)


def _is_range(call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "range"
    return tl_attr(func) in ("range", "static_range")


def _shifted(
    value: cst.BaseExpression, op: type[cst.BaseBinaryOp], step: cst.BaseExpression | None
) -> cst.BaseExpression:
    literal = int_value(value)
    if step is None and literal is not None:
        return cst.Integer(str(literal + 1 if op is cst.Add else literal - 1))
    return binop(value, spaced(op), step if step is not None else cst.Integer("1"))


class RangeBoundShift(Operator):
    name = "range-bound-shift"
    family = "boundaries"
    description = "move a loop's stop (by -/+ one step) or its start (by + one step)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            for i in range(n):
                tl.store(y_ptr + i, i)
            """,
            """
            for i in range(n - 1):
                tl.store(y_ptr + i, i)
            """,
        ),
        Example.kernel(
            """
            for i in tl.range(1, n):
                tl.store(y_ptr + i, i)
            """,
            """
            for i in tl.range(1, n + 1):
                tl.store(y_ptr + i, i)
            """,
        ),
        Example.kernel(
            """
            for i in tl.static_range(0, 4):
                tl.store(y_ptr + i, i)
            """,
            """
            for i in tl.static_range(1, 4):
                tl.store(y_ptr + i, i)
            """,
        ),
        Example.kernel(
            """
            for k in range(0, n, BLOCK):
                tl.store(y_ptr + k, k)
            """,
            """
            for k in range(0, n - BLOCK, BLOCK):
                tl.store(y_ptr + k, k)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if not isinstance(node, cst.Call) or not _is_range(node):
            return
        positional = [i for i, arg in enumerate(node.args) if arg.keyword is None and not arg.star]
        if not 1 <= len(positional) <= 3 or positional != list(range(len(positional))):
            return
        step = None
        if len(positional) == 3:
            step = node.args[2].value
            if int_value(step) == 1:
                step = None
        stop = 0 if len(positional) == 1 else 1
        args = list(node.args)
        for op in (cst.Subtract, cst.Add):
            new = args[stop].with_changes(value=_shifted(args[stop].value, op, step))
            yield node.with_changes(args=[*args[:stop], new, *args[stop + 1 :]])
        if stop == 1:
            new = args[0].with_changes(value=_shifted(args[0].value, cst.Add, step))
            yield node.with_changes(args=[new, *args[1:]])


def _step_index(call: cst.Call) -> int | None:
    """Index of a loop's step: the third positional argument, or ``step=`` (tl.range)."""
    for index, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None and arg.keyword.value == "step":
            return index
    positional = [i for i, arg in enumerate(call.args) if arg.keyword is None]
    return 2 if positional[:3] == [0, 1, 2] else None


class RangeStepChange(Operator):
    name = "range-step-change"
    family = "boundaries"
    description = "change a loop's step: to 1, or doubled (a grid-stride or block loop off step)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            for row in tl.range(tl.program_id(0), n, tl.num_programs(0)):
                tl.store(y_ptr + row, row)
            """,
            """
            for row in tl.range(tl.program_id(0), n, 1):
                tl.store(y_ptr + row, row)
            """,
        ),
        Example.kernel(
            """
            for off in range(0, n, BLOCK):
                tl.store(y_ptr + off + tl.arange(0, BLOCK), 1.0)
            """,
            """
            for off in range(0, n, 2 * BLOCK):
                tl.store(y_ptr + off + tl.arange(0, BLOCK), 1.0)
            """,
        ),
        Example.kernel(
            """
            for i in tl.static_range(0, 8, 2):
                tl.store(y_ptr + i, i)
            """,
            """
            for i in tl.static_range(0, 8, 4):
                tl.store(y_ptr + i, i)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if type(node) is not cst.Call or not _is_range(node):
            return
        index = _step_index(node)
        if index is None:
            return
        step = node.args[index].value
        literal = int_value(step)
        if literal == 1:
            return
        yield node.with_changes(
            args=[
                *node.args[:index],
                node.args[index].with_changes(value=cst.Integer("1")),
                *node.args[index + 1 :],
            ]
        )
        doubled = (
            cst.Integer(str(2 * literal))
            if literal is not None
            else binop(cst.Integer("2"), spaced(cst.Multiply), step)
        )
        yield node.with_changes(
            args=[
                *node.args[:index],
                node.args[index].with_changes(value=doubled),
                *node.args[index + 1 :],
            ]
        )


class GuardTrue(Operator):
    name = "guard-true"
    family = "boundaries"
    description = "force an if statement's condition to True (the guarded path always runs)"
    node_types = (cst.If,)
    examples = (
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            if EVEN:
                x = tl.load(x_ptr + offs)
            else:
                x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr + offs, x, mask=offs < n)
            """,
            """
            offs = tl.arange(0, BLOCK)
            if True:
                x = tl.load(x_ptr + offs)
            else:
                x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr + offs, x, mask=offs < n)
            """,
            params="x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr",
        ),
        Example.kernel(
            """
            if tl.program_id(0) * BLOCK >= n:
                return
            tl.store(y_ptr + tl.program_id(0), 1.0)
            """,
            """
            if True:
                return
            tl.store(y_ptr + tl.program_id(0), 1.0)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if type(node) is cst.If and not m.matches(node.test, m.Name("True")):
            space = node.whitespace_before_test
            if not space.value:  # ``if(cond):`` -> ``if True:``
                space = cst.SimpleWhitespace(" ")
            yield node.with_changes(test=cst.Name("True"), whitespace_before_test=space)


OPERATORS: tuple[Operator, ...] = (
    CompareLtLe(),
    CompareGtGe(),
    CdivFloordiv(),
    RangeBoundShift(),
    RangeStepChange(),
    GuardTrue(),
)
