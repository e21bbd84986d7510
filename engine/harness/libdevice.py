"""libdevice math for Triton's interpreter, with compiled Triton's semantics.

Runs inside the sandbox child; imports only the stdlib, numpy, torch and triton.

Kernels written for a GPU call CUDA's libdevice::

    from triton.language.extra.libdevice import rsqrt          # the portable stubs
    from triton.language.extra.cuda.libdevice import tanh      # the CUDA module
    tl.extra.cuda.libdevice.erf(x)

Compiled, the code generator maps each to an ``extern_elementwise`` call of a
``__nv_*`` symbol. Triton's interpreter has neither: the stub returns ``None``
(``cannot convert None to tensor``) and the CUDA functions need a ``_semantic``
(``Did you forget to add @triton.jit``), and its builder raises for
``create_extern_elementwise``. ``install()`` gives the builder that method, backed
by numpy on the interpreter's arrays, and puts, in both modules, a callable that
runs the real CUDA function with the interpreter's semantic. So argument checking,
implicit casts, broadcasting and result types are Triton's own (an ``fp16`` argument
is refused as on a GPU); only the arithmetic is ours, in ``IMPLEMENTED`` below.

Semantics kept: float32 math is computed in float64 and rounded once (within CUDA's
own error bound of the exact value; ``benchmarks/libdevice_parity.py`` compares with a
GPU); float->int conversions saturate and send NaN to 0 (as ``cvt.rni`` does);
``round`` rounds half away from zero, ``rint`` / ``nearbyint`` half to even;
``isnan`` / ``isinf`` / ``signbit`` / ``finitef`` answer an int32 0 or 1;
``remainder`` is IEEE's (``x - rint(x / y) * y``), ``fmod`` C's; the ``fast_*``
approximations are computed exactly; directed rounding (``_rd``, ``_ru``, ``_rz``) is
exact for float32 results (the operation in float64, then rounded in the asked
direction), nearest for float64 results. Not provided (a kernel that calls one fails
with a line naming it): ``NOT_PROVIDED``. docs/interpreter-parity.md lists both.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["IMPLEMENTED", "NOT_PROVIDED", "install", "missing"]

_CUDA_MODULE = "triton.language.extra.cuda.libdevice"
_STUB_MODULE = "triton.language.extra.libdevice"

#: libdevice functions with no interpreter implementation (special-purpose bit tricks).
NOT_PROVIDED = ("rcp64h",)

_STATE = threading.local()


def _torch_special(name: str) -> Callable[[np.ndarray], np.ndarray]:
    def call(x: np.ndarray) -> np.ndarray:
        import torch

        wide = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64))
        return getattr(torch.special, name)(wide).numpy().astype(x.dtype)

    return call


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + 0.5), x).astype(x.dtype)


def _as_int(kind: str, to: type) -> Callable[[np.ndarray], np.ndarray]:
    """A float->int conversion as CUDA's ``cvt``: rounded, saturated, NaN -> 0."""
    rounding = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}[kind]

    def convert(x: np.ndarray) -> np.ndarray:
        info = np.iinfo(to)
        wide = rounding(x.astype(np.float64))
        high = wide >= float(info.max)  # float(max) of a 64-bit type rounds up: compare, not cast
        low = wide <= float(info.min)
        safe = np.where(np.isnan(wide) | high | low, 0.0, wide).astype(to)
        return np.where(high, info.max, np.where(low, info.min, safe)).astype(to)

    return convert


def _to_float(to: type) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: x.astype(to)


def _directed(op: Callable[..., np.ndarray], mode: str) -> Callable[..., np.ndarray]:
    """``op`` rounded toward ``mode`` (rn, rz, rd, ru): float32 results are computed in
    float64 and rounded in that direction; float64 results are nearest."""

    def call(*args: np.ndarray) -> np.ndarray:
        dtype = args[0].dtype
        if mode == "rn" or dtype != np.float32:
            return op(*args).astype(dtype)
        return _round_to_f32(op(*(a.astype(np.float64) for a in args)), mode)

    return call


