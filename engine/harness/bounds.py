"""Bounds checker for Triton's interpreter (``TRITON_INTERPRET=1``).

Runs inside the sandbox child; imports only the stdlib, numpy, torch, triton.

``install()`` patches ``triton.runtime.interpreter`` (tested with Triton 3.9):

* ``GridExecutor.__call__`` opens a *launch context* for every kernel launch;
  ``GridExecutor._init_args_hst`` is replaced by a version that copies every
  tensor argument's storage into a fresh host buffer with an unmapped-in-
  practice guard zone on both sides (``torch.empty`` pages that are never
  touched) and records, for every tensor argument, the byte range its view can
  address; ``GridExecutor._restore_args_dev`` copies the buffers back (also
  when the launch fails, so partial writes stay visible as they do without
  the checker).  The guard zones keep separately allocated tensors far apart,
  so a read past the end of one argument cannot silently land inside the next
  allocation (CPU allocators place blocks back to back).
* ``InterpreterBuilder.create_masked_load`` / ``create_masked_store`` (which
  ``create_load`` / ``create_store``, atomic loads/stores and tensor-descriptor
  loads/stores go through) and ``create_atomic_rmw`` / ``create_atomic_cas``
  check, before the access happens, that every active lane's address range
  ``[addr, addr + itemsize)`` lies inside one tensor argument of the current
  launch; otherwise they record the violation (``violations()``) and raise
  ``BoundsViolation``.  The interpreter re-raises it wrapped in
  ``InterpreterError``; the record survives whatever the caller catches.

* The same ``create_masked_load`` wrapper also *poisons undefined lanes*
  (``set_poison``, on by default): a masked load without ``other=`` yields, on
  its masked-off lanes, NaN for float types, the type's maximum for integers and
  True for bool, where the interpreter would give 0 and a GPU gives whatever was
  in the register. Each such load is recorded (``undefined_lanes()``: kernel,
  line, lanes), and whether a store then wrote the poison itself back to memory
  (``poison_stored()``); ``undefined_lanes_error`` says it in one line for a
  failing check.  The diff-oracle's tracer (``trace.py``) wraps the same method
  from outside: it fills the lanes itself when it poisons, so this wrapper then
  sees ``other`` given and fills nothing.

* With ``set_races(True)`` (the original's baseline job), the same store wrapper also
  keeps, per launch, the addresses each program's active store lanes wrote; when the
  launch ends, an address that two programs of it stored to is a *race hint*
  (``races()``: kernel, line, argument, element, the two programs). The interpreter runs
  programs one after another, so the result is the last program's; on a GPU their order
  is undefined, and where the values agree no value check can see it.

Checks are vectorised: per launch the argument ranges are merged into sorted
interval arrays; per access the active addresses' min/max are tested against
one interval (fast path), and only on failure is every lane located with
``np.searchsorted``.
"""

from __future__ import annotations

import bisect
import inspect
import os
import sys
from typing import Any

import numpy as np

__all__ = [
    "BoundsViolation",
    "TESTED_TRITON",
    "UNDEFINED_LANES_ERROR",
    "install",
    "installed",
    "internal_errors",
    "poison_stored",
    "poisoning",
    "races",
    "reset",
    "set_poison",
    "set_races",
    "undefined_lanes",
    "undefined_lanes_error",
    "uninstall",
    "violations",
]

TESTED_TRITON = ("3.9",)  # hook points verified against these releases

_GUARD_MIN = 64 * 1024  # bytes of guard on each side of a host buffer ...
_GUARD_MAX = 16 * 1024 * 1024  # ... growing with the buffer up to this
_MAX_RECORDS = 1000
_MAX_UNDEFINED_SITES = 5  # poisoned loads recorded per job (kernel, line); lanes accumulate
#: The exception-like name that starts the line added to a failing job's error text.
UNDEFINED_LANES_ERROR = "UndefinedLanesError"

_VIOLATIONS: list[dict] = []
_INTERNAL_ERRORS: list[str] = []
_STACK: list[_Launch] = []
_ORIGINALS: dict[str, tuple[type, Any]] = {}  # "Class.method" -> (class, original)
_TRITON_DIR = ""


class _Poison:
    """Undefined-lane poisoning: the setting and what the current job read."""

    def __init__(self) -> None:
        self.on = True
        self.sites: dict[tuple, dict] = {}  # (code, line) -> record, first seen first
        self.lanes = 0  # poisoned lanes read in all
        self.stored = False  # a store wrote poison afterwards (see poison_stored)
        self.sentinels: set[int] = set()  # integer / fp8 fills read

    def clear(self) -> None:
        self.sites.clear()
        self.lanes = 0
        self.stored = False
        self.sentinels.clear()


_POISON = _Poison()

#: store lanes kept per launch for the race hint (beyond them the launch is checked in part)
MAX_RACE_LANES = 1 << 22
_MAX_RACES = 5  # race hints kept per job, one per (kernel, line)


class _Races:
    """The race hint: the setting and what the current job found."""

    def __init__(self) -> None:
        self.on = False
        self.found: list[dict] = []

    def clear(self) -> None:
        self.found.clear()


_RACES = _Races()


class BoundsViolation(Exception):
    """An active lane of a load/store/atomic addressed memory outside every
    tensor argument of the launch.  ``record`` is the dict also kept in
    ``violations()``."""

    def __init__(self, message: str, record: dict | None = None) -> None:
        super().__init__(message)
        self.record = record or {}


