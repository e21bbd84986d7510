"""Memory for a batched launch: gathers and scatters over every program, and the proof that
running the programs together changed no result (see ``batched.py``).

Triton's loop runs program 0 to its end, then program 1, and so on. A batched launch runs one
operation for every program before the next, in program order inside the operation. The two
agree unless programs of one chunk talk through memory: one reads an element another writes
(before or after, in either order), or two programs write one element in different operations.
Every unmasked lane's address is recorded per chunk and checked at the chunk's end: first
each program's range of written addresses against the others' writes and reads (the usual
launch, a row a program, ends there), else against the elements written, a dense map per
written buffer; a conflict raises ``Divergence``. Every write first keeps the values it
overwrites (an undo log of its elements' old values, not a copy of the buffer), so ``restore``
puts the memory back as it was when the chunk began (``commit`` at each chunk's end: the
chunks before it stand, and Triton's loop runs on from the chunk's first program) or, where
the launch cannot resume so, as it was before the launch. Chunks run one after another, as
the programs do in Triton's loop, so only programs of one chunk are compared.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from triton.runtime import interpreter as interp

from . import batched_ops as ops

NONE = -1  # element not written in this chunk
MULTI = -2  # written by several programs in one operation, or by every program alike
_native = interp._interpreter
#: loads of fewer lanes go to Triton's gather: numpy's few passes cost more than they save
GATHER_MIN = 4096
_TOP = np.uint64(np.iinfo(np.uint64).max)


#: What ``check_chunk`` says when a chunk's programs talked through memory: a read of what
#: another wrote, and two writes of one element in different operations (``batched_iterations``
#: says it of a single program's loop iterations).
PROGRAMS = {
    "reads": "a program reads what another program of its chunk writes",
    "stores": "programs of one chunk store to the same element in different operations",
}


def _alike(n: int) -> int:
    """The program of a lane of a value the same in every program of a chunk of ``n``."""
    return 0 if n == 1 else MULTI


def _view(base: int, nbytes: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * nbytes).from_address(base))


class _Access:
    """The unmasked lanes of one load, store or atomic: addresses and the program of each."""

    def __init__(self, ptrs: np.ndarray, mask: np.ndarray, itemsize: int, pid: int | None) -> None:
        """``pid`` None: batched data, a program per leading index; else every lane's program
        (``MULTI`` for a value the same in every program of a chunk of several)."""
        self.ptrs, self.mask, self.itemsize, self.pid = ptrs, mask, itemsize, pid
        #: ``bounds()`` where a write has read them already
        self.spans: tuple[np.ndarray, np.ndarray] | None = None
        #: a write's buffer index where its kept lanes lie in one buffer (``NONE``: no
        #: lane kept), else None
        self.buffer: int | None = None

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per program (one row for an access the same in every program): the lowest address
        its kept lanes touch and one past the highest element's end; ``_TOP``/0 for none."""
        p, m = self.ptrs, np.broadcast_to(self.mask, self.ptrs.shape)
        rows = 1 if self.pid is not None or p.ndim == 0 else p.shape[0]
        p, m = p.reshape(rows, -1), m.reshape(rows, -1)
        lo = p.min(axis=1, where=m, initial=_TOP)
        end = p.max(axis=1, where=m, initial=np.uint64(0)) + np.uint64(self.itemsize)
        end[lo == _TOP] = 0
        return lo, end

    def lanes(self) -> tuple[np.ndarray, np.ndarray]:
        sel = self.ptrs[self.mask]
        if self.pid is not None:
            return sel, np.full(sel.shape, self.pid, dtype=np.int32)
        n = self.ptrs.shape[0]
        pid = np.arange(n, dtype=np.int32).reshape((n,) + (1,) * (self.ptrs.ndim - 1))
        return sel, np.broadcast_to(pid, self.ptrs.shape)[self.mask]


