"""indexing: which element each lane of each program touches.

Square inputs, one-program grids and contiguous tensors hide these bugs.

    modulo-drop        offs = (pid * BM + tl.arange(0, BM)) % M -> (pid * BM + tl.arange(0, BM))
    program-id-swap    pid_m = tl.program_id(0)  -> tl.program_id(1)
                       tl.program_id(axis=1)     -> tl.program_id(axis=0);  tl.num_programs likewise
    stride-swap        offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
                    -> offs_m[:, None] * stride_ak + offs_k[None, :] * stride_am
    block-offset-drop  offs = pid * BLOCK + tl.arange(0, BLOCK) -> offs = tl.arange(0, BLOCK)
    broadcast-swap     offs_m[:, None] -> offs_m[None, :]
                       (in a mask; not where a pointer tile's outer product would collapse)
    int64-cast-drop    row = tl.program_id(0).to(tl.int64) -> row = tl.program_id(0)
    int-narrow         offs.to(tl.int64) * stride -> offs.to(tl.int32) * stride
                       tl.zeros((BLOCK,), dtype=tl.int64) -> dtype=tl.int32
    offset-term-drop   tl.load(X + b * stride_b + h * stride_h + offs)
                    -> tl.load(X + h * stride_h + offs)
                       row_ptr = x_ptr + row * stride -> row_ptr = x_ptr
    block-ptr-offset-zero
                       tl.make_block_ptr(..., offsets=(pid_m * BM, 0), ...) -> offsets=(0, 0)
                       ptrs = tl.advance(ptrs, (BLOCK_K, 0))               -> (0, 0)

offset-term-drop drops a scalar term (one with no ``tl.arange`` and no
``[:, None]``, and not a bare name, which may hold a block of offsets) from a
sum that starts at a base pointer, so a block stays a block and the mutant
compiles; a bare ``base + term`` directly inside a load or store is left alone
(the pointer would turn scalar under a block mask).
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst import matchers as m

from .base import Example, Operator
from .scope import Scope
from .syntax import TL, find_arg, int_value, rename_attr, replace_arg_value, tl_call


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


def _term_before_last(node: cst.BinaryOperation) -> tuple[cst.CSTNode | None, cst.CSTNode]:
    """(the sum holding it, or None; the term) for the term before ``node.right``:
    node.left itself, or the last term of a left-leaning chain ``... + a * stride_x``."""
    if _stride_side(node.left) is None and m.matches(node.left, _ADDITIVE):
        return node.left, node.left.right
    return None, node.left


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
        holder, left = _term_before_last(node)
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
            """
            offs = tl.arange(0, BLOCK)
            mask = (offs[:, None] < n) & (offs[None, :] < n)
            """,
            """
            offs = tl.arange(0, BLOCK)
            mask = (offs[None, :] < n) & (offs[None, :] < n)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if _orientation(node) is None:
            return
        first, second = node.slice
        yield node.with_changes(
            slice=[
                first.with_changes(slice=second.slice),
                second.with_changes(slice=first.slice),
            ]
        )

    def mutations_in(self, node: cst.CSTNode, scope: Scope) -> Iterator[cst.CSTNode]:
        """A pointer tile built as an outer product (``rows[:, None] * s + cols[None, :]``)
        collapses to one row or column when one side turns: the load or store then has
        the wrong shape and Triton refuses it. Masks may collapse (they broadcast)."""
        if _orientation(node) is not None and _collapses_a_pointer_tile(node, scope):
            return  # the swap would leave one orientation only
        yield from self.mutations(node)


def _arithmetic_top(node: cst.CSTNode, scope: Scope) -> cst.CSTNode:
    """The largest ``+``, ``-``, ``*`` expression around ``node`` (``node`` itself if none)."""
    top = node
    while type(scope.parent(top)) is cst.BinaryOperation and isinstance(
        scope.parent(top).operator, (cst.Add, cst.Subtract, cst.Multiply)
    ):
        top = scope.parent(top)
    return top


