"""The race hint of the bounds checker (``bounds.py``), on with ``set_races(True)`` (the
original's baseline job).

The checker's store wrapper keeps, per launch, the addresses each program's active store lanes
wrote; when the launch ends, an address that two programs of it stored to is a *race hint*
(``races()``: kernel, line, argument, element, the two programs). The interpreter runs programs
one after another, so the result is the last program's; on a GPU their order is undefined, and
where the values agree no value check can see it. The batched executor
(``batched_checks.py``) hands every program's stores over at once (``add_program_stores``).
Runner and executor reach them as ``bounds.<name>``.

Runs inside the sandbox child; imports only the stdlib, numpy, torch, triton.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .bounds_launch import _frames, _interp, _itemsize, _Launch, active_lanes

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


def set_races(on: bool) -> None:
    """Record which program stored to which address, for the race hint (``races``)."""
    _RACES.on = on


def races() -> list[dict]:
    """Race hints found since the last ``reset()``: one per kernel and store line, each
    the first address two programs of one launch stored to (copies)."""
    return [dict(r) for r in _RACES.found]


def _record_store(launch: _Launch, ptrs: Any, mask: Any) -> None:
    """Keep the addresses this store's active lanes write, with the program's id."""
    if launch.store_lanes > MAX_RACE_LANES:
        return
    addr = active_lanes(np.asarray(ptrs.data), mask)
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


def _disjoint(chunks: list[tuple]) -> bool:
    """Whether the stores' address ranges (each store's addresses sorted) overlap nowhere:
    then no address was stored twice, the usual launch, read without sorting every
    address (a tenth of a second on a 2M-element output)."""
    if len(chunks) < 2:
        return True
    los = np.fromiter((int(c[0][0]) for c in chunks), dtype=np.uint64, count=len(chunks))
    his = np.fromiter((int(c[0][-1]) for c in chunks), dtype=np.uint64, count=len(chunks))
    order = np.argsort(los, kind="stable")
    return bool((los[order][1:] > his[order][:-1]).all())


def _find_race(launch: _Launch) -> None:
    """After a launch: the first address that two of its programs stored to, if any."""
    if len(_RACES.found) >= _MAX_RACES or _disjoint(launch.stores):
        return
    shared_store = _first_shared_store(launch.stores)
    if shared_store is None:
        return
    first, second, address, shared = shared_store
    file, line = second[3]
    if any(r["kernel"] == launch.kernel and r["line"] == line for r in _RACES.found):
        return
    argument, element = _argument_element(launch, address, second[2])
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


def _first_shared_store(chunks: list[tuple]) -> tuple[tuple, tuple, int, int] | None:
    """The first address two programs stored to, as (first store, second store, address,
    how many addresses were stored by more than one program); None where there is none."""
    addrs = np.concatenate([c[0] for c in chunks])
    ordered = np.sort(addrs)  # no address stored twice (the usual launch): no race, and
    if not (ordered[1:] == ordered[:-1]).any():  # a sort is a tenth of the search below
        return None
    index = np.repeat(np.arange(len(chunks)), [c[0].size for c in chunks])
    keys: dict[tuple[int, ...], int] = {}
    pids = np.array([keys.setdefault(c[1], len(keys)) for c in chunks])[index]
    if len(keys) < 2:
        return None
    order = np.lexsort((index, addrs))  # by address, then in store order
    a, p = addrs[order], pids[order]
    both = (a[1:] == a[:-1]) & (p[1:] != p[:-1])
    if not both.any():
        return None
    shared = int(np.unique(a[1:][both]).size)
    j = int(np.argmax(both))
    return chunks[index[order[j]]], chunks[index[order[j + 1]]], int(a[j]), shared


def _argument_element(launch: _Launch, address: int, itemsize: int) -> tuple[Any, Any]:
    """(argument name, element index) of the launch's argument holding ``address``, else
    (None, None)."""
    for arg in launch.args:
        if arg.start <= address < arg.end:
            return arg.name, (address - arg.start) // max(1, itemsize)
    return None, None


# --------------------------------------------------------------------------
# every program of a launch at once (``batched_checks.py``)


def races_on(launch: _Launch | None = None) -> bool:
    """Whether the race hint keeps stores (of ``launch``: until it holds its most)."""
    return _RACES.on and (launch is None or launch.store_lanes <= MAX_RACE_LANES)


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
        # np.nonzero gives the programs in order; a row a program usually rises already
        if not ((vals[1:] > vals[:-1]) | (prog[1:] != prog[:-1])).all():
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
