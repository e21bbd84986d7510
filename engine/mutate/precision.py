"""precision: where a kernel keeps or loses its float32 headroom.

Tests that compare against a reference with loose tolerances, or only on small
inputs, let half-precision accumulation through; these mutants check that.

    accumulator-fp16  acc = tl.zeros((BM, BN), dtype=tl.float32) -> dtype=tl.float16
                      tl.full((BM,), 0, dtype=tl.float32)        -> dtype=tl.float16
                      tl.dot(a, b, out_dtype=tl.float32)         -> out_dtype=tl.float16
    cast-fp16         x.to(tl.float32)           -> x.to(tl.float16)
                      tl.cast(x, tl.float32)     -> tl.cast(x, tl.float16)
    upcast-drop       x = tl.load(p).to(tl.float32) -> x = tl.load(p)
    dot-tf32          tl.dot(a, b, input_precision="ieee") -> input_precision="tf32"
                      tl.dot(a, b, allow_tf32=False)        -> allow_tf32=True
    rounding-drop     y = x.to(tl.bfloat16).to(tl.float32) -> y = x
                      (a value meant to be rounded to the stored precision is not)
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
from libcst import matchers as m

from .base import Example, Operator
from .syntax import FLOAT32, find_arg, rename_attr, replace_arg_value, tl_attr, tl_call

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


class AccumulatorFp16(Operator):
    name = "accumulator-fp16"
    family = "precision"
    description = "make a float32 accumulator (tl.zeros/tl.full, tl.dot out_dtype) float16"
    node_types = (cst.Call,)
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


def _cast_to(node: cst.CSTNode) -> tuple[cst.BaseExpression, str] | None:
    """``x.to(tl.T)`` / ``tl.cast(x, tl.T)`` -> (x, "T"); anything else -> None."""
    if type(node) is not cst.Call:
        return None
    if type(node.func) is cst.Attribute and node.func.attr.value == "to":
        index, value = find_arg(node, "dtype", 0), node.func.value
    elif tl_call(node) == "cast" and node.args and node.args[0].keyword is None:
        index, value = find_arg(node, "dtype", 1), node.args[0].value
    else:
        return None
    if index is None:
        return None
    dtype = tl_attr(node.args[index].value)
    return None if dtype is None else (value, dtype)


class RoundingDrop(Operator):
    name = "rounding-drop"
    family = "precision"
    description = (
        "drop a round trip through a low-precision type: x.to(tl.float16).to(tl.float32) -> x"
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
    )

    def mutations(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        outer = _cast_to(node)
        if outer is None or outer[1] != "float32":
            return
        inner = _cast_to(outer[0])
        if inner is not None and inner[1] in _LOW_PRECISION:
            yield inner[0]


OPERATORS: tuple[Operator, ...] = (
    AccumulatorFp16(),
    CastFp16(),
    UpcastDrop(),
    DotTf32(),
    RoundingDrop(),
)
