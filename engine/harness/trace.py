"""Launch tracing in Triton's interpreter: signatures, post-launch values, lane digests.

Runs inside the sandbox child; imports only the stdlib, numpy, torch, triton.

``install()`` wraps (idempotent; hook points verified with Triton 3.9):

* ``InterpretedFunction.run`` -- one call per kernel launch (it builds the
  ``GridExecutor``). For every launch the tracer knows the kernel, its parameter
  names, and each argument's type *as the real JIT would specialise it*: the
  launch's arguments go through Triton's own binder
  (``create_function_from_signature`` with a CUDA backend), so a tensor becomes
  ``*fp32`` plus its divisibility-by-16 attribute, an int ``i32``/``i64`` (or
  the constexpr ``1``), a float ``fp32``, a bool ``u1``, and a ``tl.constexpr``
  its value. The launch options (``num_warps``...) and, under ``@triton.autotune``,
  the config that ran are kept too. That is what the compile-check compiles with.
* ``Autotuner.run`` -- only to know which autotuner (and so which config) a launch
  came from.
* ``InterpreterBuilder.create_masked_load`` / ``create_masked_store`` -- in
  ``values`` mode only: per launch, digests of the values on *active* lanes and on
  *masked-off* lanes of every load and store, and a count of *undefined* lanes
  read (masked-off lanes of a load without ``other=``; the interpreter fills them
  with 0, a GPU leaves them undefined). With ``poison=True`` those undefined lanes
  are filled with NaN (floats) or the type's maximum (integers) instead.

Modes (``start``): ``signatures`` collects one record per distinct signature;
``values`` also hands every launch, with the post-launch value of every tensor
argument, to a sink (the diff-oracle streams them to its parent). Tracing never
fails the traced check: its own errors are kept in ``internal_errors()``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import TRACE_VERSION

__all__ = [
    "TRACE_VERSION",
    "capture",
    "encode_value",
    "install",
    "internal_errors",
    "launch_count",
    "start",
    "stop",
    "summary",
    "uninstall",
]

#: Distinct signatures kept per kernel (a parametrised check can make hundreds).
MAX_SIGNATURES_PER_KERNEL = 16
_MAX_ERRORS = 50

_ORIGINALS: dict[str, tuple[type, str, Any]] = {}


class _Launch:
    """What values mode learns about one launch while it runs."""

    __slots__ = ("index", "kernel", "undefined", "digests")

    def __init__(self, index: int, kernel: str) -> None:
        self.index = index
        self.kernel = kernel
        self.undefined = 0
        self.digests = {
            k: hashlib.blake2b(digest_size=16)
            for k in ("load_active", "load_masked", "store_active", "store_masked")
        }

    def lanes(self) -> dict:
        out: dict[str, Any] = {k: h.hexdigest() for k, h in self.digests.items()}
        out["undefined"] = self.undefined
        return out


class _State:
    def __init__(self) -> None:
        self.mode: str | None = None
        self.sink: Callable[[dict, list], None] | None = None
        self.poison = False
        self.launches = 0
        self.current: _Launch | None = None
        self.signatures: dict[str, dict] = {}
        self.per_kernel: dict[str, int] = {}
        self.dropped = 0
        self.errors: list[str] = []
        self.autotuners: list[Any] = []
        self.binders: dict[int, Any] = {}


_STATE = _State()


def start(
    mode: str, sink: Callable[[dict, list], None] | None = None, poison: bool = False
) -> None:
    """Begin tracing: ``mode`` is ``signatures`` or ``values`` (``sink`` required)."""
    if mode not in ("signatures", "values"):
        raise ValueError(f"unknown trace mode {mode!r}")
    if mode == "values" and sink is None:
        raise ValueError("values mode needs a sink")
    install()
    binders = _STATE.binders
    _STATE.__init__()
    _STATE.binders = binders
    _STATE.mode, _STATE.sink, _STATE.poison = mode, sink, poison


def stop() -> dict:
    """End tracing and return ``summary()``."""
    out = summary()
    _STATE.mode = None
    _STATE.sink = None
    return out


def launch_count() -> int:
    return _STATE.launches


def internal_errors() -> list[str]:
    return list(_STATE.errors)


def summary() -> dict:
    """JSON data: launches seen and the distinct signatures, first seen first."""
    return {
        "version": TRACE_VERSION,
        "launches": _STATE.launches,
        "signatures": list(_STATE.signatures.values()),
        "dropped_signatures": _STATE.dropped,
        "internal_errors": list(_STATE.errors),
    }


def capture(request: dict, workdir: str) -> dict:
    """Harness entry ``trace:capture``: run ``request["job"]``'s checks with every
    launch's signature traced; the checks' status and the ``summary()``."""
    from mutant_gate.engine.job import Job

    from .runner import run_checks, tail

    start("signatures")
    try:
        result = run_checks(Job.from_json(request["job"]), workdir)
    finally:
        traced = stop()
    return {"status": result.status.value, "error": tail(result.error, 2000), "trace": traced}


def _error(where: str, exc: BaseException) -> None:
    if len(_STATE.errors) < _MAX_ERRORS:
        _STATE.errors.append(f"{where}: {exc!r}"[:500])


# --------------------------------------------------------------------------
# signatures


def encode_value(value: Any) -> Any:
    """A constexpr value as JSON data (the compile-check decodes it again)."""
    import triton.language as tl

    if isinstance(value, tl.constexpr):
        value = value.value
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, tl.dtype):
        return {"dtype": str(value)}
    if isinstance(value, (tuple, list)):
        return {"tuple": [encode_value(v) for v in value]}
    return _encode_object(value)


def _encode_object(value: Any) -> dict:
    """A constexpr that is no plain value: a (jit) function by name, anything else by its
    ``repr``."""
    if hasattr(value, "fn") and hasattr(value, "__name__"):  # a (jit) function as constexpr
        return {"jit": value.__name__}
    if callable(value) and hasattr(value, "__name__"):
        return {"function": value.__name__}
    return {"repr": repr(value)[:200]}


def _json_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _backend() -> Any:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    return make_backend(GPUTarget("cuda", 80, 32))


def _binder(kernel: Any) -> Any:
    """Triton's own argument binder for ``kernel`` (an InterpretedFunction), cached."""
    key = id(kernel)
    binder = _STATE.binders.get(key)
    if binder is None:
        from triton.runtime.jit import KernelParam, create_function_from_signature

        sig = inspect.signature(kernel.fn)
        dns = kernel.kwargs.get("do_not_specialize") or ()
        dnsa = kernel.kwargs.get("do_not_specialize_on_alignment") or ()
        params = [
            KernelParam(i, p, i in dns or p.name in dns, i in dnsa or p.name in dnsa)
            for i, p in enumerate(sig.parameters.values())
        ]
        binder = create_function_from_signature(sig, params, _backend())
        _STATE.binders[key] = binder
    return binder


