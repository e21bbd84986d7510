"""bfloat16 arithmetic for Triton's interpreter.

Runs inside the sandbox child, in interpreted jobs only; imports only numpy and triton.

Triton's interpreter (3.9) keeps a bfloat16 tensor's values as their 16-bit patterns in
a ``uint16`` array and converts them correctly (``.to()``, loads, stores), but its
arithmetic works on those arrays as they are: ``x * y`` multiplies the bit patterns as
integers, ``-x`` negates an unsigned number, ``x < y`` compares patterns (wrong for
negative values), ``tl.sum`` / ``tl.max`` / ``tl.dot`` reduce them as integers. A kernel
that computes in bfloat16 (``a.to(b.dtype) * b``, a bf16 ``tl.dot``) gives garbage,
where a GPU computes in bfloat16; and it converts a float to bfloat16 by truncation where
a GPU rounds to nearest even. ``install()`` makes each of those operations decode
bfloat16 operands to float32, compute, and round the result back to bfloat16 (nearest
even), once per operation as a GPU does; a ``tl.dot`` of bfloat16 operands accumulates
in its float32 accumulator as a GPU's tensor cores do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["decode", "encode", "install", "uninstall"]

_SAVED: dict[tuple[Any, str], Any] = {}
#: numpy operations whose bfloat16 operands are values, not bit patterns
_FLOAT_OPS = {
    np.add, np.subtract, np.multiply, np.divide, np.fmod, np.minimum, np.maximum, np.fmin,
    np.fmax, np.less, np.greater, np.less_equal, np.greater_equal, np.equal, np.not_equal,
    np.exp, np.exp2, np.log, np.log2, np.sqrt, np.sin, np.cos, np.floor, np.ceil, np.abs,
    np.negative, np.clip, np.nanmin, np.nanmax, np.nanargmin, np.nanargmax, np.sum, np.cumsum,
    np.cumprod,
}  # fmt: skip


def decode(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 values."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def encode(values: np.ndarray) -> np.ndarray:
    """float values -> bfloat16 bit patterns, rounded to nearest even (NaN stays NaN)."""
    f = np.asarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return np.where(np.isnan(f), np.uint16(0x7FC0), rounded.astype(np.uint16))


def _erf(interpreter: Any, x: np.ndarray) -> np.ndarray:
    exact = getattr(interpreter, "np_erf_fp32", None)
    if exact is not None:
        return exact(x)
    import math

    return np.vectorize(math.erf, otypes=[np.float32])(x)


def _is_bf16(handle: Any) -> bool:
    dtype = getattr(getattr(handle, "dtype", None), "scalar", None)
    return getattr(dtype, "name", "") == "bf16" and np.asarray(handle.data).dtype == np.uint16


def _on_values(op: Any, *operands: Any) -> bool:
    """Whether ``op`` is to compute on the values of ``operands``: a float operation
    whose operands are all bfloat16."""
    return op in _FLOAT_OPS and all(_is_bf16(h) for h in operands)


def _back(out: np.ndarray) -> np.ndarray:
    """A result in bfloat16 patterns; a comparison's booleans as the interpreter keeps them."""
    out = np.asarray(out)
    return out.astype(np.uint16) if out.dtype == np.bool_ else encode(out)


def _as_float32(interpreter: Any, handle: Any) -> Any:
    """A bfloat16 operand as a float32 handle of its values; any other as it is."""
    if _is_bf16(handle):
        return interpreter.TensorHandle(decode(handle.data), interpreter.tl.float32)
    return handle


def _save(owner: Any, name: str, value: Any) -> None:
    _SAVED[(owner, name)] = getattr(owner, name)
    setattr(owner, name, value)


def install(note: Callable[[str], None]) -> bool:
    """Patch the interpreter's arithmetic for bfloat16 (idempotent)."""
    if _SAVED:
        return True
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    needed = ("binary_op", "unary_op", "ternary_op", "create_fma", "create_rsqrt", "create_erf",
              "create_dot")  # fmt: skip
    if not all(hasattr(builder, n) for n in needed) or not hasattr(interpreter, "ReduceOps"):
        return False  # another Triton's interpreter: left as it is
    handle_type = interpreter.TensorHandle
    said = "bfloat16 arithmetic on values (the interpreter computes on bit patterns)"
    binary, unary, ternary = builder.binary_op, builder.unary_op, builder.ternary_op
    fma, rsqrt, erf, dot = (
        builder.create_fma,
        builder.create_rsqrt,
        builder.create_erf,
        builder.create_dot,
    )

    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if _on_values(op, lhs, rhs):
            note(said)
            return handle_type(_back(op(decode(lhs.data), decode(rhs.data))), lhs.dtype.scalar)
        return binary(self, lhs, rhs, op)

    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if _on_values(op, arg):
            note(said)
            return handle_type(_back(op(decode(arg.data))), arg.dtype.scalar)
        return unary(self, arg, op)

    def ternary_op(self: Any, a: Any, b: Any, c: Any, op: Any) -> Any:
        if op is np.clip and _is_bf16(a):
            note(said)
            out = np.clip(decode(a.data), decode(b.data), decode(c.data))
            return handle_type(encode(out), c.dtype.scalar)
        return ternary(self, a, b, c, op)

    def create_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if _is_bf16(z):
            note(said)
            wide = [decode(h.data).astype(np.float64) for h in (x, y, z)]
            return handle_type(encode(wide[0] * wide[1] + wide[2]), z.dtype.scalar)
        return fma(self, x, y, z)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *rest: Any) -> Any:
        if _is_bf16(a) or _is_bf16(b):
            note(said)
            a, b = _as_float32(interpreter, a), _as_float32(interpreter, b)
        return dot(self, a, b, d, *rest)

    _save(builder, "binary_op", binary_op)
    _save(builder, "unary_op", unary_op)
    _save(builder, "ternary_op", ternary_op)
    _save(builder, "create_fma", create_fma)
    rsqrt_on_values = _one_on_values(rsqrt, lambda x: 1 / np.sqrt(x), handle_type, note, said)
    erf_on_values = _one_on_values(erf, lambda x: _erf(interpreter, x), handle_type, note, said)
    _save(builder, "create_rsqrt", rsqrt_on_values)
    _save(builder, "create_erf", erf_on_values)
    _save(builder, "create_dot", create_dot)
    _install_rounding(interpreter, builder, note)
    _install_reductions(interpreter, note, said)
    return True


