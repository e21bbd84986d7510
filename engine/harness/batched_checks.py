"""The harness's own checks on a batched launch (see ``batched.py``), over all programs at once.

In Triton's loop the bounds checker (``bounds.py``) and the diff-oracle's tracer (``trace.py``)
wrap the builder's load and store methods and see one program's access at a time. A batched
launch calls them here instead, once an access for every program of a chunk:

* bounds: every active lane of every program tested at once; the first program (in the loop's
  order) that goes out of bounds is the one named, with its lanes, its argument and how far
  out. Its programs from there on stop (as the loop never runs them), the rest of the chunk
  goes on, and the violation is raised when the chunk ends, as Triton's loop raises it.
* poisoned masked lanes: filled as the loop fills them (the tracer's fill where it wraps the
  checker from outside and poisons, else the checker's); the poisoned loads' sites and
  whether a store wrote the poison back, recorded at the chunk's end in the loop's order.
* race hints: every program's stores, handed over program after program.
* the oracle's lane digests: each program's loads and stores, in program order.

Records wait for the chunk's end so that they come in the order Triton's loop makes them
(program 0's accesses, then program 1's), whatever order the batched run met them in; if the
launch falls back to Triton's loop instead, ``put_back`` undoes what earlier chunks recorded.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from . import bounds

#: The launch tracer, where it is loaded (it is not imported here: it imports the runner,
#: which imports the executor; where it is not loaded, it hooks nothing).
TRACE = __package__ + ".trace"


class _Absent:
    _ORIGINALS: dict = {}

    @staticmethod
    def current() -> None:
        return None


def _trace() -> Any:
    return sys.modules.get(TRACE) or _Absent


def _chain(cls: Any, name: str) -> list[str] | None:
    """The harness wrappers around ``cls.name``, outermost first, down to Triton's own
    method; None where some other tool's function stands in the chain."""
    key = f"InterpreterBuilder.{name}"
    fn = getattr(cls, name)
    out: list[str] = []
    for _ in range(4):
        trace = _trace()
        if fn is getattr(trace, f"_{name[7:]}", None) and key in trace._ORIGINALS:
            out.append("trace")
            fn = trace._ORIGINALS[key][2]
        elif fn is getattr(bounds, f"_{name[7:]}") and key in bounds._ORIGINALS:
            out.append("bounds")
            fn = bounds._ORIGINALS[key][1]
        elif getattr(fn, "__module__", "") == "triton.runtime.interpreter":
            return out
        else:
            return None
    return None


def known_hooks() -> tuple[list[str], list[str]] | str:
    """(load chain, store chain) of the harness's wrappers, or the name of a method some
    other tool replaced (a launch then needs Triton's loop)."""
    from triton.runtime import interpreter as interp

    chains = []
    for name in ("create_masked_load", "create_masked_store"):
        chain = _chain(interp.InterpreterBuilder, name)
        if chain is None:
            return f"InterpreterBuilder.{name}"
        chains.append(chain)
    return chains[0], chains[1]