def _innermost(fn: Any) -> Any:
    seen = 0
    while hasattr(fn, "fn") and seen < 8 and not hasattr(fn, "rewriter"):
        fn, seen = fn.fn, seen + 1
    return fn


def _autotune_config(kernel: Any) -> dict | None:
    for tuner in reversed(_STATE.autotuners):
        if _innermost(tuner) is kernel:
            config = getattr(tuner, "best_config", None)
            if config is None:
                return None
            return {k: encode_value(v) for k, v in config.all_kwargs().items()}
    return None


def _record_signature(kernel: Any, params: dict, specialization: list, options: dict) -> None:
    name = kernel.__name__
    names = list(params)
    types, attrs, constexprs = _specialized(names, specialization)
    opts = {k: v for k, v in options.items() if _json_scalar(v)}
    record = {
        "kernel": name,
        "params": names,
        "types": types,
        "attrs": attrs,
        "constexprs": constexprs,
        "options": opts,
    }
    key = json.dumps(record, sort_keys=True, default=repr)
    seen = _STATE.signatures.get(key)
    if seen is not None:
        seen["launches"] += 1
        return
    if _STATE.per_kernel.get(name, 0) >= MAX_SIGNATURES_PER_KERNEL:
        _STATE.dropped += 1
        return
    _STATE.per_kernel[name] = _STATE.per_kernel.get(name, 0) + 1
    record["autotune"] = _autotune_config(kernel)
    record["launches"] = 1
    record["first_launch"] = _STATE.launches
    _STATE.signatures[key] = record


def _specialized(names: list[str], specialization: list) -> tuple[list, list, dict[str, Any]]:
    """(types, attributes, constexpr values as JSON data) of a launch's parameters, as
    the signature record keeps them."""
    types: list[Any] = []
    attrs: list[Any] = []
    constexprs: dict[str, Any] = {}
    for pname, (ty, attr) in zip(names, specialization, strict=True):
        if not isinstance(ty, str):
            ty = repr(ty)
        types.append(ty)
        attrs.append(attr if isinstance(attr, str) or attr is None else repr(attr))
        if ty == "constexpr":
            constexprs[pname] = encode_value(attr)
    return types, attrs, constexprs


# --------------------------------------------------------------------------
# values


def _tensors(name: str, value: Any, out: list) -> None:
    from triton.runtime import interpreter as mod

    if isinstance(value, tuple):
        for i, v in enumerate(value):
            _tensors(f"{name}[{i}]", v, out)
        return
    if isinstance(value, mod.TensorDescriptor):
        _tensors(f"{name}.base", value.base, out)
        return
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        out.append((name, mod._unwrap_tensor(value)))