def _one_on_values(
    original: Any,
    fn: Callable[[np.ndarray], np.ndarray],
    handle_type: Any,
    note: Callable[[str], None],
    said: str,
) -> Any:
    """``original``, a one-operand builder method (``create_rsqrt``, ``create_erf``),
    wrapped so that a bfloat16 operand is computed on as values by ``fn`` and the result
    rounded back to bfloat16."""

    def call(self: Any, arg: Any) -> Any:
        if _is_bf16(arg):
            note(said)
            return handle_type(encode(fn(decode(arg.data))), arg.dtype.scalar)
        return original(self, arg)

    return call


def _install_rounding(interpreter: Any, builder: Any, note: Callable[[str], None]) -> None:
    """A float converted to bfloat16 rounds to nearest even, as a GPU's ``cvt.rn.bf16``;
    the interpreter truncates (``x.to(tl.bfloat16)``, a store into a bf16 tensor)."""
    handle_type = interpreter.TensorHandle
    cast, fp_to_fp = builder.cast_impl, builder.create_fp_to_fp
    rtz = getattr(getattr(interpreter, "_ir", None), "ROUNDING_MODE", None)
    rtz = getattr(rtz, "RTZ", object())
    said = "bfloat16 conversions round to nearest even (the interpreter truncates)"

    def to_bf16(src: Any, dst_type: Any) -> Any:
        values = np.asarray(src.data)
        if _is_bf16(src) or values.dtype.kind != "f":
            return None
        note(said)
        return handle_type(encode(values.astype(np.float32)), dst_type.scalar)

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if getattr(dst_type.scalar, "name", "") == "bf16":
            out = to_bf16(src, dst_type)
            if out is not None:
                return out
        return cast(self, src, dst_type)

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if getattr(dst_type.scalar, "name", "") == "bf16" and rounding_mode is not rtz:
            out = to_bf16(src, dst_type)
            if out is not None:
                return out
        return fp_to_fp(self, src, dst_type, rounding_mode)

    _save(builder, "cast_impl", cast_impl)
    _save(builder, "create_fp_to_fp", create_fp_to_fp)


def _install_reductions(interpreter: Any, note: Callable[[str], None], said: str) -> None:
    """``tl.sum`` / ``tl.max`` / ``tl.cumsum`` of bfloat16: the reduction reads values and
    its ``to_tensor`` rounds a float result back to bfloat16 patterns (it would cast the
    float to uint16 as an integer)."""
    reduce_ops, scan_ops = interpreter.ReduceOps, interpreter.ScanOps
    base = reduce_ops.__mro__[1]  # ReduceScanOpInterface: to_tensor
    to_tensor = base.to_tensor

    def on_values(original: Any) -> Any:
        def call(self: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            first = input[0] if isinstance(input, (tuple, list)) else input
            if not _is_bf16(first.handle):
                return original(self, input, *args, **kwargs)
            note(said)
            handle = first.handle
            bits = handle.data
            handle.data = decode(bits)
            try:
                return original(self, input, *args, **kwargs)
            finally:
                handle.data = bits

        return call

    def bf16_to_tensor(self: Any, ret: Any, dtype: Any) -> Any:
        if getattr(dtype, "name", "") == "bf16" and np.asarray(ret).dtype.kind == "f":
            ret = encode(np.asarray(ret, dtype=np.float32))
        return to_tensor(self, ret, dtype)

    _save(base, "to_tensor", bf16_to_tensor)
    for owner, name in ((reduce_ops, "sum"), (reduce_ops, "min_max"), (scan_ops, "cumsum"),
                        (scan_ops, "cumprod")):  # fmt: skip
        if hasattr(owner, name):
            _save(owner, name, on_values(getattr(owner, name)))


def uninstall() -> None:
    for (owner, name), value in _SAVED.items():
        setattr(owner, name, value)
    _SAVED.clear()
