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

The launch context (argument ranges, host buffers, source locations) is in
``bounds_launch.py``, the undefined lanes in ``bounds_poison.py``, the race hint in
``bounds_races.py``; their public functions are reached here, as ``bounds.<name>``.
"""

from __future__ import annotations

import bisect
import inspect
import os
from typing import Any

import numpy as np

from . import bounds_launch
from .bounds_launch import (
    _STACK,
    _Arg,
    _collect,
    _frames,
    _interp,
    _itemsize,
    _Launch,
    _u8,
    active_lanes,
)

# What the undefined lanes and the race hint offer runner.py (in ``__all__``) and the batched
# executor (``batched_checks.py``: the ``as`` names) is reached here, as ``bounds.<name>``.
from .bounds_poison import (
    _POISON,
    UNDEFINED_LANES_ERROR,
    _poison,
    _stores_poison,
    poison_stored,
    poisoning,
    set_poison,
    undefined_lanes,
    undefined_lanes_error,
)
from .bounds_poison import mark_poison_stored as mark_poison_stored
from .bounds_poison import poison_fill as poison_fill
from .bounds_poison import poison_hits as poison_hits
from .bounds_poison import poison_read as poison_read
from .bounds_poison import poison_stored_known as poison_stored_known
from .bounds_poison import record_undefined as record_undefined
from .bounds_poison import site_frames as site_frames
from .bounds_races import _RACES, _find_race, _record_store, races, set_races
from .bounds_races import add_program_stores as add_program_stores
from .bounds_races import races_on as races_on
from .bounds_races import store_site as store_site

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

_VIOLATIONS: list[dict] = []
_INTERNAL_ERRORS: list[str] = []
_ORIGINALS: dict[str, tuple[type, Any]] = {}  # "Class.method" -> (class, original)


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


def installed() -> bool:
    return bool(_ORIGINALS)


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
    active = active_lanes(addr, mask)
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
    best = _nearest_argument(launch, bad, isz) if launch.args else None
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


def _nearest_argument(launch: _Launch, bad: np.ndarray, isz: int) -> tuple:
    """(argument, "past end" or "before start", elements out, worst address) of the
    argument most of the ``bad`` addresses lie nearest to (ties: the closest one)."""
    u_isz = np.uint64(isz)
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
    return (launch.args[k], direction, -(-dist // isz), int(worst))


def report(record: dict) -> BoundsViolation:
    """Keep a violation found by ``describe`` and give the exception to raise."""
    if len(_VIOLATIONS) < _MAX_RECORDS:
        _VIOLATIONS.append(record)
    return BoundsViolation(record["message"], record)


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
# every program of a launch at once (``batched.py`` through ``batched_checks.py``)
#
# The batched executor runs a launch's programs together; it calls these with all programs'
# data, (programs, lanes) arrays, and records what it finds in the order Triton's loop would.
# The undefined lanes' and the race hint's functions of this kind are in ``bounds_poison.py``
# and ``bounds_races.py`` (imported above, so ``bounds.<name>`` reaches them too).


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


def _orig(key: str) -> Any:
    return _ORIGINALS[key][1]


def _delegates(fn: Any, target: str) -> bool:
    try:
        return target in inspect.getsource(fn)
    except (OSError, TypeError):
        return False


def install() -> None:
    """Patch the Triton interpreter (idempotent)."""
    if _ORIGINALS:
        return
    import triton

    mod = _interp()
    bounds_launch._TRITON_DIR = os.path.dirname(os.path.abspath(triton.__file__)) + os.sep
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