class Checks:
    """The checks on one batched launch (``for_launch`` None: none is on)."""

    def __init__(self, fn: Any, load_chain: list[str], store_chain: list[str]) -> None:
        trace = _trace()
        self.bounds = bounds.current(fn) if "bounds" in load_chain + store_chain else None
        self.trace = trace.current() if "trace" in load_chain + store_chain else None
        # who fills undefined lanes: the outer wrapper of the load goes first
        self.trace_first = bool(load_chain) and load_chain[0] == "trace"
        self.op = 0
        self.violation: dict | None = None
        self.commit()
        self._chunk_start(None)

    @staticmethod
    def for_launch(fn: Any, chains: tuple[list[str], list[str]]) -> Checks | None:
        load_chain, store_chain = chains
        checks = Checks(fn, load_chain, store_chain)
        if checks.bounds is None and checks.trace is None:
            return None
        if checks.bounds is not None:
            code = getattr(fn, "__code__", None)
            if code is not None:
                checks.bounds.codes.add(code)
        return checks

    def add_code(self, code: Any) -> None:
        """The kernel's code object as the batched executor runs it (its frames are the
        kernel's in the checker's messages)."""
        if self.bounds is not None and code is not None:
            self.bounds.codes.add(code)

    def commit(self) -> None:
        """What is recorded so far stands: ``put_back`` goes back to here (the launch's
        start, or the end of the last chunk that passed)."""
        trace = _trace()
        self._saved = (
            bounds.save(self.bounds) if self.bounds is not None else None,
            trace.save(self.trace) if self.trace is not None else None,
        )

    def put_back(self) -> None:
        """Before Triton's loop runs the launch (or its programs after the chunks that
        passed): undo what the batched attempt recorded since ``commit``."""
        trace = _trace()
        saved_bounds, saved_trace = self._saved
        if self.bounds is not None:
            bounds.put_back(self.bounds, saved_bounds)
        if self.trace is not None:
            trace.put_back(self.trace, saved_trace)

    # -- per chunk ----------------------------------------------------------

    def _chunk_start(self, b: Any) -> None:
        self.undefined: list[tuple] = []  # (first program, op, lanes, fill, dtype, frames)
        self.poison_events: list[tuple[int, int]] = []  # (first program, op) of poisoned reads
        self.store_hits: list[tuple[int, np.ndarray]] = []  # (op, per program: wrote poison)
        self.stores: list[tuple] = []  # (addr, active, itemsize, site) for the race hint
        self.digests: list[tuple] = []  # (kind, values, active, ran)
        self.prior_poison = bounds.poison_read() if self.bounds is not None else False

    def start_chunk(self, b: Any) -> None:
        self._chunk_start(b)

    def end_chunk(self, b: Any) -> None:
        """Record the chunk's findings in the loop's order; raise a violation found in it."""
        last = self.violation["index"] if self.violation is not None else b.n - 1
        if self.bounds is not None:
            self._flush_undefined()
            self._flush_poison_stored()
            self._flush_races(b, last)
        if self.trace is not None and self.digests:
            keep = np.arange(b.n) <= last
            rows = [(k, v, a, ran & keep) for k, v, a, ran in self.digests]
            _trace().digest_programs(self.trace, rows)
        self._chunk_start(b)
        if self.violation is not None:
            raise bounds.report(self.violation["record"])

    def _flush_undefined(self) -> None:
        for _, _, lanes, fill, dtype, frames in sorted(self.undefined, key=lambda u: u[:2]):
            bounds.record_undefined(lanes, fill, dtype, frames)

    def _flush_poison_stored(self) -> None:
        if not self.store_hits or bounds.poison_stored_known():
            return
        if self._poison_was_stored():
            bounds.mark_poison_stored()

    def _poison_was_stored(self) -> bool:
        """Whether this chunk stored a poisoned value: any hit where poison came before the
        chunk, else a hit in a program after the first poisoned load's, or in that program
        by a store after the load."""
        if self.prior_poison:
            return any(h.any() for _, h in self.store_hits)
        if not self.poison_events:
            return False
        first, op = min(self.poison_events)
        return any(
            hits[first + 1 :].any() or (k > op and bool(hits[first])) for k, hits in self.store_hits
        )

    def _flush_races(self, b: Any, last: int) -> None:
        if not self.stores:
            return
        pids = [tuple(int(v) for v in p) for p in np.stack(b.pids, axis=1)[: last + 1]]
        bounds.add_program_stores(self.bounds, self.stores, pids)

    # -- per access ---------------------------------------------------------

    def check(self, b: Any, op: str, ptrs: Any, addr: np.ndarray, own: np.ndarray) -> None:
        """The bounds check of one access over every running program: a program out of
        bounds (the first in the loop's order) is named, and it and the programs after it
        stop running."""
        self.op += 1
        if self.bounds is None:
            return
        running = b.running()
        active = own & running.reshape((b.n,) + (1,) * (own.ndim - 1))
        addr64 = addr if addr.dtype == np.uint64 else addr.astype(np.uint64)
        isz = bounds.itemsize(ptrs)
        bad = bounds.out_of_bounds(self.bounds, addr64, active, isz)
        if bad is None:
            return
        per = bad.reshape(b.n, -1).any(axis=1)
        first = int(np.argmax(per))
        pid = (int(b.pids[0][first]), int(b.pids[1][first]), int(b.pids[2][first]))
        lanes = active[first]
        record = bounds.describe(
            self.bounds, op, addr64[first][bad[first]], int(lanes.sum()), isz, pid
        )
        self.violation = {"index": first, "record": record}
        b.stop(np.arange(b.n) >= first)

    def load_other(
        self, b: Any, own: np.ndarray, explicit_mask: bool, dtype_tt: Any, dtype_np: Any
    ) -> Any:
        """The fill for a load's masked-off lanes when it has no ``other=`` (None: zeros),
        with the undefined lanes counted and recorded where the loop's wrappers would."""
        running = b.running()
        off = (~own & running.reshape((b.n,) + (1,) * (own.ndim - 1))).reshape(b.n, -1)
        per = off.sum(axis=1)
        total = int(per.sum())
        if not total:
            return None
        first = int(np.argmax(per > 0))
        order = ("trace", "bounds") if self.trace_first else ("bounds", "trace")
        for who in order:
            if who == "trace":
                fill = self._trace_fill(total, dtype_np)
            else:
                fill = self._bounds_fill(first, total, explicit_mask, dtype_tt)
            if fill is not None:
                return fill
        return None

    def _trace_fill(self, total: int, dtype_np: Any) -> Any:
        """The trace's poison for ``total`` undefined lanes (counted in the trace), or None
        where there is no trace or it does not poison them."""
        if self.trace is None:
            return None
        self.trace.undefined += total
        if not _trace().poisons():
            return None
        return _trace().poison_value(dtype_np)

    def _bounds_fill(self, first: int, total: int, explicit_mask: bool, dtype_tt: Any) -> Any:
        """The bounds check's poison for a masked load's ``total`` undefined lanes, the first
        in program ``first``, recorded for the chunk's end; None where it gives none."""
        if self.bounds is None or not explicit_mask:
            return None
        fill = bounds.poison_fill(dtype_tt)
        if fill is None:
            return None
        frames = bounds.site_frames(self.bounds)
        self.undefined.append((first, self.op, total, fill[1], str(dtype_tt), frames))
        self.poison_events.append((first, self.op))
        return fill[0]

    def loaded(self, b: Any, values: np.ndarray, own: np.ndarray) -> None:
        if self.trace is not None:
            self.digests.append(("load", values, own, b.running().copy()))

    def stored(self, b: Any, ptrs: Any, addr: np.ndarray, values: np.ndarray, own: np.ndarray):
        running = b.running()
        if self.trace is not None:
            self.digests.append(("store", values, own, running.copy()))
        if self.bounds is None:
            return
        active = own & running.reshape((b.n,) + (1,) * (own.ndim - 1))
        if bounds.races_on(self.bounds):
            site = bounds.store_site(self.bounds)
            self.stores.append((addr, active, bounds.itemsize(ptrs), site))
        if not bounds.poison_stored_known():
            hits = bounds.poison_hits(ptrs, values, active)
            if hits is not None and hits.any():
                self.store_hits.append((self.op, hits))