def snapshot(t: Any) -> np.ndarray:
    """A host numpy array holding the values of tensor ``t`` (exact widening for
    dtypes numpy lacks: bfloat16 and fp8 become float32)."""
    import torch

    t = t.detach()
    if t.dtype in (torch.bfloat16,) or "float8" in str(t.dtype):
        t = t.to(torch.float32)
    elif t.is_complex():
        t = torch.view_as_real(t)
    return np.ascontiguousarray(t.cpu().numpy())


def _bind_names(kernel: Any, args: tuple, kwargs: dict) -> dict:
    sig = inspect.signature(kernel.fn)
    known = {k: v for k, v in kwargs.items() if k in sig.parameters}
    bound = sig.bind_partial(*args, **known)
    bound.apply_defaults()
    return dict(bound.arguments)


# --------------------------------------------------------------------------
# replacements


def _run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
    original = _ORIGINALS["InterpretedFunction.run"][2]
    state = _STATE
    if state.mode is None or warmup:
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
    params: dict | None = None
    try:
        params, specialization, options = _binder(self)(*args, **kwargs)
        _record_signature(self, params, specialization, options)
    except Exception as exc:  # noqa: BLE001 - a tracer bug must not fail the check
        _error(f"signature of {getattr(self, '__name__', '?')}", exc)
    index = state.launches
    state.launches += 1
    if state.mode != "values":
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    launch = _Launch(index, self.__name__)
    state.current = launch
    error = None
    try:
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
        raise
    finally:
        state.current = None
        _emit(self, launch, params, args, kwargs, error)


def _emit(
    kernel: Any, launch: _Launch, params: dict | None, args: tuple, kwargs: dict, error: Any
) -> None:
    sink = _STATE.sink
    if sink is None:
        return
    tensors: list = []
    try:
        bound = params if params is not None else _bind_names(kernel, args, kwargs)
        for name, value in bound.items():
            _tensors(name, value, tensors)
    except Exception as exc:  # noqa: BLE001
        _error(f"arguments of {launch.kernel}", exc)
    header = {
        "index": launch.index,
        "kernel": launch.kernel,
        "params": list(inspect.signature(kernel.fn).parameters),
        "error": error,
        "lanes": launch.lanes(),
    }
    sink(header, [(name, t) for name, t in tensors])


def _autotuner_run(self: Any, *args: Any, **kwargs: Any) -> Any:
    original = _ORIGINALS["Autotuner.run"][2]
    _STATE.autotuners.append(self)
    try:
        return original(self, *args, **kwargs)
    finally:
        _STATE.autotuners.pop()


def _poison_value(dtype: np.dtype) -> Any:
    if dtype.kind == "f":
        return np.nan
    if dtype.kind == "b":
        return True
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return None


def _active(mask: Any, shape: tuple) -> np.ndarray:
    m = np.asarray(mask.data)
    if m.dtype != np.bool_:
        m = m.astype(np.bool_)
    if m.shape != shape:
        m = np.broadcast_to(m, shape)
    return m


def _digest(launch: _Launch, kind: str, values: np.ndarray, active: np.ndarray) -> None:
    launch.digests[kind + "_active"].update(np.ascontiguousarray(values[active]).tobytes())
    launch.digests[kind + "_masked"].update(np.ascontiguousarray(values[~active]).tobytes())


def _masked_load(
    self: Any, ptrs: Any, mask: Any, other: Any, cache_policy: Any, is_volatile: Any
) -> Any:
    original = _ORIGINALS["InterpreterBuilder.create_masked_load"][2]
    launch = _STATE.current
    if launch is None:
        return original(self, ptrs, mask, other, cache_policy, is_volatile)
    try:
        shape = np.shape(ptrs.data)
        active = _active(mask, shape)
        off = int(active.size - np.count_nonzero(active))
        if other is None and off:
            launch.undefined += off
            if _STATE.poison:
                from triton.runtime import interpreter as mod

                dtype_tt = ptrs.get_element_ty()
                dtype_np = mod._get_np_dtype(dtype_tt)
                fill = _poison_value(dtype_np)
                if fill is not None:
                    other = mod.TensorHandle(np.full(shape, fill, dtype=dtype_np), dtype_tt)
    except Exception as exc:  # noqa: BLE001
        _error("load lanes", exc)
        return original(self, ptrs, mask, other, cache_policy, is_volatile)
    result = original(self, ptrs, mask, other, cache_policy, is_volatile)
    try:
        _digest(launch, "load", np.asarray(result.data), active)
    except Exception as exc:  # noqa: BLE001
        _error("load digest", exc)
    return result