def _collapses_a_pointer_tile(node: cst.Subscript, scope: Scope) -> bool:
    """Is ``node`` the only one of its orientation in an outer-product address, so that
    turning it would leave one orientation only?"""
    top = _arithmetic_top(node, scope)
    found = [_orientation(s) for s in _broadcasts(top)]
    if len(set(found)) == 2 and found.count(_orientation(node)) == 1:
        return _is_address(top, scope)
    return False


def _orientation(node: cst.CSTNode) -> str | None:
    """``x[:, None]`` -> "column", ``x[None, :]`` -> "row", else None."""
    if type(node) is not cst.Subscript or len(node.slice) != 2:
        return None
    first, second = node.slice
    if _is_full_slice(first) and _is_none_index(second):
        return "column"
    if _is_none_index(first) and _is_full_slice(second):
        return "row"
    return None


def _broadcasts(node: cst.CSTNode) -> list[cst.Subscript]:
    if _orientation(node) is not None:
        return [node]
    return [s for child in node.children for s in _broadcasts(child)]


def _is_address(expression: cst.CSTNode, scope: Scope) -> bool:
    """Is ``expression`` the pointer of a tl.load/tl.store, or assigned to a name that
    a load or store takes as (part of) its pointer?"""
    parent = scope.parent(expression)
    if type(parent) is cst.Arg:
        call = scope.parent(parent)
        return tl_call(call) in ("load", "store") and call.args[0] is parent
    target = _single_target(parent)
    if type(target) is not cst.Name:
        return False
    return any(_names_mention(p, target.value) for p in _pointer_args(scope.function))


def _single_target(statement: cst.CSTNode | None) -> cst.CSTNode | None:
    """What ``x = ...`` (one target) or ``x += ...`` assigns, else None."""
    if type(statement) is cst.Assign and len(statement.targets) == 1:
        return statement.targets[0].target
    if type(statement) is cst.AugAssign:
        return statement.target
    return None


