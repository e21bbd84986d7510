"""precision: where a kernel keeps or loses its float32 headroom.

Tests that compare against a reference with loose tolerances, or only on small
inputs, let half-precision accumulation through; these mutants check that.

    accumulator-fp16  acc = tl.zeros((BM, BN), dtype=tl.float32) -> dtype=tl.float16
                      (a loop's ``acc += x`` becomes ``acc += x.to(tl.float16)`` with it:
                      a loop-carried value may not change type)
                      tl.full((BM,), 0, dtype=tl.float32)        -> dtype=tl.float16
                      tl.dot(a, b, out_dtype=tl.float32)         -> out_dtype=tl.float16
    cast-fp16         x.to(tl.float32)           -> x.to(tl.float16)
                      tl.cast(x, tl.float32)     -> tl.cast(x, tl.float16)
    upcast-drop       x = tl.load(p).to(tl.float32) -> x = tl.load(p)
    dot-tf32          tl.dot(a, b, input_precision="ieee") -> input_precision="tf32"
                      tl.dot(a, b, allow_tf32=False)        -> allow_tf32=True
    rounding-drop     y = x.to(tl.bfloat16).to(tl.float32) -> y = x
                      y = x.to(y_ptr.dtype.element_ty).to(tl.float32) -> y = x
                      y = x.to(out.dtype).to(tl.float32)              -> y = x
                      (a value meant to be rounded to the stored precision is not; a
                      dtype written as an expression is taken for a low-precision one)
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst import matchers as m

from .base import Example, Operator
from .scope import Scope
from .syntax import (
    ATOM,
    FLOAT32,
    find_arg,
    parenthesize,
    precedence,
    rename_attr,
    replace_arg_value,
    sole_name_assignment,
    tl_attr,
    tl_call,
)

#: ``tl.zeros(shape, dtype)`` / ``tl.full(shape, value, dtype)``: where dtype
#: may be passed positionally.
_DTYPE_POSITION = {"zeros": 1, "full": 2}


def _fp32_arg(call: cst.Call, keyword: str, position: int | None) -> int | None:
    index = find_arg(call, keyword, position)
    if index is not None and m.matches(call.args[index].value, FLOAT32):
        return index
    return None


def _to_fp16(call: cst.Call, index: int) -> cst.Call:
    return replace_arg_value(call, index, rename_attr(call.args[index].value, "float16"))


def _upcast(node: cst.CSTNode) -> tuple[cst.BaseExpression, int] | None:
    """``x.to(tl.float32)`` -> (x, dtype arg index); ``tl.cast(x, tl.float32)`` likewise."""
    if not isinstance(node, cst.Call):
        return None
    if isinstance(node.func, cst.Attribute) and node.func.attr.value == "to":
        index = _fp32_arg(node, "dtype", 0)
        return None if index is None else (node.func.value, index)
    if tl_call(node) == "cast" and node.args and node.args[0].keyword is None:
        index = _fp32_arg(node, "dtype", 1)
        return None if index is None else (node.args[0].value, index)
    return None


def _fp32_init(statement: cst.CSTNode) -> tuple[str, cst.Call, int] | None:
    """``acc = tl.zeros(shape, dtype=tl.float32)`` (or tl.full) as a statement:
    (acc, the call, index of its dtype argument)."""
    found = sole_name_assignment(statement)
    if found is None:
        return None
    name, call = found
    kind = tl_call(call)
    if kind not in _DTYPE_POSITION:
        return None
    index = _fp32_arg(call, "dtype", _DTYPE_POSITION[kind])
    return None if index is None else (name, call, index)


def _mentions(node: cst.CSTNode, name: str) -> bool:
    if type(node) is cst.Name:
        return node.value == name
    return any(_mentions(child, name) for child in node.children)


def _keeps_dtype(value: cst.CSTNode, name: str) -> bool:
    """``tl.dot(a, b, acc)``: the result takes the accumulator's dtype."""
    if tl_call(value) != "dot" or find_arg(value, "out_dtype") is not None:
        return False
    index = find_arg(value, "acc", 2)
    return index is not None and m.matches(value.args[index].value, m.Name(name))