def _own(mask: Any, n: int, shape: tuple) -> np.ndarray:
    """An access's own mask (all lanes where it has none) with the program axis, as bools."""
    if mask is None:
        return np.ones(shape, dtype=bool)
    m = ops.lift(mask, n)
    if m.dtype != np.bool_:
        m = m.astype(np.bool_)
    return np.broadcast_to(m, shape)


def _groups(sids: np.ndarray) -> list[int]:
    """The buffer indices among ``sids``, in order."""
    if not sids.size:
        return []
    if sids.strides == (0,) * sids.ndim or sids.min() == sids.max():
        return [int(sids.flat[0])]
    return np.unique(sids).tolist()


def _apart(reads: list[_Access], writes: list[_Access]) -> bool:
    """The quick proof that a chunk's programs did not talk through memory: in every written
    buffer, each program's writes lie in one address range (its hull) that no other
    program's writes reach and no other program's reads touch. False where it cannot tell
    (hulls that overlap, a write the same in every program of several, one across
    buffers), for the exact maps to decide."""
    by_buffer: dict[int, list[_Access]] = {}
    for access in writes:
        if access.buffer == NONE:
            continue
        if access.pid == MULTI or access.buffer is None:
            return False
        by_buffer.setdefault(access.buffer, []).append(access)
    bounds = [access.bounds() for access in reads]
    return all(_hulls_apart(group, reads, bounds) for group in by_buffer.values())


def _hulls_apart(writes: list[_Access], reads: list[_Access], bounds: list[tuple]) -> bool:
    """``_apart`` for the writes into one buffer."""
    hull_lo, hull_end = writes[0].spans or writes[0].bounds()
    for access in writes[1:]:
        lo, end = access.spans or access.bounds()
        hull_lo, hull_end = np.minimum(hull_lo, lo), np.maximum(hull_end, end)
    used = np.flatnonzero(hull_lo != _TOP)
    order = used[np.argsort(hull_lo[used], kind="stable")]
    los, ends = hull_lo[order], hull_end[order]
    if (los[1:] < ends[:-1]).any():
        return False
    for access, (lo, end) in zip(reads, bounds, strict=True):
        first = np.searchsorted(ends, lo, side="right")  # the first hull ending past lo
        last = np.searchsorted(los, end, side="left") - 1  # the last one starting before end
        touched = (last >= first) & (lo != _TOP)
        if access.pid == MULTI:  # read by every program: any hull it touches is another's
            if touched.any():
                return False
            continue
        programs = np.arange(lo.size) if access.pid is None else np.array([access.pid])
        own = (last == first) & (order[np.minimum(first, order.size - 1)] == programs)
        if (touched & ~own).any():
            return False
    return True


def _mark_writes(written: list[tuple], maps: dict[int, tuple], talk: dict[str, str]) -> None:
    """Fill ``maps`` (``Memory._maps``) with the program that wrote each element (``MULTI``
    for several in one operation); raise Divergence (``talk["stores"]``) where programs write
    one element in different operations."""
    for s, elem, pid, _ in written:
        if not elem.size:
            continue
        lo, table = maps[s][1], maps[s][2]
        w = table[elem - lo]
        if ((w != NONE) & ((w != pid) | (w == MULTI))).any():
            raise ops.Divergence(talk["stores"])
        table[elem - lo] = pid
        shared = table[elem - lo] != pid
        if shared.any():
            table[elem[shared] - lo] = MULTI


def _element_index(
    p: np.ndarray, m: np.ndarray, base: int, item: int, every: bool, count: int | None
) -> np.ndarray | None:
    """Every lane's element index (int64) from ``base`` in elements of ``item`` bytes, 0 for a
    lane ``m`` drops; None where a kept lane lies between elements or, with ``count``, at
    or past the buffer's ``count`` elements (or below ``base``: it wraps above)."""
    index = np.subtract(p, np.uint64(base))
    if not every:
        np.multiply(index, m, out=index)  # dropped lanes: element 0
    if count is not None and int(index.max()) > (count - 1) * item:
        return None
    if int(np.bitwise_or.reduce(index, axis=None)) & (item - 1):
        return None  # a kept lane between elements
    np.right_shift(index, np.uint64(item.bit_length() - 1), out=index)
    return index.view(np.int64)