def _pointer_args(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    if tl_call(node) in ("load", "store") and node.args and node.args[0].keyword is None:
        yield node.args[0].value
    for child in node.children:
        yield from _pointer_args(child)


def _names_mention(node: cst.CSTNode, name: str) -> bool:
    if type(node) is cst.Name:
        return node.value == name
    return any(_names_mention(child, name) for child in node.children)


INT64 = m.Attribute(value=TL, attr=m.Name("int64"))


def _int64_cast(node: cst.CSTNode) -> tuple[cst.BaseExpression, int] | None:
    """``x.to(tl.int64)`` / ``tl.cast(x, tl.int64)`` -> (x, index of the dtype argument)."""
    if type(node) is not cst.Call:
        return None
    parts = _cast_parts(node)
    if parts is None:
        return None
    value, index = parts
    if index is None or not m.matches(node.args[index].value, INT64):
        return None
    return value, index


def _cast_parts(call: cst.Call) -> tuple[cst.BaseExpression, int | None] | None:
    """``x.to(dtype)`` / ``tl.cast(x, dtype)`` -> (x, index of the dtype argument or
    None); None for any other call."""
    if type(call.func) is cst.Attribute and call.func.attr.value == "to":
        return call.func.value, find_arg(call, "dtype", 0)
    if tl_call(call) == "cast" and call.args and call.args[0].keyword is None:
        return call.args[0].value, find_arg(call, "dtype", 1)
    return None


class Int64CastDrop(Operator):
    name = "int64-cast-drop"
    family = "indexing"
    description = "drop a cast to tl.int64 of a program id, row index or offset (int32 overflow)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            row = tl.program_id(0).to(tl.int64)
            tl.store(y_ptr + row * n, 1.0)
            """,
            """
            row = tl.program_id(0)
            tl.store(y_ptr + row * n, 1.0)
            """,
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs.to(tl.int64) * n)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs * n)
            """,
        ),
        Example.kernel(
            "start = tl.cast(tl.program_id(0), tl.int64) * BLOCK",
            "start = tl.program_id(0) * BLOCK",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        found = _int64_cast(node)
        if found is not None:
            yield found[0]


#: ``tl.zeros(shape, dtype)`` / ``tl.full(shape, value, dtype)``: where an int64
#: dtype may be given positionally.
_DTYPE_POSITION = {"zeros": 1, "full": 2}


class IntNarrow(Operator):
    name = "int-narrow"
    family = "indexing"
    description = "narrow an int64 cast or index dtype to int32 (offsets past 2**31 wrap)"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs.to(tl.int64) * n)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs.to(tl.int32) * n)
            """,
        ),
        Example.kernel(
            "idx = tl.zeros((BLOCK,), dtype=tl.int64) + n",
            "idx = tl.zeros((BLOCK,), dtype=tl.int32) + n",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        found = _int64_cast(node)
        if found is not None:
            index = found[1]
        else:
            kind = tl_call(node)
            if kind not in _DTYPE_POSITION:
                return
            index = find_arg(node, "dtype", _DTYPE_POSITION[kind])
            if index is None or not m.matches(node.args[index].value, INT64):
                return
        dtype = node.args[index].value
        yield replace_arg_value(node, index, rename_attr(dtype, "int32"))


_POINTER_CALLS = frozenset({"load", "store", "atomic_add", "atomic_max", "atomic_min"})


def _sum_terms(node: cst.CSTNode) -> list[cst.BaseExpression]:
    """The terms of an unparenthesised left-leaning sum ``a + b + c``; [node] otherwise."""
    terms = []
    while type(node) is cst.BinaryOperation and type(node.operator) is cst.Add and not node.lpar:
        terms.append(node.right)
        node = node.left
    terms.append(node)
    return terms[::-1]


def _without_term(node: cst.BinaryOperation, index: int, count: int) -> cst.BaseExpression:
    """The sum ``node`` of ``count`` terms without its term ``index`` (>= 1)."""
    if index == count - 1:
        return node.left
    return node.with_changes(left=_without_term(node.left, index, count - 1))


def _is_lane_term(node: cst.CSTNode) -> bool:
    """May this term be a block (``tl.arange``, ``x[:, None]``, or a bare name)?"""
    if type(node) is cst.Name:
        return True
    stack = [node]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is cst.Call and tl_call(node) == "arange":
            return True
        if kind is cst.SubscriptElement and _is_none_index(node):
            return True
        stack.extend(node.children)
    return False


def _is_pointer_name(node: cst.CSTNode) -> bool:
    return type(node) is cst.Name and "ptr" in node.value.lower()


def _dropped_terms(total: cst.CSTNode, keep_base_only: bool) -> Iterator[cst.BaseExpression]:
    terms = _sum_terms(total)
    if len(terms) < 2 or type(terms[0]) not in (cst.Name, cst.Attribute):
        return
    if len(terms) == 2 and not keep_base_only:
        return
    for index in range(1, len(terms)):
        if not _is_lane_term(terms[index]):
            yield _without_term(total, index, len(terms))


class OffsetTermDrop(Operator):
    name = "offset-term-drop"
    family = "indexing"
    description = "drop a scalar term (batch, head, row offset) of a pointer's offset sum"
    node_types = (cst.Call, cst.Assign)
    examples = (
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + b * stride_b + h * stride_h + offs)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + h * stride_h + offs)
            """,
            params="x_ptr, b, h, stride_b, stride_h, BLOCK: tl.constexpr",
        ),
        Example.kernel(
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + b * stride_b + h * stride_h + offs)
            """,
            """
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + b * stride_b + offs)
            """,
            params="x_ptr, b, h, stride_b, stride_h, BLOCK: tl.constexpr",
        ),
        Example.kernel(
            """
            row_ptr = x_ptr + tl.program_id(0) * n
            x = tl.load(row_ptr + tl.arange(0, BLOCK))
            """,
            """
            row_ptr = x_ptr
            x = tl.load(row_ptr + tl.arange(0, BLOCK))
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if type(node) is cst.Call:
            yield from _dropped_in_pointer_arg(node)
        elif type(node) is cst.Assign and len(node.targets) == 1:
            yield from _dropped_in_pointer_assign(node)