def _masked_store(self: Any, ptrs: Any, value: Any, mask: Any, cache_policy: Any) -> Any:
    original = _ORIGINALS["InterpreterBuilder.create_masked_store"][2]
    launch = _STATE.current
    if launch is not None:
        try:
            values = np.asarray(value.data)
            shape = np.shape(ptrs.data)
            if values.shape != shape:
                values = np.broadcast_to(values, shape)
            _digest(launch, "store", values, _active(mask, shape))
        except Exception as exc:  # noqa: BLE001
            _error("store digest", exc)
    return original(self, ptrs, value, mask, cache_policy)


# --------------------------------------------------------------------------
# every program of a launch at once (``batched.py`` through ``batched_checks.py``)


def current() -> _Launch | None:
    """The traced launch now running (values mode), or None."""
    return _STATE.current


def poisons() -> bool:
    return _STATE.poison


def poison_value(dtype: np.dtype) -> Any:
    return _poison_value(dtype)


def save(launch: _Launch) -> tuple:
    """What a batched attempt may change, to put back before Triton's loop runs the launch."""
    return launch.undefined, {k: h.copy() for k, h in launch.digests.items()}, len(_STATE.errors)


def put_back(launch: _Launch, saved: tuple) -> None:
    launch.undefined, launch.digests, errors = saved
    del _STATE.errors[errors:]


def digest_programs(launch: _Launch, accesses: list[tuple[str, np.ndarray, np.ndarray]]) -> None:
    """Digest a batched chunk's loads and stores as Triton's loop does: program after program,
    each program's accesses in order. ``accesses``: (kind, values, active) in the order they
    ran, ``values`` and ``active`` (programs, lanes); a row all False in ``active`` and in
    its complement for a program that did not run the access is given as ``ran`` False:
    (kind, values, active, ran) with ``ran`` one bool a program."""
    for kind in ("load", "store"):
        mine = [a for a in accesses if a[0] == kind]
        if not mine:
            continue
        for part in ("active", "masked"):
            pieces, counts = [], []
            for _, values, active, ran in mine:
                n = values.shape[0]
                vals = values.reshape(n, -1)
                sel = (active if part == "active" else ~active).reshape(n, -1) & ran[:, None]
                pieces.append(np.ascontiguousarray(vals[sel]).view(np.uint8).reshape(-1))
                counts.append(sel.sum(axis=1) * vals.itemsize)
            launch.digests[f"{kind}_{part}"].update(_program_major(pieces, counts).tobytes())


def _program_major(pieces: list[np.ndarray], counts: list[np.ndarray]) -> np.ndarray:
    """Bytes of several accesses, each program-major inside, as one program's accesses after
    another: piece k holds ``counts[k][p]`` bytes of program p, programs in order."""
    if len(pieces) == 1:
        return pieces[0]
    data = np.concatenate(pieces)
    lens = np.stack(counts).astype(np.int64)  # (accesses, programs)
    base = np.concatenate([[0], np.cumsum([p.size for p in pieces])[:-1]]).astype(np.int64)
    starts = base[:, None] + np.cumsum(lens, axis=1) - lens  # each segment's start in data
    lens, starts = lens.T.reshape(-1), starts.T.reshape(-1)  # program-major
    total = int(lens.sum())
    if total == 0:
        return data[:0]
    index = np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(total)
    return data[index]


# --------------------------------------------------------------------------
# install / uninstall


def install() -> None:
    """Wrap the hook points (idempotent). Wraps whatever is there, so it composes
    with the bounds checker whichever is installed first."""
    if _ORIGINALS:
        return
    from triton.runtime import interpreter as mod
    from triton.runtime.autotuner import Autotuner

    patches: list[tuple[type, str, Any]] = [
        (mod.InterpretedFunction, "run", _run),
        (Autotuner, "run", _autotuner_run),
        (mod.InterpreterBuilder, "create_masked_load", _masked_load),
        (mod.InterpreterBuilder, "create_masked_store", _masked_store),
    ]
    missing = [f"{c.__name__}.{n}" for c, n, _ in patches if not hasattr(c, n)]
    if missing:
        import triton

        raise RuntimeError(f"tracer: this Triton ({triton.__version__}) lacks {missing}")
    for cls, name, repl in patches:
        _ORIGINALS[f"{cls.__name__}.{name}"] = (cls, name, getattr(cls, name))
        setattr(cls, name, repl)


def uninstall() -> None:
    """Undo ``install()`` (for tests)."""
    for cls, name, original in _ORIGINALS.values():
        setattr(cls, name, original)
    _ORIGINALS.clear()
    _STATE.__init__()