def _retyped_update(node: cst.CSTNode, name: str) -> bool:
    """An update of ``name`` whose value keeps float32 whatever ``name`` holds."""
    if type(node) is cst.AugAssign:
        return m.matches(node.target, m.Name(name))
    if type(node) is cst.Assign and any(m.matches(t.target, m.Name(name)) for t in node.targets):
        return _mentions(node.value, name) and not _keeps_dtype(node.value, name)
    return False


def _loop_updates(statement: cst.CSTNode, name: str) -> bool:
    """Does a loop in ``statement`` (itself, or one nested in an ``if``) update ``name``?"""
    if type(statement) in (cst.For, cst.While):
        return _mentions_update(statement.body, name)
    return any(_loop_updates(child, name) for child in statement.children)


def _mentions_update(node: cst.CSTNode, name: str) -> bool:
    if _retyped_update(node, name):
        return True
    return any(_mentions_update(child, name) for child in node.children)


class _CastUpdates(cst.CSTTransformer):
    """``acc += v`` -> ``acc += v.to(tl.float16)``; ``acc = f(acc)`` -> ``acc = (f(acc)).to(tl.float16)``."""

    def __init__(self, name: str, fp16: cst.Attribute) -> None:
        self.name, self.fp16 = name, fp16

    def _cast(self, value: cst.BaseExpression) -> cst.Call:
        if precedence(value) < ATOM:
            value = parenthesize(value)
        to = cst.Attribute(value=value, attr=cst.Name("to"))
        return cst.Call(func=to, args=[cst.Arg(self.fp16)])

    def leave_AugAssign(self, original, updated):
        if _retyped_update(original, self.name):
            return updated.with_changes(value=self._cast(updated.value))
        return updated

    def leave_Assign(self, original, updated):
        if _retyped_update(original, self.name):
            return updated.with_changes(value=self._cast(updated.value))
        return updated