class Memory:
    """The launch's argument buffers: loads, stores and atomics for a chunk of programs."""

    def __init__(self, storages: list[tuple[int, int]], checks: Any = None) -> None:
        #: the harness's checks on this launch (``batched_checks.Checks``), or None
        self.checks = checks
        spans = sorted({(b, n) for b, n in storages if n > 0})
        self.bases = np.array([b for b, _ in spans], dtype=np.uint64)
        self.ends = np.array([b + n for b, n in spans], dtype=np.uint64)
        #: what the writes since the last ``commit`` overwrote, in order: (buffer's first
        #: address, its bytes, raw dtype, element indices or a slice of them, old values),
        #: or (addresses, mask, old values) for a write by Triton's scatter or atomics
        self.undo: list[tuple] = []
        self.reads: list[_Access] = []
        self.writes: list[tuple[_Access, np.ndarray, np.ndarray, np.ndarray]] = []

    # -- buffers ------------------------------------------------------------

    def _storage_of(self, sel: np.ndarray, itemsize: int) -> np.ndarray:
        """The buffer index of every address (raises Divergence for one outside them all)."""
        if sel.size == 0:
            return np.zeros(0, dtype=np.intp)
        lo, hi = sel.min(), sel.max()
        s = int(np.searchsorted(self.bases, lo, side="right")) - 1
        if s >= 0 and hi + np.uint64(itemsize) <= self.ends[s]:
            return np.broadcast_to(np.intp(s), sel.shape)  # one buffer: no array to fill
        sids = np.searchsorted(self.bases, sel, side="right") - 1
        ok = (sids >= 0) & (sel + np.uint64(itemsize) <= self.ends[np.maximum(sids, 0)])
        if not ok.all():
            raise ops.Divergence("an address outside the launch's arguments")
        return sids

    def _keep(self, p: np.ndarray, m: np.ndarray, dtype: Any) -> None:
        """Keep what a write by Triton's scatter or atomics is about to overwrite."""
        old = _native.load(p, m, np.zeros(p.shape, dtype=dtype), dtype)
        self.undo.append((p, m, old))

    def restore(self) -> None:
        """Put back every element written since the last ``commit`` (since the launch
        began, where none), the last write first."""
        for entry in reversed(self.undo):
            if len(entry) == 3:
                p, m, old = entry
                _native.store(p, old, m)
            else:
                base, nbytes, raw, index, old = entry
                _view(base, nbytes).view(raw)[index] = old
        self.undo.clear()

    def commit(self) -> None:
        """The writes so far stand: a later ``restore`` goes back to here."""
        self.undo.clear()

    # -- operations ---------------------------------------------------------

    def load(self, b: Any, ptrs: Any, mask: Any, other: Any, dtype_tt: Any, dtype_np: Any) -> Any:
        n, checks = b.n, self.checks
        lifted = ops.is_batched(ptrs) or ops.is_batched(mask) or ops.is_batched(other)
        if checks is None and not lifted:
            m = np.ones_like(ptrs.data, dtype=bool) if mask is None else mask.data
            o = np.zeros_like(ptrs.data, dtype=dtype_np) if other is None else other.data
            self.reads.append(_Access(ptrs.data, m, dtype_np.itemsize, _alike(n)))
            return interp.TensorHandle(_native.load(ptrs.data, m, o, dtype_np), dtype_tt)
        p = np.ascontiguousarray(ops.lift(ptrs, n))
        own = _own(mask, n, p.shape)
        if checks is not None:
            checks.check(b, "load", ptrs, p, own)
        m = self._mask(b, own, p.shape)
        o = self._other(b, p.shape, own, mask, other, dtype_tt, dtype_np)
        b.largest = max(b.largest, p.size // n)
        self.reads.append(_Access(p, m, dtype_np.itemsize, None))
        out = self._gather(p, m, o, dtype_np)
        if checks is not None:
            checks.loaded(b, out, own)
        return ops.batched(out, dtype_tt)

    def _other(
        self,
        b: Any,
        shape: tuple,
        own: np.ndarray,
        mask: Any,
        other: Any,
        dtype_tt: Any,
        dtype_np: Any,
    ) -> np.ndarray:
        """The values a load's dropped lanes take: ``other``, else the checks' fill for a
        load without one (``load_other``), else zeros."""
        if other is not None:
            return np.ascontiguousarray(np.broadcast_to(ops.lift(other, b.n), shape))
        fill = None
        if self.checks is not None:
            fill = self.checks.load_other(b, own, mask is not None, dtype_tt, dtype_np)
        if fill is not None:
            return np.full(shape, fill, dtype=dtype_np)
        return np.zeros(shape, dtype=dtype_np)

    def _gather(self, p: np.ndarray, m: np.ndarray, o: np.ndarray, dtype_np: Any) -> np.ndarray:
        """Triton's gather (``_native.load``: each lane the mask keeps reads its address,
        the others take ``o``), by numpy where ``numpy_gather`` can (2-3x faster on a
        million lanes)."""
        out = self.numpy_gather(p, m, o, dtype_np)
        return _native.load(p, m, o, dtype_np) if out is None else out

    def _locate(
        self, p: np.ndarray, m: np.ndarray, dtype: Any, kinds: str, buffer: int | None = None
    ) -> tuple | None:
        """(buffer's first address, its elements, every lane's element index, whether ``m``
        keeps every lane) where the access has ``GATHER_MIN`` lanes or more, a power-of-two
        ``dtype`` of one of ``kinds``, a bool mask, and every lane ``m`` keeps lies in one
        argument buffer at a whole element; None otherwise (Triton's to do). ``buffer``: the
        one buffer a write's kept lanes were found in (``_buffers``). A lane ``m`` drops gets
        index 0. The buffer is the first kept lane's; every kept lane's offset from its
        start, in uint64, must then lie below its end (a lane below it wraps above) and have
        no low bits set: a few passes without a mask, not numpy's slow masked reductions."""
        item = dtype.itemsize
        if p.size < GATHER_MIN or dtype.kind not in kinds or item & (item - 1):
            return None
        if m.dtype != np.bool_:
            return None
        every = bool(m.all())
        s = self._first_buffer(p, m, every) if buffer is None else buffer
        if s < 0:
            return None
        base = int(self.bases[s])
        count = (int(self.ends[s]) - base) // item
        if base % item:
            return None
        index = _element_index(p, m, base, item, every, count if buffer is None else None)
        return None if index is None else (base, count, index, every)

    def _first_buffer(self, p: np.ndarray, m: np.ndarray, every: bool) -> int:
        """The index of the buffer the first lane ``m`` keeps lies in; -1 where it lies
        below them all or ``m`` keeps no lane."""
        first = 0 if every else int(np.argmax(m))
        if not m.flat[first]:
            return -1  # no lane kept
        return int(np.searchsorted(self.bases, p.flat[first], side="right")) - 1

    def numpy_gather(
        self, p: np.ndarray, m: np.ndarray, o: np.ndarray, dtype_np: Any
    ) -> np.ndarray | None:
        """Triton's gather by numpy, where every kept lane lies in one argument buffer at
        a whole element of an int or float dtype; None for anything else (several
        buffers, an address between elements, a small load) and for Triton's to do."""
        located = self._locate(p, m, dtype_np, "fiu")
        if located is None:
            return None
        base, count, index, every = located
        out = _view(base, count * dtype_np.itemsize).view(dtype_np).take(index)
        if not every:
            np.copyto(out, o, where=~m)
        return out

    def numpy_scatter(
        self, p: np.ndarray, v: np.ndarray, m: np.ndarray, buffer: int | None = None
    ) -> bool:
        """Triton's scatter (``_native.store``: each lane the mask keeps writes its value
        at its address, in lane order) by numpy, where every kept lane lies in one
        argument buffer at a whole element and the lanes' elements rise strictly (no
        element written twice, so no order to keep); False for Triton's to do. ``buffer``:
        the one buffer the write's kept lanes were found in, where known."""
        if v.shape != p.shape or m.shape != p.shape:
            return False
        located = self._locate(p, m, v.dtype, "fiub", buffer)
        if located is None:
            return False
        base, count, index, every = located
        index, values = (index.reshape(-1), v.reshape(-1)) if every else (index[m], v[m])
        if index.size > 1 and not (index[1:] > index[:-1]).all():
            return False
        raw = np.uint8 if v.dtype.kind == "b" else v.dtype  # bools as their bytes
        memory = _view(base, count * v.dtype.itemsize).view(raw)
        if index.size and int(index[-1]) - int(index[0]) == index.size - 1:
            index = slice(int(index[0]), int(index[-1]) + 1)  # one run: a copy, not a gather
            old = memory[index].copy()
        else:
            old = memory[index]
        self.undo.append((base, count * v.dtype.itemsize, raw, index, old))
        memory[index] = values.view(raw)
        return True

    def _mask(self, b: Any, own: np.ndarray, shape: tuple) -> np.ndarray:
        """The load's or store's own mask and the programs still running."""
        lanes = b.lanes(len(shape))
        m = own if lanes is None else own & lanes
        return np.ascontiguousarray(np.broadcast_to(m, shape))

    def _prepare_write(self, b: Any, ptrs: Any, value: Any, mask: Any, op: str) -> tuple:
        n, checks = b.n, self.checks
        same = not (ops.is_batched(ptrs) or ops.is_batched(value) or ops.is_batched(mask))
        if same and b.active is None and op == "store" and checks is None:
            p = ptrs.data
            m = np.ones_like(p, dtype=bool) if mask is None else mask.data
            v = value.data
            pid = _alike(n)
        else:
            p, v, m = self._lifted_write(b, ptrs, value, mask, op)
            pid = None
        itemsize = interp._get_np_dtype(ptrs.get_element_ty()).itemsize
        access = _Access(p, m, itemsize, pid)
        self._buffers(access)  # its spans and buffer, for the proof and the scatter
        self.writes.append(access)
        return p, v, m

    def _lifted_write(self, b: Any, ptrs: Any, value: Any, mask: Any, op: str) -> tuple:
        """A write's addresses, values and mask with the program axis (the programs still
        running kept), after the checks' look at it."""
        n, checks = b.n, self.checks
        p = np.ascontiguousarray(ops.lift(ptrs, n))
        own = _own(mask, n, p.shape)
        if checks is not None:
            checks.check(b, op, ptrs, p, own)
        m = self._mask(b, own, p.shape)
        v = np.ascontiguousarray(np.broadcast_to(ops.lift(value, n), p.shape))
        b.largest = max(b.largest, p.size // n)
        if checks is not None and op == "store":
            checks.stored(b, ptrs, p, v, own)
        return p, v, m

    def _buffers(self, access: _Access) -> list[int]:
        """The buffers an access's kept lanes touch (raises Divergence for an address
        outside them all)."""
        lo, end = access.bounds()
        access.spans = (lo, end)
        first, last = lo.min(), end.max()
        if first == _TOP:
            access.buffer = NONE  # no lane kept: nothing written
            return []
        s = int(np.searchsorted(self.bases, first, side="right")) - 1
        if s >= 0 and last <= self.ends[s]:
            access.buffer = s
            return [s]
        sel, _ = access.lanes()
        return _groups(self._storage_of(sel, access.itemsize))

    def store(self, b: Any, ptrs: Any, value: Any, mask: Any) -> None:
        p, v, m = self._prepare_write(b, ptrs, value, mask, "store")
        if not self.numpy_scatter(p, v, m, self.writes[-1].buffer):
            self._keep(p, m, v.dtype)
            _native.store(p, v, m)

    def atomic(self, b: Any, op: Any, ptr: Any, val: Any, mask: Any, sem: Any) -> Any:
        p, v, m = self._prepare_write(b, ptr, val, mask, "atomic_rmw")
        self._keep(p, m, v.dtype)
        return ops.batched(_native.atomic_rmw(op, p, v, m, sem), val.dtype.scalar)

    # -- the proof ------------------------------------------------------------

    def check_chunk(self, talk: dict[str, str] = PROGRAMS) -> None:
        """Raise Divergence if this chunk's programs talked through memory (saying it in
        ``talk``'s words); then forget it.

        First the quick proof (``_apart``: programs' written ranges apart, none read by
        another program); where it cannot tell, one map a written buffer, of the elements
        between the first and the last this chunk wrote (not the whole buffer: a chunk of a
        262M-element logits buffer writes 4M), each holding the program that wrote it."""
        reads, writes = self.reads, self.writes
        self.reads, self.writes = [], []
        if not writes or _apart(reads, writes):
            return
        written = self._written(writes)
        maps = self._maps(written)
        _mark_writes(written, maps, talk)
        self._check_reads(reads, maps, talk["reads"])

    def _written(self, writes: list[_Access]) -> list[tuple]:
        """Every write's kept lanes, a tuple (buffer, element indices, programs, element
        size) a buffer it touches."""
        written = []
        for access in writes:
            sel, pids = access.lanes()
            sids = self._storage_of(sel, access.itemsize)
            written += [
                (s, elem, pid, access.itemsize)
                for s, elem, pid in self._split(access.itemsize, sel, pids, sids)
            ]
        return written

    def _check_reads(self, reads: list[_Access], maps: dict[int, tuple], talk: str) -> None:
        """Raise Divergence (``talk``) where a read touches an element another program of the
        chunk wrote (``maps``: ``_maps`` after ``_mark_writes``), or reads a written buffer with
        another element size."""
        spans = [(int(self.bases[s]), int(self.ends[s])) for s in maps]
        for access in reads:
            if access.ptrs.size == 0 or not self._touches(access.ptrs, spans):
                continue
            sel, pids = access.lanes()
            inside = np.zeros(sel.shape, dtype=bool)
            for s in maps:
                inside |= (sel >= self.bases[s]) & (sel < self.ends[s])
            sel, pids = sel[inside], pids[inside]
            sids = self._storage_of(sel, access.itemsize)
            for s, elem, pid in self._split(access.itemsize, sel, pids, sids):
                size, lo, table = maps[s]
                if size != access.itemsize:
                    raise ops.Divergence("a written buffer accessed with different element sizes")
                near = (elem >= lo) & (elem < lo + table.size)
                w = table[elem[near] - lo]
                if ((w != NONE) & ((w != pid[near]) | (w == MULTI))).any():
                    raise ops.Divergence(talk)

    @staticmethod
    def _maps(written: list[tuple]) -> dict[int, tuple[int, int, np.ndarray]]:
        """Buffer -> (element size, first element, the map from it to the last written)."""
        span: dict[int, list[int]] = {}
        for s, elem, _, itemsize in written:
            if not elem.size:
                continue
            lo, hi = int(elem.min()), int(elem.max())
            seen = span.setdefault(s, [itemsize, lo, hi])
            if seen[0] != itemsize:
                raise ops.Divergence("a written buffer accessed with different element sizes")
            seen[1], seen[2] = min(seen[1], lo), max(seen[2], hi)
        return {
            s: (size, lo, np.full(hi - lo + 1, NONE, dtype=np.int32))
            for s, (size, lo, hi) in span.items()
        }

    def _touches(self, ptrs: np.ndarray, spans: list[tuple[int, int]]) -> bool:
        lo, hi = int(ptrs.min()), int(ptrs.max())
        return any(lo < end and hi >= base for base, end in spans)

    def _split(self, itemsize: int, sel: np.ndarray, pids: np.ndarray, sids: np.ndarray) -> Any:
        groups = _groups(sids)
        for s in groups:
            pick = slice(None) if len(groups) == 1 else sids == s
            elem = ((sel[pick] - self.bases[s]) // np.uint64(itemsize)).astype(np.intp)
            yield s, elem, pids[pick]
