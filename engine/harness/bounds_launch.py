"""The bounds checker's launch context (``bounds.py``): for every kernel launch the
interpreter runs, the byte ranges its tensor arguments can address (merged into sorted
intervals for the checks), the host buffers between guard zones those arguments live in while
it runs, and where in the kernel's source an access in progress is.

Runs inside the sandbox child; imports only the stdlib, numpy, torch, triton.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

#: the launches now running, innermost last (``bounds._grid_call`` opens and closes them)
_STACK: list[_Launch] = []
#: Triton's own directory (set by ``bounds.install``): no user jit frame lives under it
_TRITON_DIR = ""


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


def _interp() -> Any:
    import triton.runtime.interpreter as mod

    return mod


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


def active_lanes(addr: np.ndarray, mask: Any) -> np.ndarray:
    """The addresses of a load's or store's active lanes, flat: ``addr`` where ``mask``
    holds (broadcast against it), all of them without a mask."""
    if mask is None:
        return addr.reshape(-1)
    m = np.asarray(mask.data)
    if m.dtype != np.bool_:
        m = m.astype(np.bool_)
    if m.shape != addr.shape:
        addr, m = np.broadcast_arrays(addr, m)
    return addr[m]