def violations() -> list[dict]:
    """Violations recorded since the last ``reset()`` (oldest first, copies)."""
    return [dict(v) for v in _VIOLATIONS]


def count() -> int:
    """How many violations are recorded (the mark ``attribute`` counts from)."""
    return len(_VIOLATIONS)


def attribute(since: int, case: str) -> str:
    """Name ``case`` (a test case's node id) in every violation recorded after the first
    ``since``; the first one's message ("" when none was recorded)."""
    for record in _VIOLATIONS[since:]:
        record.setdefault("case", case)
    return _VIOLATIONS[since]["message"] if len(_VIOLATIONS) > since else ""


def internal_errors() -> list[str]:
    """Exceptions raised by the checker itself (accesses then went unchecked)."""
    return list(_INTERNAL_ERRORS)


def reset() -> None:
    """Forget recorded violations, poisoned loads, race hints and internal errors (not
    the settings)."""
    _VIOLATIONS.clear()
    _INTERNAL_ERRORS.clear()
    _POISON.clear()
    _RACES.clear()


def set_races(on: bool) -> None:
    """Record which program stored to which address, for the race hint (``races``)."""
    _RACES.on = on


def races() -> list[dict]:
    """Race hints found since the last ``reset()``: one per kernel and store line, each
    the first address two programs of one launch stored to (copies)."""
    return [dict(r) for r in _RACES.found]


def set_poison(on: bool) -> None:
    """Whether masked loads without ``other=`` get poison on masked-off lanes."""
    _POISON.on = bool(on)


def poisoning() -> bool:
    return _POISON.on


def undefined_lanes() -> list[dict]:
    """Poisoned loads since the last ``reset()``: one record per load site (kernel,
    function, file, line, lanes, fill, dtype), first read first, at most a few."""
    return [dict(r) for r in _POISON.sites.values()]


def poison_stored() -> bool:
    """Whether, after poisoned lanes were read, a store wrote the poison itself on an
    active lane: a NaN carrying the poison's payload, or an integer fill value. When it
    did not, the poison may still have changed what was stored (a NaN through ``exp``,
    an integer through arithmetic, a comparison): unknown, so not claimed."""
    return _POISON.stored


def undefined_lanes_error(records: list[dict] | None = None) -> str:
    """One line naming the first poisoned load, for a failing check's error text."""
    records = undefined_lanes() if records is None else records
    if not records:
        return ""
    first = records[0]
    where = f"{first['kernel']} line {first['line']}"
    if first.get("function") and first["function"] != first["kernel"]:
        where = f"{first['function']} line {first['line']} (called from {first['kernel']})"
    more = len(records) - 1
    also = f"; {more} more such load{'s' if more != 1 else ''}" if more > 0 else ""
    return (
        f"{UNDEFINED_LANES_ERROR}: reads undefined lanes: tl.load without other= at {where} "
        f"({first['lanes']} masked-off lanes filled with {first['fill']}; on a GPU they are "
        f"undefined: add other=){also}"
    )


def installed() -> bool:
    return bool(_ORIGINALS)


# --------------------------------------------------------------------------
# launch context


class _Arg:
    __slots__ = ("name", "start", "end", "numel", "dtype")

    def __init__(self, name: str, start: int, end: int, numel: int, dtype: str) -> None:
        self.name, self.start, self.end, self.numel, self.dtype = name, start, end, numel, dtype


class _Launch:
    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.kernel = getattr(fn, "__name__", "?")
        self.code = getattr(fn, "__code__", None)
        #: the code objects the kernel runs as (the batched executor's rewrite beside Triton's)
        self.codes = {self.code} if self.code is not None else set()
        self.args: list[_Arg] = []
        self.starts_l: list[int] = []  # merged ranges, sorted (python ints: fast path)
        self.ends_l: list[int] = []
        self.starts = np.zeros(0, dtype=np.uint64)  # same, as arrays (slow path)
        self.ends = np.zeros(0, dtype=np.uint64)
        # device storage data_ptr -> (device storage, host uint8 buffer, guard)
        self.buffers: dict[int, tuple[Any, Any, int]] = {}
        self.restored = False
        # race hint: (unique active addresses, program id, itemsize, (file, line)) per store
        self.stores: list[tuple[np.ndarray, tuple[int, ...], int, tuple]] = []
        self.store_lanes = 0

    def set_args(self, args: list[_Arg]) -> None:
        self.args = args
        spans = sorted((a.start, a.end) for a in args)
        merged: list[list[int]] = []
        for s, e in spans:
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self.starts_l = [m[0] for m in merged]
        self.ends_l = [m[1] for m in merged]
        self.starts = np.array(self.starts_l, dtype=np.uint64)
        self.ends = np.array(self.ends_l, dtype=np.uint64)

    def restore(self) -> None:
        if self.restored:
            return
        self.restored = True
        import torch

        for dev_storage, buf, guard in self.buffers.values():
            n = dev_storage.nbytes()
            if n:
                _u8(dev_storage, torch).copy_(buf[guard : guard + n])


def _u8(storage: Any, torch: Any) -> Any:
    """A flat uint8 tensor over a whole untyped storage."""
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def _tensor_range(t: Any) -> tuple[int, int]:
    """[start, end) byte range addressable through the view ``t``."""
    el = t.element_size()
    base = t.data_ptr()
    if t.numel() == 0:
        return base, base
    lo = hi = 0
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride > 0:
            hi += stride * (size - 1)
        else:
            lo += stride * (size - 1)
    return base + lo * el, base + (hi + 1) * el


