"""indexing: which element each lane of each program touches.

Square inputs, one-program grids and contiguous tensors hide these bugs.

    modulo-drop        offs = (pid * BM + tl.arange(0, BM)) % M -> (pid * BM + tl.arange(0, BM))
    program-id-swap    pid_m = tl.program_id(0)  -> tl.program_id(1)
                       tl.program_id(axis=1)     -> tl.program_id(axis=0);  tl.num_programs likewise
    stride-swap        offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
                    -> offs_m[:, None] * stride_ak + offs_k[None, :] * stride_am
    block-offset-drop  offs = pid * BLOCK + tl.arange(0, BLOCK) -> offs = tl.arange(0, BLOCK)
    broadcast-swap     offs_m[:, None] -> offs_m[None, :]
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst import matchers as m

from .base import Example, Operator
from .syntax import find_arg, int_value, replace_arg_value, tl_call


class ModuloDrop(Operator):
    name = "modulo-drop"
    family = "indexing"
    description = "drop a % M wrap-around (a % M -> a)"
    node_types = (cst.BinaryOperation,)
    examples = (
        Example.kernel(
            "offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)) % n",
            "offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK))",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
            yield node.left


_AXIS_SWAP = {0: 1, 1: 0}


class ProgramIdSwap(Operator):
    name = "program-id-swap"
    family = "indexing"
    description = "swap axis 0 and 1 of tl.program_id / tl.num_programs"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(axis=1)
            """,
            """
            pid_m = tl.program_id(1)
            pid_n = tl.program_id(axis=1)
            """,
        ),
        Example.kernel(
            """
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(axis=1)
            """,
            """
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(axis=0)
            """,
        ),
        Example.kernel(
            "step = tl.num_programs(0)",
            "step = tl.num_programs(1)",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if tl_call(node) not in ("program_id", "num_programs"):
            return
        index = find_arg(node, "axis", 0)
        if index is None:
            return
        swapped = _AXIS_SWAP.get(int_value(node.args[index].value))
        if swapped is not None:
            yield replace_arg_value(node, index, cst.Integer(str(swapped)))


def _stride_side(product: cst.CSTNode) -> str | None:
    """``x * stride_am`` -> "right"; ``stride_am * x`` -> "left"; else None."""
    if not (
        isinstance(product, cst.BinaryOperation)
        and isinstance(product.operator, cst.Multiply)
        and not product.lpar
    ):
        return None
    for side in ("right", "left"):
        operand = getattr(product, side)
        if isinstance(operand, cst.Name) and "stride" in operand.value.lower():
            return side
    return None


_ADDITIVE = m.BinaryOperation(operator=m.Add() | m.Subtract(), lpar=[])


class StrideSwap(Operator):
    name = "stride-swap"
    family = "indexing"
    description = "swap the two stride names of adjacent terms a * stride_x + b * stride_y"
    node_types = (cst.BinaryOperation,)
    examples = (
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            ptrs = x_ptr + offs[:, None] * stride_m + offs[None, :] * stride_n
            """,
            """
            offs = tl.arange(0, BLOCK)
            ptrs = x_ptr + offs[:, None] * stride_n + offs[None, :] * stride_m
            """,
            params="x_ptr, stride_m, stride_n, BLOCK: tl.constexpr",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)):
            return
        right_side = _stride_side(node.right)
        if right_side is None:
            return
        # The term before ``node.right``: node.left itself, or the last term of
        # a left-leaning chain ``... + a * stride_x``.
        holder, left = None, node.left
        if _stride_side(left) is None and m.matches(left, _ADDITIVE):
            holder, left = node.left, node.left.right
        left_side = _stride_side(left)
        if left_side is None:
            return
        s1, s2 = getattr(left, left_side), getattr(node.right, right_side)
        if s1.value == s2.value:
            return
        new_left = left.with_changes(**{left_side: s2})
        new_right = node.right.with_changes(**{right_side: s1})
        if holder is not None:
            new_left = holder.with_changes(right=new_left)
        yield node.with_changes(left=new_left, right=new_right)


def _is_arange(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Subscript):
        node = node.value
    return tl_call(node) == "arange"


class BlockOffsetDrop(Operator):
    name = "block-offset-drop"
    family = "indexing"
    description = "drop a program's block offset: start + tl.arange(...) -> tl.arange(...)"
    node_types = (cst.BinaryOperation,)
    examples = (
        Example.kernel(
            """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, offs, mask=offs < n)
            """,
            """
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, offs, mask=offs < n)
            """,
        ),
        Example.kernel(
            "rows = tl.arange(0, BLOCK)[:, None] + tl.program_id(0) * BLOCK",
            "rows = tl.arange(0, BLOCK)[:, None]",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if not (isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add)):
            return
        left, right = _is_arange(node.left), _is_arange(node.right)
        if left != right:
            yield node.left if left else node.right


def _is_full_slice(element: cst.SubscriptElement) -> bool:
    part = element.slice
    return (
        isinstance(part, cst.Slice)
        and part.lower is None
        and part.upper is None
        and part.step is None
        and part.second_colon is cst.MaybeSentinel.DEFAULT
    )


def _is_none_index(element: cst.SubscriptElement) -> bool:
    part = element.slice
    return isinstance(part, cst.Index) and m.matches(part.value, m.Name("None"))


class BroadcastSwap(Operator):
    name = "broadcast-swap"
    family = "indexing"
    description = "broadcast along the other axis: x[:, None] <-> x[None, :]"
    node_types = (cst.Subscript,)
    examples = (
        Example.kernel(
            "ptrs = x_ptr + tl.arange(0, BLOCK)[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]",
            "ptrs = x_ptr + tl.arange(0, BLOCK)[None, :] * BLOCK + tl.arange(0, BLOCK)[None, :]",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if not isinstance(node, cst.Subscript) or len(node.slice) != 2:
            return
        first, second = node.slice
        if (_is_full_slice(first) and _is_none_index(second)) or (
            _is_none_index(first) and _is_full_slice(second)
        ):
            yield node.with_changes(
                slice=[
                    first.with_changes(slice=second.slice),
                    second.with_changes(slice=first.slice),
                ]
            )


OPERATORS: tuple[Operator, ...] = (
    ModuloDrop(),
    ProgramIdSwap(),
    StrideSwap(),
    BlockOffsetDrop(),
    BroadcastSwap(),
)