def _narrowed(mode: str) -> Callable[[np.ndarray], np.ndarray]:
    """float64 -> float32 rounded toward ``mode``."""
    return lambda x: x.astype(np.float32) if mode == "rn" else _round_to_f32(x, mode)


def _round_to_f32(exact: np.ndarray, mode: str) -> np.ndarray:
    near = exact.astype(np.float32)
    back = near.astype(np.float64)
    if mode == "rd":
        fix, toward = back > exact, -np.inf
    elif mode == "ru":
        fix, toward = back < exact, np.inf
    else:  # rz
        fix, toward = np.abs(back) > np.abs(exact), 0.0
    return np.where(fix, np.nextafter(near, np.float32(toward)), near)


def _fma(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    return x * y + z


def _remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64), y.astype(np.float64)
    return (wide[0] - np.rint(wide[0] / wide[1]) * wide[1]).astype(x.dtype)


def _bits(x: np.ndarray, to: type) -> np.ndarray:
    return np.ascontiguousarray(x).view(to)


def _popc(x: np.ndarray) -> np.ndarray:
    data = np.ascontiguousarray(x)
    octets = data.view(np.uint8).reshape(*data.shape, data.dtype.itemsize)
    return np.unpackbits(octets, axis=-1).sum(axis=-1).astype(np.int32)


def _clz(x: np.ndarray) -> np.ndarray:
    width = x.dtype.itemsize * 8
    unsigned = x.view(np.uint64 if width == 64 else np.uint32).astype(np.uint64)
    out = np.full(x.shape, width, dtype=np.int32)
    nonzero = unsigned != 0
    out[nonzero] = (
        width - 1 - np.floor(np.log2(unsigned[nonzero].astype(np.float64))).astype(np.int32)
    )
    # float64's log2 rounds up just below a power of two: correct by checking the bit
    top = np.left_shift(np.uint64(1), (width - 1 - out[nonzero]).astype(np.uint64))
    out[nonzero] += (unsigned[nonzero] < top).astype(np.int32)
    return out


def _ffs(x: np.ndarray) -> np.ndarray:
    width = x.dtype.itemsize * 8
    unsigned = x.view(np.uint64 if width == 64 else np.uint32).astype(np.uint64)
    lowest = unsigned & (~unsigned + np.uint64(1))
    out = np.zeros(x.shape, dtype=np.int32)
    nonzero = unsigned != 0
    out[nonzero] = np.round(np.log2(lowest[nonzero].astype(np.float64))).astype(np.int32) + 1
    return out


def _brev(x: np.ndarray) -> np.ndarray:
    width = x.dtype.itemsize * 8
    unsigned = x.view(np.uint64 if width == 64 else np.uint32)
    out = np.zeros_like(unsigned)
    for bit in range(width):
        out |= (
            (unsigned >> unsigned.dtype.type(bit)) & unsigned.dtype.type(1)
        ) << unsigned.dtype.type(width - 1 - bit)
    return out.view(x.dtype)