def _collect(name: str, value: Any, out: list[_Arg], mod: Any) -> None:
    if isinstance(value, tuple):
        for i, v in enumerate(value):
            _collect(f"{name}[{i}]", v, out, mod)
        return
    if isinstance(value, mod.TensorDescriptor):
        _collect(f"{name}.base", value.base, out, mod)
        return
    if not hasattr(value, "data_ptr"):
        return
    t = mod._unwrap_tensor(value)
    try:
        start, end = _tensor_range(t)
    except Exception:  # noqa: BLE001 - exotic tensor types: skip
        return
    dtype = str(getattr(value, "dtype", t.dtype)).replace("torch.", "")
    out.append(_Arg(name, start, end, int(t.numel()), dtype))


# --------------------------------------------------------------------------
# replacements for GridExecutor methods


def _grid_call(self: Any, *args_dev: Any, **kwargs: Any) -> Any:
    launch = _Launch(self.fn)
    _STACK.append(launch)
    try:
        return _orig("GridExecutor.__call__")(self, *args_dev, **kwargs)
    finally:
        if _STACK and _STACK[-1] is launch:
            _STACK.pop()
        launch.restore()
        if launch.stores:
            try:
                _find_race(launch)
            except Exception as exc:  # noqa: BLE001 - a hint, never the kernel's failure
                if len(_INTERNAL_ERRORS) < _MAX_RECORDS:
                    _INTERNAL_ERRORS.append(f"races: {exc!r}")
            launch.stores = []


