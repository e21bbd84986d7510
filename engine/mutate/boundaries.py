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
    mask-bound-swap    mask = offs < a + b      -> mask = offs < total
                       c_mask = (rm[:, None] < M) & (rn[None, :] < N)
                    -> c_mask = (rm[:, None] < N) & (rn[None, :] < N)

A loop's bounds move by its step when it has one (a shift by 1 would usually
run the same iterations: an equivalent mutant), else by 1; integer literals are
folded (``range(4)`` -> ``range(3)``).

``mask-bound-swap`` bounds a mask by another extent of the same function: a name
that another mask compares against (a parameter or a local assigned before the
mask, in a block around it), or a parameter the function uses as an extent
(a ``range`` stop, ``tl.cdiv``'s first argument, a bound of a program id). A mask
here is a comparison ``lanes < bound`` (or ``bound > lanes``) whose lanes are a
block of integer offsets, or that a ``mask=`` argument or a ``*mask*`` variable
holds. At most two extents per mask, the masks' own bounds first, then the
parameters, each in the order the function first uses them; an extent the bound
already mentions is not offered (``offs < K - k`` does not become ``offs < K``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from itertools import islice

import libcst as cst
from libcst import matchers as m

from .base import Example, Operator
from .scope import INT, Scope
from .syntax import (
    TL,
    binop,
    find_arg,
    int_value,
    number_value,
    same_whitespace,
    spaced,
    tl_attr,
    tl_call,
)


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


def _leading_positional(call: cst.Call) -> int | None:
    """How many positional arguments a loop's range has, when it has 1 to 3 and
    they come first; else None."""
    positional = [i for i, arg in enumerate(call.args) if arg.keyword is None and not arg.star]
    if not 1 <= len(positional) <= 3 or positional != list(range(len(positional))):
        return None
    return len(positional)


def _shift_step(call: cst.Call) -> cst.BaseExpression | None:
    """A three-argument range's step, the amount its bounds move by (None: a step of 1)."""
    step = call.args[2].value
    return None if int_value(step) == 1 else step


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
        count = _leading_positional(node)
        if count is not None:
            yield from _shifted_bounds(node, count)


def _shifted_bounds(node: cst.Call, count: int) -> Iterator[cst.Call]:
    """A range of ``count`` positional arguments with its stop moved down, then up, by one
    step, then (where it has a start) its start moved up by one step."""
    step = _shift_step(node) if count == 3 else None
    stop = 0 if count == 1 else 1
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


_LESS = (cst.LessThan, cst.LessThanEqual)
_GREATER = (cst.GreaterThan, cst.GreaterThanEqual)
_MASK_POSITION = {"load": 1, "store": 2}
#: At most this many other extents per mask (the mutants stay few).
_MAX_SWAPS = 2


def _holds_mask(node: cst.Comparison, scope: Scope) -> bool:
    """Is ``node`` (a term of ``&``, ``|`` or ``and`` in) a ``mask=`` argument of
    tl.load/tl.store, or the value of a variable named ``*mask*``?"""
    child = node
    for parent in scope.ancestors(node):
        if _joins_masks(parent):
            child = parent
            continue
        if type(parent) is cst.Arg:
            return _is_mask_arg(parent, child, scope)
        if type(parent) is cst.Assign:
            return _is_mask_assignment(parent, child)
        return False
    return False


def _joins_masks(node: cst.CSTNode) -> bool:
    """``a & b``, ``a | b`` or ``a and b``: a mask made of terms."""
    kind = type(node)
    if kind is cst.BinaryOperation:
        return type(node.operator) in (cst.BitAnd, cst.BitOr)
    return kind is cst.BooleanOperation and type(node.operator) is cst.And


def _is_mask_arg(arg: cst.Arg, value: cst.CSTNode, scope: Scope) -> bool:
    """Is ``arg`` (whose value is ``value``) the ``mask`` of a tl.load/tl.store?"""
    call = scope.parent(arg)
    kind_of_call = tl_call(call)
    if kind_of_call not in _MASK_POSITION or arg.value is not value:
        return False
    index = find_arg(call, "mask", _MASK_POSITION[kind_of_call])
    return index is not None and call.args[index] is arg


def _is_mask_assignment(assign: cst.Assign, value: cst.CSTNode) -> bool:
    """Does ``assign`` give ``value`` to a variable named ``*mask*``?"""
    return assign.value is value and any(
        type(t.target) is cst.Name and "mask" in t.target.value.lower() for t in assign.targets
    )


def _lanes_and_bound(
    node: cst.CSTNode,
) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """(lanes, bound) of a single comparison ``lanes < bound`` / ``bound > lanes``
    (or with ``<=`` / ``>=``), else None."""
    if type(node) is not cst.Comparison or len(node.comparisons) != 1:
        return None
    target = node.comparisons[0]
    if isinstance(target.operator, _LESS):
        return node.left, target.comparator
    if isinstance(target.operator, _GREATER):
        return target.comparator, node.left
    return None


def _mask_bound(node: cst.CSTNode, scope: Scope) -> cst.BaseExpression | None:
    """The bound of a mask comparison ``lanes < bound`` / ``bound > lanes``, else None.

    The lanes must not be a scalar: a block of integer offsets (``offs``,
    ``rm[:, None]``), or anything of unknown rank in a mask's place. A literal
    bound is no extent."""
    sides = _lanes_and_bound(node)
    if sides is None:
        return None
    lanes, bound = sides
    if number_value(bound) is not None:
        return None
    rank = scope.rank(lanes)
    if rank == 0:
        return None
    if rank is not None and scope.kind(lanes) == INT:
        return bound
    return bound if _holds_mask(node, scope) else None


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node under ``node``, in source order."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _param_extents(node: cst.CSTNode, scope: Scope) -> Iterator[str]:
    """Parameters ``node`` uses as an extent: ``range(.., n, ..)``'s stop,
    ``tl.cdiv(n, ..)``, the right side of a scalar integer's ``pid < n`` or
    ``pid >= n`` (not ``offs >= lo``: a block's lower bound)."""
    if type(node) is cst.Call:
        extent = _call_extent(node)
    elif type(node) is cst.Comparison and len(node.comparisons) == 1:
        extent = _scalar_upper_bound(node, scope)
    else:
        extent = None
    if type(extent) is cst.Name and scope.is_param(extent.value):
        yield extent.value


def _call_extent(call: cst.Call) -> cst.BaseExpression | None:
    """``range(.., n, ..)``'s stop or ``tl.cdiv(n, ..)``'s ``n``, else None."""
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if not positional:
        return None
    if _is_range(call):
        return positional[0] if len(positional) == 1 else positional[1]
    return positional[0] if _is_cdiv(call) else None


def _scalar_upper_bound(node: cst.Comparison, scope: Scope) -> cst.BaseExpression | None:
    """The ``n`` of a scalar integer's ``row < n``, ``row <= n`` or ``pid >= n``
    (``if pid >= n: return``), else None."""
    target = node.comparisons[0]
    upper = (cst.LessThan, cst.LessThanEqual, cst.GreaterThanEqual)
    if isinstance(target.operator, upper) and scope.rank(node.left) == 0:
        if scope.kind(node.left) == INT:
            return target.comparator
    return None


_EXTENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _extents(scope: Scope) -> tuple[list[str], list[str], frozenset[str]]:
    """(names masks compare against, other parameters used as extents, every
    parameter), the first two in the order the function first uses them; worked
    out once per function."""
    found = _EXTENTS.get(scope)
    if found is None:
        bounds, params = _used_extents(scope)
        signature = scope.function.params
        every = frozenset(
            p.name.value
            for p in (*signature.posonly_params, *signature.params, *signature.kwonly_params)
        )
        found = (bounds, [p for p in params if p not in bounds], every)
        _EXTENTS[scope] = found
    return found


def _used_extents(scope: Scope) -> tuple[list[str], list[str]]:
    """(names masks compare against, parameters used as extents), each in the
    order the function first uses them."""
    bounds: list[str] = []
    params: list[str] = []
    for node in _walk(scope.function.body):
        bound = _mask_bound(node, scope) if type(node) is cst.Comparison else None
        if type(bound) is cst.Name and bound.value not in bounds:
            bounds.append(bound.value)
        for name in _param_extents(node, scope):
            if name not in params:
                params.append(name)
    return bounds, params


def _assigning_lines(name: str, scope: Scope) -> set[int]:
    """The ids of the statement lines that assign local ``name`` (``name = ...``)."""
    statements = set()
    for how, value in scope.assignments(name):
        if how == "=":
            assign = scope.parent(value)
            line = scope.parent(assign) if assign is not None else None
            if type(line) is cst.SimpleStatementLine:
                statements.add(id(line))
    return statements


def _assigned_before(name: str, node: cst.CSTNode, scope: Scope) -> bool:
    """Is local ``name`` assigned by a statement before ``node``, in a block around it?"""
    statements = _assigning_lines(name, scope)
    child = node
    for parent in scope.ancestors(node):
        if type(parent) is cst.IndentedBlock:
            for statement in parent.body:
                if statement is child:
                    break
                if id(statement) in statements:
                    return True
        child = parent
    return False


class MaskBoundSwap(Operator):
    name = "mask-bound-swap"
    family = "boundaries"
    description = "bound a mask by another extent of the function (offs < M -> offs < N)"
    node_types = (cst.Comparison,)
    examples = (
        Example.kernel(
            """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < a, other=0.0)
            y = tl.load(y_ptr + offs - a, mask=(offs >= a) & (offs < a + b), other=0.0)
            tl.store(out_ptr + offs, x + y, mask=offs < total)
            """,
            """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < a, other=0.0)
            y = tl.load(y_ptr + offs - a, mask=(offs >= a) & (offs < total), other=0.0)
            tl.store(out_ptr + offs, x + y, mask=offs < total)
            """,
            params="x_ptr, y_ptr, out_ptr, a, b, total, BLOCK: tl.constexpr",
        ),
        Example.kernel(
            """
            rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
            c_mask = (rm[:, None] < M) & (rn[None, :] < N)
            tl.store(y_ptr + rm[:, None] * N + rn[None, :], 1.0, mask=c_mask)
            """,
            """
            rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
            c_mask = (rm[:, None] < N) & (rn[None, :] < N)
            tl.store(y_ptr + rm[:, None] * N + rn[None, :], 1.0, mask=c_mask)
            """,
            params="y_ptr, M, N, BLOCK: tl.constexpr",
        ),
        Example.kernel(
            """
            for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
                cols = tl.arange(0, BLOCK)
                x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
                tl.store(y_ptr + row, tl.sum(x, axis=0))
            """,
            """
            for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
                cols = tl.arange(0, BLOCK)
                x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_rows, other=0.0)
                tl.store(y_ptr + row, tl.sum(x, axis=0))
            """,
            params="x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return iter(())  # which extents there are is a question about the function

    def mutations_in(self, node: cst.CSTNode, scope: Scope) -> Iterator[cst.CSTNode]:
        bound = _mask_bound(node, scope)
        if bound is None:
            return
        target = node.comparisons[0]
        for name in _other_extents(node, bound, scope):
            if bound is target.comparator:
                yield node.with_changes(
                    comparisons=[target.with_changes(comparator=cst.Name(name))]
                )
            else:
                yield node.with_changes(left=cst.Name(name))


def _other_extents(node: cst.Comparison, bound: cst.BaseExpression, scope: Scope) -> list[str]:
    """At most ``_MAX_SWAPS`` extents a mask could be bounded by instead: not one
    its bound mentions, and only a parameter or a local assigned before the mask."""
    bounds, params, signature = _extents(scope)
    mentioned = {n.value for n in _walk(bound) if type(n) is cst.Name}
    usable = (
        name
        for name in (*bounds, *params)
        if name not in mentioned and (name in signature or _assigned_before(name, node, scope))
    )
    return list(islice(usable, _MAX_SWAPS))


OPERATORS: tuple[Operator, ...] = (
    CompareLtLe(),
    CompareGtGe(),
    CdivFloordiv(),
    RangeBoundShift(),
    RangeStepChange(),
    GuardTrue(),
    MaskBoundSwap(),
)