def _mulhi(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.itemsize == 4:
        wide = np.int64 if x.dtype.kind == "i" else np.uint64
        return ((x.astype(wide) * y.astype(wide)) >> 32).astype(x.dtype)
    return (
        np.array(
            [(int(a) * int(b)) >> 64 for a, b in zip(x.ravel(), y.ravel(), strict=True)],
            dtype=object,
        )
        .astype(x.dtype)
        .reshape(x.shape)
    )


def _mul24(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    def low24(v: np.ndarray) -> np.ndarray:
        v = v.astype(np.int64) & 0xFFFFFF
        return np.where((v & 0x800000) != 0, v - 0x1000000, v) if x.dtype.kind == "i" else v

    return (low24(x) * low24(y)).astype(x.dtype)


def _hadd(rounding: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    return lambda x, y: ((x.astype(np.int64) + y.astype(np.int64) + rounding) >> 1).astype(x.dtype)


def _sad(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    return (np.abs(x.astype(np.int64) - y.astype(np.int64)) + z.astype(np.int64)).astype(z.dtype)


def _byte_perm(x: np.ndarray, y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Byte ``i`` of the result is byte ``(s >> 4i) & 7`` of the eight bytes ``y:x``."""
    both = (y.view(np.uint32).astype(np.uint64) << np.uint64(32)) | x.view(np.uint32).astype(
        np.uint64
    )
    out = np.zeros(both.shape, dtype=np.uint64)
    selector = s.view(np.uint32).astype(np.uint64)
    for i in range(4):
        pick = (selector >> np.uint64(4 * i)) & np.uint64(7)
        byte = (both >> (pick * np.uint64(8))) & np.uint64(0xFF)
        out |= byte << np.uint64(8 * i)
    return out.astype(np.uint32).view(np.int32)


def _hilo(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    bits = (hi.astype(np.int64).astype(np.uint64) << np.uint64(32)) | lo.view(np.uint32).astype(
        np.uint64
    )
    return bits.view(np.float64)


def _ilogb(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.floor(np.log2(np.abs(x.astype(np.float64))))
    # CUDA: ilogb(0) and ilogb(NaN) are INT_MIN, ilogb(inf) INT_MAX
    out = np.where((x == 0) | np.isnan(x), -(2**31), np.where(np.isinf(x), 2**31 - 1, out))
    return out.astype(np.int32)


def _bessel(kind: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def call(n: np.ndarray, x: np.ndarray) -> np.ndarray:
        orders, values = np.broadcast_arrays(n, x)
        out = np.empty(values.shape, dtype=x.dtype)
        for index in np.ndindex(values.shape):
            out[index] = _bessel_n(kind, int(orders[index]), float(values[index]))
        return out

    return call


def _bessel_n(kind: str, n: int, x: float) -> float:
    """Integer-order Bessel functions by recurrence from torch's orders 0 and 1."""
    import torch

    t = torch.tensor([x], dtype=torch.float64)
    f0 = getattr(torch.special, f"bessel_{kind}0")(t).item()
    f1 = getattr(torch.special, f"bessel_{kind}1")(t).item()
    if n == 0:
        return f0
    sign = -1.0 if n < 0 and n % 2 else 1.0
    n = abs(n)
    for k in range(1, n):
        f0, f1 = f1, (2 * k / x) * f1 - f0
    return sign * f1


def _i32(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: fn(x).astype(np.int32)


def _wide(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``fn`` on float32 arguments computed in float64 and rounded once (so within
    CUDA's own error bound of the true value); float64 arguments as they are."""

    def call(*args: np.ndarray) -> np.ndarray:
        dtype = args[0].dtype
        wide = [a.astype(np.float64) if a.dtype == np.float32 else a for a in args]
        return np.asarray(fn(*wide)).astype(dtype)

    return call


def _pi_times(fn: Callable[[np.ndarray], np.ndarray], zero_at: float):
    """``sinpi`` / ``cospi``: exact zeros where the product with pi is a multiple of pi
    (``zero_at`` 0) or of pi/2 (``zero_at`` 0.5), as CUDA gives them."""

    def call(x: np.ndarray) -> np.ndarray:
        wide = np.fmod(x.astype(np.float64), 2.0)
        out = fn(np.pi * wide)
        shifted = wide - zero_at
        out = np.where(np.isfinite(wide) & (shifted == np.round(shifted)), 0.0 * np.sign(out), out)
        return out.astype(x.dtype)

    return call


def _tgamma(x: np.ndarray) -> np.ndarray:
    import math

    def one(v: float) -> float:
        if v == 0:
            return math.copysign(math.inf, v)
        try:
            return math.gamma(v)
        except (ValueError, OverflowError):
            return math.nan if v < 0 or math.isnan(v) else math.inf

    wide = x.astype(np.float64)
    return np.array([one(float(v)) for v in wide.ravel()]).reshape(wide.shape).astype(x.dtype)


_F, _D = np.float32, np.float64

#: libdevice name -> numpy function of the (already cast) argument arrays.
IMPLEMENTED: dict[str, Callable[..., np.ndarray]] = {
    # elementary
    "abs": np.abs, "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin,
    "asinh": np.arcsinh, "atan": np.arctan, "atanh": np.arctanh, "atan2": np.arctan2,
    "cbrt": np.cbrt, "rcbrt": lambda x: 1 / np.cbrt(x), "cos": np.cos, "cosh": np.cosh,
    "cospi": _pi_times(np.cos, 0.5), "sinpi": _pi_times(np.sin, 0.0),
    "sin": np.sin, "sinh": np.sinh, "tan": np.tan, "tanh": np.tanh,
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x),
    "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "logb": lambda x: np.floor(np.log2(np.abs(x))), "ilogb": _ilogb,
    "pow": lambda x, y: np.power(x, y.astype(x.dtype)), "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "rsqrt_rn": lambda x: 1 / np.sqrt(x),
    "hypot": np.hypot, "rhypot": lambda x, y: 1 / np.hypot(x, y),
    "norm3d": lambda a, b, c: np.sqrt(a * a + b * b + c * c),
    "rnorm3d": lambda a, b, c: 1 / np.sqrt(a * a + b * b + c * c),
    "norm4d": lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d),
    "rnorm4d": lambda a, b, c, d: 1 / np.sqrt(a * a + b * b + c * c + d * d),
    "copysign": np.copysign, "fdim": lambda x, y: np.where(x > y, x - y, 0).astype(x.dtype),
    "fmod": np.fmod, "remainder": _remainder, "nextafter": np.nextafter,
    "ldexp": lambda x, n: np.ldexp(x, n.astype(np.int32)),
    "scalbn": lambda x, n: np.ldexp(x, n.astype(np.int32)),
    "saturatef": lambda x: np.clip(x, 0, 1),
    # rounding
    "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": _round_half_away,
    "rint": np.rint, "nearbyint": np.rint,
    "llrint": lambda x: _as_int("rn", np.int64)(x), "llround": lambda x: _as_int("rn", np.int64)(_round_half_away(x)),
    # classification (int32 0 / 1)
    "isnan": _i32(np.isnan), "isinf": _i32(np.isinf), "signbit": _i32(np.signbit),
    "finitef": _i32(np.isfinite), "isfinited": _i32(np.isfinite),
    # special functions
    "erf": _torch_special("erf"), "erfc": _torch_special("erfc"), "erfinv": _torch_special("erfinv"),
    "erfcinv": lambda x: _torch_special("erfinv")(1 - x), "erfcx": _torch_special("erfcx"),
    "lgamma": _torch_special("gammaln"), "tgamma": _tgamma,
    "normcdf": _torch_special("ndtr"), "normcdfinv": _torch_special("ndtri"),
    "cyl_bessel_i0": _torch_special("i0"), "cyl_bessel_i1": _torch_special("i1"),
    "j0": _torch_special("bessel_j0"), "j1": _torch_special("bessel_j1"),
    "y0": _torch_special("bessel_y0"), "y1": _torch_special("bessel_y1"),
    "jn": _bessel("j"), "yn": _bessel("y"),
    # fast approximations: computed exactly
    "fast_expf": np.exp, "fast_exp10f": lambda x: np.power(x.dtype.type(10), x), "fast_logf": np.log,
    "fast_log2f": np.log2, "fast_log10f": np.log10, "fast_sinf": np.sin, "fast_cosf": np.cos,
    "fast_tanf": np.tan, "fast_tanhf": np.tanh, "fast_powf": np.power,
    "fast_dividef": lambda x, y: x / y,
    # bits and integers
    "popc": _popc, "clz": _clz, "ffs": _ffs, "brev": _brev, "mulhi": _mulhi, "mul24": _mul24,
    "byte_perm": _byte_perm, "hadd": _hadd(0), "rhadd": _hadd(1), "sad": _sad,
    "float_as_int": lambda x: _bits(x, np.int32), "int_as_float": lambda x: _bits(x, _F),
    "float_as_uint": lambda x: _bits(x, np.uint32), "uint_as_float": lambda x: _bits(x, _F),
    "double_as_longlong": lambda x: _bits(x, np.int64), "longlong_as_double": lambda x: _bits(x, _D),
    "double2hiint": lambda x: (_bits(x, np.int64) >> 32).astype(np.int32),
    "double2loint": lambda x: _bits(x, np.uint64).astype(np.uint32).view(np.int32),
    "hiloint2double": _hilo,
}  # fmt: skip

for _name in (
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "atan2", "cbrt", "rcbrt", "cos", "cosh",
    "sin", "sinh", "tan", "tanh", "exp", "exp2", "exp10", "expm1", "log", "log2", "log10",
    "log1p", "pow", "sqrt", "rsqrt", "rsqrt_rn", "hypot", "rhypot", "norm3d", "rnorm3d",
    "norm4d", "rnorm4d", "fast_expf", "fast_exp10f", "fast_logf", "fast_log2f", "fast_log10f",
    "fast_sinf", "fast_cosf", "fast_tanf", "fast_tanhf", "fast_powf", "fast_dividef",
):  # fmt: skip
    IMPLEMENTED[_name] = _wide(IMPLEMENTED[_name])

for _mode in ("rn", "rz", "rd", "ru"):
    IMPLEMENTED[f"add_{_mode}"] = _directed(np.add, _mode)
    IMPLEMENTED[f"sub_{_mode}"] = _directed(np.subtract, _mode)
    IMPLEMENTED[f"mul_{_mode}"] = _directed(np.multiply, _mode)
    IMPLEMENTED[f"div_{_mode}"] = _directed(np.divide, _mode)
    IMPLEMENTED[f"rcp_{_mode}"] = _directed(lambda x: 1 / x, _mode)
    IMPLEMENTED[f"sqrt_{_mode}"] = _directed(np.sqrt, _mode)
    IMPLEMENTED[f"fma_{_mode}"] = _directed(_fma, _mode)
    for _src in ("float", "double"):
        for _to, _np_to in (
            ("int", np.int32),
            ("uint", np.uint32),
            ("ll", np.int64),
            ("ull", np.uint64),
        ):
            IMPLEMENTED[f"{_src}2{_to}_{_mode}"] = _as_int(_mode, _np_to)
    for _src in ("int", "uint", "ll", "ull"):
        IMPLEMENTED[f"{_src}2float_{_mode}"] = _to_float(_F)
        IMPLEMENTED[f"{_src}2double_{_mode}"] = _to_float(_D)
    IMPLEMENTED[f"double2float_{_mode}"] = _narrowed(_mode)
IMPLEMENTED["fma"] = _directed(_fma, "rn")


def missing() -> list[str]:
    """Functions of this Triton's CUDA libdevice that have no implementation here."""
    try:
        import triton.language.extra.cuda.libdevice as cuda
    except ImportError:
        return []
    from triton.language.core import is_builtin

    return sorted(n for n, f in vars(cuda).items() if is_builtin(f) and n not in IMPLEMENTED)


def create_extern_elementwise(
    self: Any, lib_name: str, lib_path: str, symbol: str, args: list, ret_type: Any, is_pure: bool
) -> Any:
    """``InterpreterBuilder.create_extern_elementwise``: the libdevice function being
    called (set by its stand-in) on numpy arrays, cast to the symbol's result type."""
    from triton.runtime.interpreter import TensorHandle, _get_np_dtype

    name = getattr(_STATE, "name", None) or symbol.removeprefix("__nv_")
    scalar = getattr(ret_type, "scalar", ret_type)
    fn = IMPLEMENTED.get(name)
    if fn is None:
        raise NotImplementedError(
            f"libdevice.{name} ({symbol}) has no implementation in mutant-gate's interpreter "
            "shims: run this kernel with --mode compiled on a CUDA machine"
        )
    arrays = [np.asarray(a.data) for a in args]
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*arrays))
    dtype = _get_np_dtype(scalar)
    if out.dtype != dtype:
        out = out.astype(dtype)
    return TensorHandle(out, scalar)


def _stand_in(
    name: str, real: Callable[..., Any], note: Callable[[str], None]
) -> Callable[..., Any]:
    """What a kernel calls for libdevice ``name``: in the interpreter (no ``_semantic``)
    the CUDA function with the interpreter's semantic; when a compiler calls it (it
    passes ``_semantic``) the CUDA function itself, so a compile in the same process
    still works."""
    from triton.language.core import TRITON_BUILTIN
    from triton.runtime import interpreter

    def call(*args: Any, _semantic: Any = None, **kwargs: Any) -> Any:
        if _semantic is not None:
            return real(*args, _semantic=_semantic, **kwargs)
        note(f"libdevice.{name}: numpy implementation (interpreter)")
        _STATE.name = name
        try:
            return real(*args, _semantic=interpreter.interpreter_semantic, **kwargs)
        finally:
            _STATE.name = None

    call.__name__ = call.__qualname__ = name
    call.__module__ = _STUB_MODULE  # the code generator maps stubs by module and name
    call.__wrapped__ = real  # type: ignore[attr-defined]
    setattr(call, TRITON_BUILTIN, True)
    return call


def _absent(name: str) -> Callable[..., Any]:
    """A portable stub that this Triton's CUDA libdevice does not define (a GPU compile
    fails on it too): a clear error instead of the stub's ``None``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"libdevice.{name}: this Triton's CUDA libdevice has no such function "
            "(compiling for a GPU fails on it too)"
        )

    call.__name__ = call.__qualname__ = name
    call.__module__ = _STUB_MODULE
    return call


_SAVED: dict[tuple[Any, str], Any] = {}


def install(note: Callable[[str], None]) -> bool:
    """Give the interpreter libdevice (idempotent); False where this Triton has no
    interpreter semantic to run the CUDA functions with."""
    if _SAVED:
        return True
    try:
        import importlib

        from triton.language.core import is_builtin
        from triton.runtime import interpreter

        cuda = importlib.import_module(_CUDA_MODULE)
        stub = importlib.import_module(_STUB_MODULE)
    except ImportError:
        return False
    if not hasattr(interpreter, "interpreter_semantic"):
        return False
    builder = interpreter.InterpreterBuilder
    _SAVED[(builder, "create_extern_elementwise")] = builder.create_extern_elementwise
    builder.create_extern_elementwise = create_extern_elementwise
    _mark_absent(stub, cuda)
    _stand_in_for_builtins(cuda, stub, note, is_builtin)
    return True


def _mark_absent(stub: Any, cuda: Any) -> None:
    """Replace the portable stubs that CUDA's libdevice lacks by ``_absent`` ones (saved)."""
    for name in [n for n in vars(stub) if not n.startswith("_") and not hasattr(cuda, n)]:
        _SAVED[(stub, name)] = getattr(stub, name)
        setattr(stub, name, _absent(name))


def _stand_in_for_builtins(
    cuda: Any, stub: Any, note: Callable[[str], None], is_builtin: Callable[[Any], bool]
) -> None:
    """Put a ``_stand_in`` for each of CUDA libdevice's builtins in its module and in the
    portable stub module where it has the name (saved)."""
    for name, real in list(vars(cuda).items()):
        if not is_builtin(real):
            continue
        stand_in = _stand_in(name, real, note)
        for module in (cuda, stub):
            if module is stub and not hasattr(stub, name):
                continue
            _SAVED[(module, name)] = getattr(module, name)
            setattr(module, name, stand_in)


def uninstall() -> None:
    for (owner, name), value in _SAVED.items():
        setattr(owner, name, value)
    _SAVED.clear()
