"""The bounds checker's undefined lanes (``bounds.py``'s load wrapper poisons them).

A masked load without ``other=`` yields, on its masked-off lanes, NaN for float types, the
type's maximum for integers and True for bool, where the interpreter would give 0 and a GPU
gives whatever was in the register. Each such load is recorded (``undefined_lanes()``: kernel,
line, lanes), and whether a store then wrote the poison itself back to memory
(``poison_stored()``); ``undefined_lanes_error`` says it in one line for a failing check.
``bounds.py``'s builder wrappers call ``_poison`` and ``_stores_poison`` for one program's
access; the batched executor (``batched_checks.py``) calls the functions at the end for all
programs of a chunk at once. Runner and executor reach them as ``bounds.<name>``.

Runs inside the sandbox child; imports only the stdlib, numpy, torch, triton.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .bounds_launch import _STACK, _frames, _interp, _Launch

_MAX_UNDEFINED_SITES = 5  # poisoned loads recorded per job (kernel, line); lanes accumulate
#: The exception-like name that starts the line added to a failing job's error text.
UNDEFINED_LANES_ERROR = "UndefinedLanesError"


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
    where = _undefined_site(launch, inner, kernel_frame)
    _POISON.sites[key] = {**where, "lanes": lanes, "fill": fill, "dtype": dtype}


def _undefined_site(launch: _Launch | None, inner: Any, kernel_frame: Any) -> dict:
    """Where a site of undefined lanes is first seen: its kernel, function, file and lines."""
    return {
        "kernel": launch.kernel if launch is not None else "?",
        "function": inner.f_code.co_name if inner is not None else None,
        "file": os.path.basename(inner.f_code.co_filename) if inner is not None else None,
        "line": inner.f_lineno if inner is not None else None,
        "kernel_line": kernel_frame.f_lineno if kernel_frame is not None else None,
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
# every program of a launch at once (``batched_checks.py``)


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