def _init_args_hst(self: Any, args_dev: Any, kwargs: dict) -> tuple[list, dict]:
    """Like the interpreter's: host copies of the arguments, but each storage
    lives in its own buffer between guard zones; records argument ranges."""
    import torch

    mod = _interp()
    launch = _STACK[-1] if _STACK else _Launch(self.fn)
    buffers = launch.buffers

    def host_storage(storage: Any) -> tuple[Any, int]:
        key = storage.data_ptr()
        if key not in buffers:
            n = storage.nbytes()
            guard = min(max(_GUARD_MIN, n), _GUARD_MAX)
            guard = -(-guard // 4096) * 4096
            buf = torch.empty(n + 2 * guard, dtype=torch.uint8)
            if n:
                buf[guard : guard + n].copy_(_u8(storage, torch))
            buffers[key] = (storage, buf, guard)
        _, buf, guard = buffers[key]
        return buf, guard

    def to_cpu(arg: Any) -> Any:
        if isinstance(arg, tuple):
            return mod._tuple_create(arg, map(to_cpu, arg))
        if isinstance(arg, mod.TensorDescriptor):
            return mod.TensorDescriptor(
                to_cpu(arg.base),
                arg.shape,
                arg.strides,
                arg.block_shape,
                arg.padding,
                arg.round_f32_to_tf32,
            )
        if not hasattr(arg, "data_ptr"):
            return arg
        t = mod._unwrap_tensor(arg)
        buf, guard = host_storage(t.untyped_storage())
        el = t.element_size()
        cpu = t.new_empty(0, device="cpu")
        cpu.set_(buf.untyped_storage(), t.storage_offset() + guard // el, t.size(), t.stride())
        return mod._rewrap_tensor(cpu, original_tensor=arg)

    args_hst = [to_cpu(a) for a in args_dev]
    kwargs_hst = {k: to_cpu(v) for k, v in kwargs.items()}

    try:
        bound = inspect.getcallargs(self.fn, *args_hst, **kwargs_hst)
    except TypeError:  # the interpreter will report the bad call itself
        bound = dict(zip(self.arg_names, args_hst, strict=False))
        bound.update(kwargs_hst)
    found: list[_Arg] = []
    for name, value in bound.items():
        _collect(name, value, found, mod)
    launch.set_args(found)
    return args_hst, kwargs_hst


def _restore_args_dev(
    self: Any, args_dev: Any, args_hst: Any, kwargs: Any, kwargs_hst: Any
) -> None:
    if _STACK:
        _STACK[-1].restore()


# --------------------------------------------------------------------------
# access checks


_min, _max = np.minimum.reduce, np.maximum.reduce
_ITEMSIZE: dict[str, int] = {}


def _itemsize(ptrs: Any) -> int:
    """Bytes one lane accesses: the pointee size (int1 is stored as a byte)."""
    ty = ptrs.dtype
    key = getattr(ty, "name", None) or str(ty)
    size = _ITEMSIZE.get(key)
    if size is None:
        ty = getattr(ty, "scalar", ty)
        elt = getattr(ty, "element_ty", None)
        if elt is None or getattr(elt, "is_ptr", lambda: False)():
            size = 8
        else:
            size = max(1, int(getattr(elt, "primitive_bitwidth", 8)) // 8)
        _ITEMSIZE[key] = size
    return size


def _check(ptrs: Any, mask: Any, op: str) -> None:
    """Raise BoundsViolation if an active lane is out of bounds.  A bug in the
    checker itself must not fail the user's kernel: it is kept in
    ``internal_errors()`` and the access goes ahead unchecked."""
    if not _STACK:
        return
    try:
        _check_launch(_STACK[-1], ptrs, mask, op)
    except BoundsViolation:
        raise
    except Exception as exc:  # noqa: BLE001
        if len(_INTERNAL_ERRORS) < _MAX_RECORDS:
            _INTERNAL_ERRORS.append(f"{op}: {exc!r}")


def _check_launch(launch: _Launch, ptrs: Any, mask: Any, op: str) -> None:
    addr = np.asarray(ptrs.data)
    if addr.dtype != np.uint64:
        addr = addr.astype(np.uint64)
    if mask is not None:
        m = np.asarray(mask.data)
        if m.dtype != np.bool_:
            m = m.astype(np.bool_)
        if m.shape != addr.shape:
            addr, m = np.broadcast_arrays(addr, m)
        active = addr[m]
    else:
        active = addr.reshape(-1)
    if active.size == 0:
        return
    isz = _itemsize(ptrs)
    lo, hi = int(_min(active)), int(_max(active))
    i = bisect.bisect_right(launch.starts_l, lo) - 1
    if i >= 0 and hi + isz <= launch.ends_l[i]:
        return  # all active lanes inside one (merged) argument range
    starts, ends = launch.starts, launch.ends
    idx = np.searchsorted(starts, active, side="right") - 1
    ok = idx >= 0
    if ok.any():
        lim = ends[idx[ok]] - np.uint64(isz)
        ok[ok] = active[ok] <= lim
    bad = active[~ok]
    if bad.size == 0:  # straddles merged ranges only at exact boundaries
        return
    _report(launch, op, bad, int(active.size), isz)


def _report(launch: _Launch, op: str, bad: np.ndarray, n_active: int, isz: int) -> None:
    mod = _interp()
    pid = tuple(int(v) for v in getattr(mod.interpreter_builder, "grid_idx", (0, 0, 0)))
    record = describe(launch, op, bad, n_active, isz, pid)
    if len(_VIOLATIONS) < _MAX_RECORDS:
        _VIOLATIONS.append(record)
    raise BoundsViolation(record["message"], record)


def describe(
    launch: _Launch, op: str, bad: np.ndarray, n_active: int, isz: int, pid: tuple[int, ...]
) -> dict:
    """The record of one program's out-of-bounds access: ``bad`` its active lanes' addresses
    outside every argument, ``n_active`` its active lanes (the record ``violations()`` keeps)."""
    mod = _interp()
    u_isz = np.uint64(isz)
    best = None  # (arg, dist array) per arg
    if launch.args:
        dists = []
        for a in launch.args:
            s, e = np.uint64(a.start), np.uint64(a.end)
            before = np.where(bad < s, s - bad, np.uint64(0))
            e_lim = e - u_isz if a.end >= isz else np.uint64(0)
            after = np.where(bad > e_lim, bad - e_lim, np.uint64(0))
            dists.append((before, after))
        total = np.stack([b + a for b, a in dists])  # one of the two is 0
        nearest = np.argmin(total, axis=0)
        counts = np.bincount(nearest, minlength=len(launch.args))
        top = counts.max()
        cands = [k for k in range(len(launch.args)) if counts[k] == top]
        k = min(cands, key=lambda j: int(total[j].min()))
        sel = nearest == k
        before, after = dists[k][0][sel], dists[k][1][sel]
        mb, ma = int(before.max()), int(after.max())
        if ma >= mb:
            direction, dist = "past end", ma
        else:
            direction, dist = "before start", mb
        worst = bad[sel][int(np.argmax(after if ma >= mb else before))]
        best = (launch.args[k], direction, -(-dist // isz), int(worst))
    file, line, where = _locate(launch, mod)
    pid_s = "(" + ", ".join(str(v) for v in pid) + ")"
    lanes = int(bad.size)
    lanes_s = f"{lanes} of {n_active} active lanes out of bounds"
    kernel = launch.kernel
    if best is not None:
        arg, direction, elements, worst = best
        how = "past its end" if direction == "past end" else "before its start"
        plural = "element" if elements == 1 else "elements"
        msg = (
            f"out-of-bounds {op} in kernel {kernel} ({where}): argument {arg.name} "
            f"(numel {arg.numel}, {arg.dtype}) accessed {elements} {plural} {how} "
            f"(program_id {pid_s}, {lanes_s})"
        )
        argument, numel = arg.name, arg.numel
    else:
        direction, elements, worst = "outside", 0, int(bad[0])
        msg = (
            f"out-of-bounds {op} in kernel {kernel} ({where}): address {worst:#x} is not "
            f"inside any tensor argument (the launch has none) (program_id {pid_s}, {lanes_s})"
        )
        argument, numel = None, 0
    record = {
        "kernel": kernel,
        "file": file,
        "line": line,
        "argument": argument,
        "op": op,
        "elements_out": int(elements),
        "direction": direction,
        "lanes_out": lanes,
        "active_lanes": n_active,
        "program_id": list(pid),
        "numel": numel,
        "address": hex(worst),
        "message": msg,
    }
    return record


def report(record: dict) -> BoundsViolation:
    """Keep a violation found by ``describe`` and give the exception to raise."""
    if len(_VIOLATIONS) < _MAX_RECORDS:
        _VIOLATIONS.append(record)
    return BoundsViolation(record["message"], record)


def _frames(launch: _Launch, mod: Any) -> tuple[Any, Any]:
    """(innermost user jit frame, the kernel's frame) of the access in progress."""
    jit_codes = set()
    try:
        for f in mod.InterpretedFunction.rewritten_fn.values():
            c = getattr(f, "__code__", None)
            if c is not None:
                jit_codes.add(c)
    except Exception:  # noqa: BLE001
        pass
    jit_codes |= launch.codes
    inner = kernel_frame = None
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code in launch.codes:
            kernel_frame = frame
            if inner is None:
                inner = frame
            break
        if inner is None and code in jit_codes and not code.co_filename.startswith(_TRITON_DIR):
            inner = frame
        frame = frame.f_back
    return inner, kernel_frame


def _locate(launch: _Launch, mod: Any) -> tuple[str | None, int | None, str]:
    """(file basename, line, text) of the innermost user jit frame, noting the
    kernel's own line when the access sits in a helper @jit function."""
    inner, kernel_frame = _frames(launch, mod)
    if inner is None:
        return None, None, "unknown location"
    file = os.path.basename(inner.f_code.co_filename)
    where = f"{file}:{inner.f_lineno}"
    if kernel_frame is not None and kernel_frame is not inner:
        where += (
            f" in {inner.f_code.co_name}, called from "
            f"{os.path.basename(kernel_frame.f_code.co_filename)}:{kernel_frame.f_lineno}"
        )
    return file, inner.f_lineno, where


# --------------------------------------------------------------------------
# wrappers for InterpreterBuilder methods


# The trailing arguments (cache policy, volatility, ...) differ between Triton
# releases (3.6 passes one more than 3.9): take what comes, pass it on.
def _masked_load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any) -> Any:
    _check(ptrs, mask, "load")
    if other is None and mask is not None and _POISON.on:
        try:
            other = _poison(ptrs, mask)
        except Exception as exc:  # noqa: BLE001 - never fail the kernel: load as before
            if len(_INTERNAL_ERRORS) < _MAX_RECORDS:
                _INTERNAL_ERRORS.append(f"poison: {exc!r}")
            other = None
    return _orig("InterpreterBuilder.create_masked_load")(self, ptrs, mask, other, *rest)


def _masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
    _check(ptrs, mask, "store")
    if _RACES.on and _STACK:
        try:
            _record_store(_STACK[-1], ptrs, mask)
        except Exception as exc:  # noqa: BLE001
            if len(_INTERNAL_ERRORS) < _MAX_RECORDS:
                _INTERNAL_ERRORS.append(f"race store: {exc!r}")
    if _POISON.lanes and not _POISON.stored:
        try:
            _POISON.stored = _stores_poison(ptrs, value, mask)
        except Exception as exc:  # noqa: BLE001
            if len(_INTERNAL_ERRORS) < _MAX_RECORDS:
                _INTERNAL_ERRORS.append(f"poison store: {exc!r}")
    return _orig("InterpreterBuilder.create_masked_store")(self, ptrs, value, mask, *rest)


def _atomic_rmw(self: Any, rmwOp: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:  # noqa: N803
    _check(ptr, mask, "atomic_rmw")
    return _orig("InterpreterBuilder.create_atomic_rmw")(self, rmwOp, ptr, val, mask, *rest)


def _atomic_cas(self: Any, ptr: Any, cmp: Any, val: Any, *rest: Any) -> Any:
    _check(ptr, None, "atomic_cas")
    return _orig("InterpreterBuilder.create_atomic_cas")(self, ptr, cmp, val, *rest)


def _plain_load(self: Any, ptr: Any, cache_policy: Any, is_volatile: Any) -> Any:
    _check(ptr, None, "load")
    return _orig("InterpreterBuilder.create_load")(self, ptr, cache_policy, is_volatile)


def _plain_store(self: Any, ptr: Any, val: Any, cache_policy: Any) -> Any:
    _check(ptr, None, "store")
    return _orig("InterpreterBuilder.create_store")(self, ptr, val, cache_policy)


# --------------------------------------------------------------------------
# race hint


def _record_store(launch: _Launch, ptrs: Any, mask: Any) -> None:
    """Keep the addresses this store's active lanes write, with the program's id."""
    if launch.store_lanes > MAX_RACE_LANES:
        return
    addr = np.asarray(ptrs.data)
    if mask is not None:
        m = np.asarray(mask.data)
        if m.dtype != np.bool_:
            m = m.astype(np.bool_)
        if m.shape != addr.shape:
            addr, m = np.broadcast_arrays(addr, m)
        addr = addr[m]
    mod = _interp()
    pid = tuple(int(v) for v in getattr(mod.interpreter_builder, "grid_idx", (0, 0, 0)))
    _add_store(launch, addr, pid, _itemsize(ptrs), None)


def _store_site(launch: _Launch) -> tuple:
    inner, _ = _frames(launch, _interp())
    if inner is None:
        return (None, None)
    return (os.path.basename(inner.f_code.co_filename), inner.f_lineno)


def _add_store(
    launch: _Launch, addr: np.ndarray, pid: tuple[int, ...], isz: int, site: tuple | None
) -> None:
    """Keep one program's store: its active lanes' addresses (``site`` None: this frame's)."""
    if launch.store_lanes > MAX_RACE_LANES:
        return
    active = np.unique(addr.reshape(-1).astype(np.uint64, copy=False))
    if not active.size:
        return
    launch.store_lanes += int(active.size)
    launch.stores.append((active, pid, isz, _store_site(launch) if site is None else site))


def _find_race(launch: _Launch) -> None:
    """After a launch: the first address that two of its programs stored to, if any."""
    if len(_RACES.found) >= _MAX_RACES:
        return
    chunks = launch.stores
    addrs = np.concatenate([c[0] for c in chunks])
    ordered = np.sort(addrs)  # no address stored twice (the usual launch): no race, and
    if not (ordered[1:] == ordered[:-1]).any():  # a sort is a tenth of the search below
        return
    index = np.repeat(np.arange(len(chunks)), [c[0].size for c in chunks])
    keys: dict[tuple[int, ...], int] = {}
    pids = np.array([keys.setdefault(c[1], len(keys)) for c in chunks])[index]
    if len(keys) < 2:
        return
    order = np.lexsort((index, addrs))  # by address, then in store order
    a, p = addrs[order], pids[order]
    both = (a[1:] == a[:-1]) & (p[1:] != p[:-1])
    if not both.any():
        return
    shared = int(np.unique(a[1:][both]).size)
    j = int(np.argmax(both))
    first, second = chunks[index[order[j]]], chunks[index[order[j + 1]]]
    file, line = second[3]
    if any(r["kernel"] == launch.kernel and r["line"] == line for r in _RACES.found):
        return
    address = int(a[j])
    argument, element = None, None
    for arg in launch.args:
        if arg.start <= address < arg.end:
            argument, element = arg.name, (address - arg.start) // max(1, second[2])
            break
    where = f"element {element} of {argument}" if argument is not None else hex(address)
    at = f" ({file}:{line})" if line is not None else ""
    count = "1 address" if shared == 1 else f"{shared} addresses"
    message = (
        f"kernel {launch.kernel}: programs {first[1]} and {second[1]} both store to "
        f"{where}{at}; {count} stored by more than one program of one launch"
    )
    _RACES.found.append(
        {
            "kernel": launch.kernel,
            "file": file,
            "line": line,
            "argument": argument,
            "element": element,
            "programs": [list(first[1]), list(second[1])],
            "addresses": shared,
            "partial": launch.store_lanes > MAX_RACE_LANES,
            "message": message,
        }
    )


# --------------------------------------------------------------------------
# undefined lanes


#: The poison NaN of each float width: quiet, with the payload 0x2D in the top mantissa
#: bits that every width keeps (bf16 has 7), so it survives widening, narrowing and
#: arithmetic (which pass a NaN operand's payload on) -- but not ``exp``/``log``/``tanh``
#: (numpy returns its own NaN), after which a poisoned value no longer says it is one.
#: name -> (unsigned view, bits, shift and mask of exponent + top 7 mantissa bits)
_NAN_BITS = {
    "float16": (np.uint16, 0x7F6D, 3, 0xFFF),
    "float32": (np.uint32, 0x7FEDA5A5, 16, 0x7FFF),
    "float64": (np.uint64, 0x7FFDA000A5A5A5A5, 45, 0x3FFFF),
}
_BF16_NAN = 0x7FED  # bf16 is held as uint16 by the interpreter


def _fill(dtype_tt: Any, dtype_np: np.dtype) -> tuple[Any, str] | None:
    """(value in the interpreter's numpy dtype, how to say it) for a masked-off lane
    of a load of ``dtype_tt``; None for types left alone."""
    name = str(getattr(dtype_tt, "name", dtype_tt))
    if name == "int1" or dtype_np.kind == "b":
        return True, "True"
    if dtype_tt.is_floating():
        if dtype_np.name in _NAN_BITS:
            utype, bits, _, _ = _NAN_BITS[dtype_np.name]
            return np.array(bits, dtype=utype).view(dtype_np)[()], "NaN"
        if name == "bf16":
            return _BF16_NAN, "NaN"
        if name.startswith("fp8"):  # held as uint8; the fnuz kinds' NaN is 0x80
            return (0x80 if name.endswith(("b8", "b16")) else 0x7F), "NaN"
        return None
    if dtype_np.kind in "iu":
        return np.iinfo(dtype_np).max, f"{np.iinfo(dtype_np).max} (the {name} maximum)"
    return None


def _poison(ptrs: Any, mask: Any) -> Any:
    """The ``other`` to load with: poison on every lane (only masked-off ones are
    read), or None when every lane is active or the type is not poisoned."""
    shape = np.shape(ptrs.data)
    m = np.asarray(mask.data)
    if m.dtype != np.bool_:
        m = m.astype(np.bool_)
    if m.shape != shape:
        m = np.broadcast_to(m, shape)
    off = int(m.size - np.count_nonzero(m))
    if not off:
        return None
    mod = _interp()
    dtype_tt = ptrs.get_element_ty()
    dtype_np = mod._get_np_dtype(dtype_tt)
    fill = _fill(dtype_tt, dtype_np)
    if fill is None:
        return None
    if dtype_np.kind in "iu" and not str(dtype_tt).startswith("bf16"):
        _POISON.sentinels.add(int(fill[0]))  # ints and fp8: known by value once stored
    _record_undefined(off, fill[1], str(dtype_tt), mod)
    return mod.TensorHandle(np.full(shape, fill[0], dtype=dtype_np), dtype_tt)


def _record_undefined(
    lanes: int, fill: str, dtype: str, mod: Any, frames: tuple[Any, Any] | None = None
) -> None:
    _POISON.lanes += lanes
    launch = _STACK[-1] if _STACK else None
    inner = kernel_frame = None
    if frames is not None:
        inner, kernel_frame = frames
    elif launch is not None:
        inner, kernel_frame = _frames(launch, mod)
    if inner is None:
        key: tuple = (launch.kernel if launch else "?", None)
    else:  # by name: the batched executor runs a kernel as a code object of its own
        key = (inner.f_code.co_filename, inner.f_code.co_name, inner.f_lineno)
    record = _POISON.sites.get(key)
    if record is not None:
        record["lanes"] += lanes
        return
    if len(_POISON.sites) >= _MAX_UNDEFINED_SITES:
        return
    _POISON.sites[key] = {
        "kernel": launch.kernel if launch is not None else "?",
        "function": inner.f_code.co_name if inner is not None else None,
        "file": os.path.basename(inner.f_code.co_filename) if inner is not None else None,
        "line": inner.f_lineno if inner is not None else None,
        "kernel_line": kernel_frame.f_lineno if kernel_frame is not None else None,
        "lanes": lanes,
        "fill": fill,
        "dtype": dtype,
    }


def _poison_hit(values: np.ndarray, ptrs: Any) -> np.ndarray | None:
    """Per element of a store's ``values``: poison itself (None: a type never poisoned)."""
    if values.dtype.name in _NAN_BITS:
        utype, bits, shift, top = _NAN_BITS[values.dtype.name]
        return ((values.view(utype) >> shift) & top) == ((bits >> shift) & top)
    if str(getattr(ptrs.get_element_ty(), "name", "")) == "bf16":
        return (values & 0x7FFF) == _BF16_NAN
    if values.dtype.kind in "iu":
        limit = int(np.iinfo(values.dtype).max)
        fills = [v for v in _POISON.sentinels if v <= limit]
        if not fills:
            return None
        return np.isin(values, np.array(fills, dtype=values.dtype))
    return None


def _stores_poison(ptrs: Any, value: Any, mask: Any) -> bool:
    """Whether an active lane of this store writes poison: a NaN with the poison's
    payload, or (integers, fp8) a value filled in by a poisoned load."""
    values = np.asarray(value.data)
    hit = _poison_hit(values, ptrs)
    if hit is None or not np.any(hit):
        return False
    if mask is None:
        return True
    m = np.asarray(mask.data)
    if m.dtype != np.bool_:
        m = m.astype(np.bool_)
    hit, m = np.broadcast_arrays(hit, m)
    return bool((hit & m).any())


# --------------------------------------------------------------------------
# every program of a launch at once (``batched.py`` through ``batched_checks.py``)
#
# The batched executor runs a launch's programs together; it calls these with all programs'
# data, (programs, lanes) arrays, and records what it finds in the order Triton's loop would.


def current(fn: Any) -> _Launch | None:
    """The launch context of the launch of ``fn`` now running (None: not checked)."""
    return _STACK[-1] if _STACK and _STACK[-1].fn is fn else None


def out_of_bounds(launch: _Launch, addr: np.ndarray, active: np.ndarray, isz: int) -> Any:
    """Lanes (same shape as ``addr``) that are active and outside every argument; None when
    there is none. One min/max test for all programs first, as for one program."""
    if not active.any():
        return None
    # min and max over the active lanes in place (no gathered copy of 2M addresses)
    lo = int(np.min(addr, where=active, initial=np.iinfo(addr.dtype).max))
    hi = int(np.max(addr, where=active, initial=0))
    i = bisect.bisect_right(launch.starts_l, lo) - 1
    if i >= 0 and hi + isz <= launch.ends_l[i]:
        return None
    if launch.starts.size == 0:
        return active
    idx = np.searchsorted(launch.starts, addr, side="right") - 1
    lim = launch.ends[np.maximum(idx, 0)] - np.uint64(isz)
    bad = active & ~((idx >= 0) & (addr <= lim))
    return bad if bad.any() else None


def poison_fill(dtype_tt: Any) -> tuple[Any, str] | None:
    """A poisoned load's fill (value, how to say it), its integer kept as a sentinel; None
    for types left alone or with poisoning off."""
    if not _POISON.on:
        return None
    mod = _interp()
    dtype_np = mod._get_np_dtype(dtype_tt)
    fill = _fill(dtype_tt, dtype_np)
    if fill is not None and dtype_np.kind in "iu" and not str(dtype_tt).startswith("bf16"):
        _POISON.sentinels.add(int(fill[0]))
    return fill


class _Where:
    """A frame's code and line as they are now (a frame's line moves on as it runs)."""

    __slots__ = ("f_code", "f_lineno")

    def __init__(self, frame: Any) -> None:
        self.f_code, self.f_lineno = frame.f_code, frame.f_lineno


def site_frames(launch: _Launch) -> tuple[Any, Any]:
    """(innermost user jit frame, the kernel's frame) of the access in progress, as they
    stand now: code and line."""
    inner, kernel_frame = _frames(launch, _interp())
    return tuple(None if f is None else _Where(f) for f in (inner, kernel_frame))


def record_undefined(lanes: int, fill: str, dtype: str, frames: tuple[Any, Any]) -> None:
    """A poisoned load's lanes, at the site ``frames`` named when it ran."""
    _record_undefined(lanes, fill, dtype, _interp(), frames)


def poison_read() -> bool:
    """Whether poisoned lanes were read (so a store is checked for writing poison)."""
    return _POISON.lanes > 0


def poison_hits(ptrs: Any, values: np.ndarray, active: np.ndarray) -> np.ndarray | None:
    """Per program (rows): whether an active lane of this store writes poison itself."""
    hit = _poison_hit(values, ptrs)
    if hit is None:
        return None
    hit = np.broadcast_to(hit, active.shape) & active
    return hit.reshape(hit.shape[0], -1).any(axis=1)


def mark_poison_stored() -> None:
    _POISON.stored = True


def poison_stored_known() -> bool:
    return _POISON.stored


def races_on() -> bool:
    return _RACES.on


def store_site(launch: _Launch) -> tuple:
    """(file, line) of the store in progress, as the race hint names it."""
    return _store_site(launch)


def add_program_stores(launch: _Launch, stores: list[tuple], pids: list[tuple]) -> None:
    """The stores of programs 0..len(pids)-1 of a batched chunk for the race hint, in the
    loop's order (program by program, each program's stores in order), as ``_add_store`` one
    at a time would keep them. ``stores``: (addresses, active lanes, itemsize, site), each
    with the program axis first."""
    n = len(pids)
    kept = []
    for addr, active, isz, site in stores:
        a = np.asarray(addr)[:n].reshape(n, -1)
        m = np.broadcast_to(np.asarray(active)[:n], np.asarray(addr)[:n].shape).reshape(n, -1)
        prog, lane = np.nonzero(m)
        vals = a[prog, lane].astype(np.uint64, copy=False)
        order = np.lexsort((vals, prog))
        prog, vals = prog[order], vals[order]
        first = np.ones(vals.size, dtype=bool)
        first[1:] = (vals[1:] != vals[:-1]) | (prog[1:] != prog[:-1])
        prog, vals = prog[first], vals[first]
        kept.append((vals, np.searchsorted(prog, np.arange(n + 1)), isz, site))
    for i in range(n):
        for vals, edges, isz, site in kept:
            if launch.store_lanes > MAX_RACE_LANES:
                return
            lo, hi = int(edges[i]), int(edges[i + 1])
            if hi > lo:
                launch.store_lanes += hi - lo
                launch.stores.append((vals[lo:hi], pids[i], isz, site))


def itemsize(ptrs: Any) -> int:
    return _itemsize(ptrs)


def save(launch: _Launch) -> tuple:
    """What a batched attempt may change, to put back before Triton's loop runs the launch."""
    import copy

    return (
        copy.deepcopy(_POISON.sites),
        _POISON.lanes,
        _POISON.stored,
        set(_POISON.sentinels),
        list(launch.stores),
        launch.store_lanes,
        len(_INTERNAL_ERRORS),
    )


def put_back(launch: _Launch, saved: tuple) -> None:
    sites, lanes, stored, sentinels, stores, store_lanes, errors = saved
    _POISON.sites, _POISON.lanes, _POISON.stored, _POISON.sentinels = (
        sites,
        lanes,
        stored,
        sentinels,
    )
    launch.stores, launch.store_lanes = stores, store_lanes
    del _INTERNAL_ERRORS[errors:]


def swap_launch(inner: Any) -> Any:
    """Make ``inner`` the ``GridExecutor.__call__`` this checker's launch context wraps;
    the one it wrapped before (the batched executor sits beneath the context)."""
    cls, before = _ORIGINALS["GridExecutor.__call__"]
    _ORIGINALS["GridExecutor.__call__"] = (cls, inner)
    return before


# --------------------------------------------------------------------------
# install / uninstall


def _interp() -> Any:
    import triton.runtime.interpreter as mod

    return mod


def _orig(key: str) -> Any:
    return _ORIGINALS[key][1]


def _delegates(fn: Any, target: str) -> bool:
    try:
        return target in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def install() -> None:
    """Patch the Triton interpreter (idempotent)."""
    global _TRITON_DIR
    if _ORIGINALS:
        return
    import triton

    mod = _interp()
    _TRITON_DIR = os.path.dirname(os.path.abspath(triton.__file__)) + os.sep
    builder, grid = mod.InterpreterBuilder, mod.GridExecutor
    patches: list[tuple[type, str, Any]] = [
        (grid, "__call__", _grid_call),
        (grid, "_init_args_hst", _init_args_hst),
        (grid, "_restore_args_dev", _restore_args_dev),
        (builder, "create_masked_load", _masked_load),
        (builder, "create_masked_store", _masked_store),
        (builder, "create_atomic_rmw", _atomic_rmw),
        (builder, "create_atomic_cas", _atomic_cas),
    ]
    # create_load/create_store delegate to the masked forms in Triton 3.9;
    # should a release stop doing so, check them directly.
    if not _delegates(builder.create_load, "create_masked_load"):
        patches.append((builder, "create_load", _plain_load))
    if not _delegates(builder.create_store, "create_masked_store"):
        patches.append((builder, "create_store", _plain_store))
    missing = [f"{c.__name__}.{n}" for c, n, _ in patches if not hasattr(c, n)]
    if missing:
        raise RuntimeError(
            f"bounds checker: this Triton ({triton.__version__}) lacks hook points {missing}; "
            f"tested with {TESTED_TRITON}"
        )
    for cls, name, repl in patches:
        _ORIGINALS[f"{cls.__name__}.{name}"] = (cls, cls.__dict__.get(name, getattr(cls, name)))
        setattr(cls, name, repl)


def uninstall() -> None:
    """Undo ``install()`` (for tests)."""
    for key, (cls, orig) in list(_ORIGINALS.items()):
        setattr(cls, key.split(".", 1)[1], orig)
    _ORIGINALS.clear()
    _STACK.clear()