def _dropped_in_pointer_arg(call: cst.Call) -> Iterator[cst.Call]:
    """A tl.load/store/atomic call with one term of its pointer's offset sum dropped."""
    if tl_call(call) not in _POINTER_CALLS or not call.args:
        return
    first = call.args[0]
    if first.star or (first.keyword is not None and first.keyword.value != "pointer"):
        return
    for new in _dropped_terms(first.value, keep_base_only=False):
        yield replace_arg_value(call, 0, new)


def _dropped_in_pointer_assign(assign: cst.Assign) -> Iterator[cst.Assign]:
    """``x_ptr = base + ...`` (a ``*ptr*`` name on either side) with one term dropped."""
    target = assign.targets[0].target
    terms = _sum_terms(assign.value)
    if not (_is_pointer_name(target) or _is_pointer_name(terms[0])):
        return
    for new in _dropped_terms(assign.value, keep_base_only=True):
        yield assign.with_changes(value=new)


_BLOCK_PTR_OFFSETS = 3  # make_block_ptr(base, shape, strides, offsets, block_shape, order)


def _zeroed_entries(call: cst.Call, index: int) -> Iterator[cst.Call]:
    value = call.args[index].value
    if type(value) not in (cst.Tuple, cst.List):
        return
    for position, element in enumerate(value.elements):
        if element.value is not None and int_value(element.value) != 0:
            elements = list(value.elements)
            elements[position] = element.with_changes(value=cst.Integer("0"))
            yield replace_arg_value(call, index, value.with_changes(elements=elements))


class BlockPtrOffsetZero(Operator):
    name = "block-ptr-offset-zero"
    family = "indexing"
    description = "set one entry of a block pointer's offsets (make_block_ptr, advance) to 0"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            block = tl.make_block_ptr(
                x_ptr, (n, n), (n, 1), offsets=(tl.program_id(0) * BLOCK, 0),
                block_shape=(BLOCK, BLOCK), order=(1, 0),
            )
            """,
            """
            block = tl.make_block_ptr(
                x_ptr, (n, n), (n, 1), offsets=(0, 0),
                block_shape=(BLOCK, BLOCK), order=(1, 0),
            )
            """,
        ),
        Example.kernel(
            """
            block = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
            block = tl.advance(block, (BLOCK,))
            """,
            """
            block = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
            block = tl.advance(block, (0,))
            """,
        ),
        Example.kernel(
            """
            block = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (BLOCK, BLOCK), (1, 0))
            block = block.advance((0, BLOCK))
            """,
            """
            block = tl.make_block_ptr(x_ptr, (n, n), (n, 1), (0, 0), (BLOCK, BLOCK), (1, 0))
            block = block.advance((0, 0))
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if type(node) is not cst.Call:
            return
        index = _offsets_index(node)
        if index is not None:
            yield from _zeroed_entries(node, index)


def _offsets_index(call: cst.Call) -> int | None:
    """Index of the ``offsets`` argument of ``tl.make_block_ptr``, ``tl.advance`` or
    ``block.advance``; None when absent or another call."""
    kind = tl_call(call)
    if kind == "make_block_ptr":
        return find_arg(call, "offsets", _BLOCK_PTR_OFFSETS)
    if kind == "advance":
        return find_arg(call, "offsets", 1)
    if type(call.func) is cst.Attribute and call.func.attr.value == "advance":
        return find_arg(call, "offsets", 0)
    return None


OPERATORS: tuple[Operator, ...] = (
    ModuloDrop(),
    ProgramIdSwap(),
    StrideSwap(),
    BlockOffsetDrop(),
    BroadcastSwap(),
    Int64CastDrop(),
    IntNarrow(),
    OffsetTermDrop(),
    BlockPtrOffsetZero(),
)