class AccumulatorFp16(Operator):
    name = "accumulator-fp16"
    family = "precision"
    description = "make a float32 accumulator (tl.zeros/tl.full, tl.dot out_dtype) float16"
    node_types = (cst.Call, cst.IndentedBlock)
    examples = (
        Example.kernel(
            "acc = tl.zeros((BLOCK,), dtype=tl.float32)",
            "acc = tl.zeros((BLOCK,), dtype=tl.float16)",
        ),
        Example.kernel(
            "acc = tl.full((BLOCK,), 0, tl.float32)",
            "acc = tl.full((BLOCK,), 0, tl.float16)",
        ),
        Example.kernel(
            """
            a = tl.load(x_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])
            c = tl.dot(a, a, out_dtype=triton.language.float32)
            """,
            """
            a = tl.load(x_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])
            c = tl.dot(a, a, out_dtype=triton.language.float16)
            """,
        ),
        Example.kernel(
            """
            acc = tl.zeros((BLOCK,), dtype=tl.float32)
            for k in range(0, n, BLOCK):
                acc += tl.load(x_ptr + k + tl.arange(0, BLOCK)) * 2.0
            """,
            """
            acc = tl.zeros((BLOCK,), dtype=tl.float16)
            for k in range(0, n, BLOCK):
                acc += (tl.load(x_ptr + k + tl.arange(0, BLOCK)) * 2.0).to(tl.float16)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        kind = tl_call(node)
        if kind in _DTYPE_POSITION:
            index = _fp32_arg(node, "dtype", _DTYPE_POSITION[kind])
        elif kind == "dot":
            index = _fp32_arg(node, "out_dtype", None)
        else:
            return
        if index is not None:
            yield _to_fp16(node, index)

    def mutations_in(self, node: cst.CSTNode, scope: Scope) -> Iterator[cst.CSTNode]:
        """An accumulator a loop updates with float32 values (``acc += x``) would change
        type from one iteration to the next, which Triton refuses: there the mutant is
        written on the block, with the updates cast to fp16 as well (what accumulating in
        half precision means). ``acc = tl.dot(a, b, acc)`` keeps the accumulator's dtype."""
        if type(node) is cst.IndentedBlock:
            yield from self._block(node)
            return
        if _init_updated_in_a_loop(node, scope):
            return  # the block form plants this one
        yield from self.mutations(node)

    def _block(self, block: cst.IndentedBlock) -> Iterator[cst.CSTNode]:
        for position, statement in enumerate(block.body):
            found = _fp32_init(statement)
            if found is None:
                continue
            name, call, index = found
            later = block.body[position + 1 :]
            if not any(_loop_updates(loop, name) for loop in later):
                continue
            fp16 = rename_attr(call.args[index].value, "float16")
            cast = _CastUpdates(name, fp16)
            init = statement.with_changes(
                body=[statement.body[0].with_changes(value=_to_fp16(call, index))]
            )
            rest = [loop.visit(cast) if _loop_updates(loop, name) else loop for loop in later]
            yield block.with_changes(body=(*block.body[:position], init, *rest))


def _init_updated_in_a_loop(node: cst.CSTNode, scope: Scope) -> bool:
    """Is ``node`` the call of an fp32 accumulator's initialisation that a later loop
    of its block updates?"""
    statement = scope.parent(scope.parent(node) or node)
    found = _fp32_init(statement) if statement is not None else None
    if found is None or found[1] is not node:
        return False
    block = scope.parent(statement)
    later = block.body[block.body.index(statement) + 1 :] if block is not None else ()
    return any(_loop_updates(loop, found[0]) for loop in later)


class CastFp16(Operator):
    name = "cast-fp16"
    family = "precision"
    description = "cast to float16 where the kernel casts to float32"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            "x = tl.load(x_ptr + tl.arange(0, BLOCK)).to(tl.float32)",
            "x = tl.load(x_ptr + tl.arange(0, BLOCK)).to(tl.float16)",
        ),
        Example.kernel(
            "x = tl.cast(tl.load(x_ptr + tl.arange(0, BLOCK)), tl.float32)",
            "x = tl.cast(tl.load(x_ptr + tl.arange(0, BLOCK)), tl.float16)",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        found = _upcast(node)
        if found is not None:
            yield _to_fp16(node, found[1])


class UpcastDrop(Operator):
    name = "upcast-drop"
    family = "precision"
    description = "drop a cast to float32: compute in the input dtype"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            x = tl.load(x_ptr + tl.arange(0, BLOCK)).to(tl.float32)
            tl.store(y_ptr + tl.arange(0, BLOCK), x * x)
            """,
            """
            x = tl.load(x_ptr + tl.arange(0, BLOCK))
            tl.store(y_ptr + tl.arange(0, BLOCK), x * x)
            """,
        ),
        Example.kernel(
            "x = tl.cast(tl.load(x_ptr + tl.arange(0, BLOCK)), tl.float32)",
            "x = tl.load(x_ptr + tl.arange(0, BLOCK))",
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        found = _upcast(node)
        if found is not None:
            yield found[0]


class DotTf32(Operator):
    name = "dot-tf32"
    family = "precision"
    description = "let a tl.dot that asks for full fp32 precision use tf32"
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            a = tl.load(x_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])
            c = tl.dot(a, a, input_precision="ieee")
            """,
            """
            a = tl.load(x_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])
            c = tl.dot(a, a, input_precision="tf32")
            """,
        ),
        Example.kernel(
            """
            a = tl.load(x_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])
            c = tl.dot(a, a, allow_tf32=False)
            """,
            """
            a = tl.load(x_ptr + tl.arange(0, 16)[:, None] * 16 + tl.arange(0, 16)[None, :])
            c = tl.dot(a, a, allow_tf32=True)
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        if tl_call(node) != "dot":
            return
        precision = find_arg(node, "input_precision")
        if precision is not None:
            value = node.args[precision].value
            if isinstance(value, cst.SimpleString) and value.evaluated_value in ("ieee", "tf32x3"):
                text = f"{value.prefix}{value.quote}tf32{value.quote}"
                yield replace_arg_value(node, precision, cst.SimpleString(text))
        allow = find_arg(node, "allow_tf32")
        if allow is not None and m.matches(node.args[allow].value, m.Name("False")):
            yield replace_arg_value(node, allow, cst.Name("True"))


#: Low-precision float types a value is rounded through.
_LOW_PRECISION = frozenset(
    {
        "float16",
        "bfloat16",
        "float8e4nv",
        "float8e5",
        "float8e4b8",
        "float8e5b16",
        "float8e4b15",
    }
)


def _cast(node: cst.CSTNode) -> tuple[cst.BaseExpression, cst.BaseExpression] | None:
    """``x.to(D)`` / ``tl.cast(x, D)`` -> (x, D); anything else -> None."""
    if type(node) is not cst.Call:
        return None
    if type(node.func) is cst.Attribute and node.func.attr.value == "to":
        index, value = find_arg(node, "dtype", 0), node.func.value
    elif tl_call(node) == "cast" and node.args and node.args[0].keyword is None:
        index, value = find_arg(node, "dtype", 1), node.args[0].value
    else:
        return None
    return None if index is None else (value, node.args[index].value)


def _dtype_expression(dtype: cst.BaseExpression) -> bool:
    """A dtype the syntax does not name: ``y.dtype``, ``y_ptr.dtype.element_ty``,
    ``OUT_DTYPE`` (a name or a chain of attributes on one, not ``tl.T``)."""
    if tl_attr(dtype) is not None:
        return False
    while type(dtype) is cst.Attribute:
        dtype = dtype.value
    return type(dtype) is cst.Name and dtype.value not in ("tl", "triton")


def _rounds(value: cst.BaseExpression, dtype: cst.BaseExpression) -> bool:
    """Is casting ``value`` to ``dtype`` (on its way back to float32) a rounding?
    ``tl.T`` for a low-precision T, or a dtype expression other than ``value``'s
    own (``x.to(x.dtype)`` changes nothing)."""
    name = tl_attr(dtype)
    if name is not None:
        return name in _LOW_PRECISION
    if not _dtype_expression(dtype):
        return False
    own = dtype
    while type(own) is cst.Attribute and own.attr.value in ("element_ty", "dtype", "type"):
        own = own.value
    return not own.deep_equals(value)


class RoundingDrop(Operator):
    name = "rounding-drop"
    family = "precision"
    description = (
        "drop a round trip through a low-precision type (or a dtype expression such as"
        " y.dtype): x.to(tl.float16).to(tl.float32) -> x"
    )
    node_types = (cst.Call,)
    examples = (
        Example.kernel(
            """
            x = tl.load(x_ptr + tl.arange(0, BLOCK)) * 3.0
            y = x.to(tl.bfloat16).to(tl.float32)
            """,
            """
            x = tl.load(x_ptr + tl.arange(0, BLOCK)) * 3.0
            y = x
            """,
        ),
        Example.kernel(
            "y = tl.cast(tl.cast(tl.load(x_ptr + tl.arange(0, BLOCK)), tl.float16), tl.float32)",
            "y = tl.load(x_ptr + tl.arange(0, BLOCK))",
        ),
        Example.kernel(
            """
            x = tl.load(x_ptr + tl.arange(0, BLOCK)) * 3.0
            y = x.to(y_ptr.dtype.element_ty).to(tl.float32)
            """,
            """
            x = tl.load(x_ptr + tl.arange(0, BLOCK)) * 3.0
            y = x
            """,
        ),
        Example.kernel(
            """
            out = tl.load(y_ptr + tl.arange(0, BLOCK))
            x = tl.load(x_ptr + tl.arange(0, BLOCK)) * 3.0
            y = x.to(out.dtype).to(tl.float32)
            """,
            """
            out = tl.load(y_ptr + tl.arange(0, BLOCK))
            x = tl.load(x_ptr + tl.arange(0, BLOCK)) * 3.0
            y = x
            """,
        ),
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        outer = _cast(node)
        if outer is None or tl_attr(outer[1]) != "float32":
            return
        inner = _cast(outer[0])
        if inner is not None and _rounds(*inner):
            yield inner[0]


OPERATORS: tuple[Operator, ...] = (
    AccumulatorFp16(),
    CastFp16(),
    UpcastDrop(),
    DotTf32(),
    RoundingDrop(),
)
