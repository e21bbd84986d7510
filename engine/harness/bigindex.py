"""Big-index check: does a kernel's offset arithmetic wrap past 2^31 elements?

Runs inside the sandbox child, in Triton's interpreter; imports only the stdlib,
numpy, torch and triton.

An int32 offset (a program id or row index times a stride, without
``.to(tl.int64)``) wraps once it passes 2^31 elements, so a kernel that forgets the
cast gives the same outputs as one that has it on every input small enough to
allocate. This check tells them apart without allocating: after each of the first
launches of every kernel in the checks (which run as usual), it *replays* the launch
as if it were ``factor`` times larger along one grid axis (each axis of more than one
program in turn), running only the last few programs of that axis (and the last two
of each other axis):

* tensor arguments keep their memory but are given a virtual extent ``factor``
  times their own, so that the last programs' offsets lie between 2^31 and 2^32
  elements, where an int32 offset wraps to a negative one;
* integer arguments that grow with the problem are multiplied by ``factor``. Which
  ones do is not read off their values (a row stride can equal a weight's length):
  the candidates are the integer arguments equal to a tensor's first dimension or
  element count, and the original's replay tries them all scaled, then with one
  left out, then two, ... (at most ``MAX_TRIES``), keeping the first set under which
  the original stays inside its tensors (``scaled``). A mutant's replay scales the
  set its original kept (``plans``), so both are replayed alike;
* program ids and ``tl.num_programs`` say the big grid while only the last programs
  run;
* loads read nothing (zeros, or ``other=`` on masked-off lanes) and stores write
  nothing: the replay only looks at addresses. An active lane outside every
  argument's virtual extent is recorded, and ends the replay. A kernel that loads
  integers may compute offsets from them (a gather, an expert index): those read as
  zeros here, and the record says so (``int_loads``).

A wrapped offset lands gigabytes before the tensor, outside every extent. The
check counts for a kernel (and axis) only when the original's replay stays inside:
then a mutant whose replay leaves it differs from the original only past 2^31
elements. The interpreter's int32 arithmetic wraps as a GPU's does (numpy int32),
and a Python integer argument is typed int32 or int64 by its value, as on a GPU.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
from typing import Any

import numpy as np

#: Where the last programs' offsets should lie: between 2^31 and 2^32 elements.
TARGET_ELEMENTS = 3 * 2**30
#: Programs run per replay (the last ones of the big grid's first axis).
MAX_PROGRAMS = 8
#: Programs run along each axis that is not scaled (its last ones).
OTHER_PROGRAMS = 2
#: Replays per job: one per kernel and grid axis, the first launches only.
MAX_REPLAYS = 12
#: Sets of integer arguments the original's replay tries, per kernel and axis.
MAX_TRIES = 8
#: Seconds one replay may run: a program that loops over a scaled count (one program
#: walking every element) would run for hours; such a set of scaled arguments is dropped.
REPLAY_S = 5.0


class _TooLong(Exception):
    """A replay ran past ``REPLAY_S``."""


class Wrapped(Exception):
    """An active lane of a replay addressed memory outside every argument."""


class _State:
    def __init__(self) -> None:
        self.on = False
        self.replaying = False
        self.replays: list[dict] = []
        self.seen: set[str] = set()
        self.errors: list[str] = []
        self.plans: dict[str, dict[str, list[str]]] | None = None  # a mutant's: the original's
        self.int_loads = False
        # during a replay
        self.ranges: list[tuple[int, int, str, int]] = []  # (start, end, name, itemsize)
        self.grid: tuple[int, int, int] = (1, 1, 1)
        self.shift = 0
        self.fn: Any = None
        self.violation: dict | None = None


_STATE = _State()


def _interp() -> Any:
    import triton.runtime.interpreter as mod

    return mod


def run(request: dict, workdir: str) -> dict:
    """Harness entry ``bigindex:run``: run ``request["job"]``'s checks, replaying each
    kernel's first launch past 2^31 elements; the checks' status and the replays."""
    from mutant_gate.engine.job import Job

    from .runner import run_checks, tail

    _STATE.__init__()
    _STATE.on = True
    _STATE.plans = request.get("plans")
    original = _install()
    try:
        result = run_checks(Job.from_json(request["job"]), workdir)
    finally:
        _STATE.on = False
        _uninstall(original)
    return {
        "status": result.status.value,
        "error": tail(result.error, 2000),
        "replays": list(_STATE.replays),
        "errors": list(_STATE.errors),
    }


def _install() -> Any:
    mod = _interp()
    current = mod.GridExecutor.__call__

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = current(self, *args, **kwargs)
        if _STATE.on and not _STATE.replaying:
            name = getattr(self.fn, "__name__", "?")
            if name not in _STATE.seen and len(_STATE.replays) < MAX_REPLAYS:
                _STATE.seen.add(name)
                try:
                    _STATE.replays += _replays(self, args, kwargs)
                except Exception as exc:  # noqa: BLE001 - the check must not fail the job
                    _STATE.errors.append(f"{name}: {exc!r}"[:500])
        return out

    mod.GridExecutor.__call__ = call
    return current


def _uninstall(original: Any) -> None:
    _interp().GridExecutor.__call__ = original


# --------------------------------------------------------------------------
# one replay


def _tensors(values: list[Any]) -> list[Any]:
    return [v for v in values if hasattr(v, "data_ptr") and hasattr(v, "numel")]


def _replays(executor: Any, args: tuple, kwargs: dict) -> list[dict]:
    """Replay one launch past 2^31 elements along each grid axis of more than one
    program (axis 0 where there is none); what happened, as data, one record each."""
    name = getattr(executor.fn, "__name__", "?")
    tensors = _tensors([*args, *kwargs.values()])
    largest = max((int(t.numel()) for t in tensors), default=0)
    if largest == 0:
        base = {"kernel": name, "axis": 0, "factor": None, "grid": None, "programs": 0}
        return [{**base, "skipped": "the launch has no tensor argument"}]
    factor = math.ceil(TARGET_ELEMENTS / largest)
    names = list(inspect.signature(executor.fn).parameters)
    bound = inspect.getcallargs(executor.fn, *args, **kwargs)
    candidates = _growing(executor, bound, tensors)
    grid = _launch_grid(executor, bound)
    return [
        _axis_record(
            executor, args, kwargs, names, grid, axis, factor, _tries(name, axis, candidates)
        )
        for axis in [a for a in range(3) if grid[a] > 1] or [0]
    ]


def _launch_grid(executor: Any, bound: dict) -> tuple[int, int, int]:
    """The launch's grid (called on the bound arguments where it is a function), padded
    with 1s to three axes."""
    grid = executor.grid(bound) if callable(executor.grid) else executor.grid
    return tuple(int(g) for g in grid) + (1,) * (3 - len(grid))


def _axis_record(
    executor: Any,
    args: tuple,
    kwargs: dict,
    names: list[str],
    grid: tuple[int, int, int],
    axis: int,
    factor: int,
    tries: list[list[str]],
) -> dict:
    """The record of replaying the launch along grid ``axis``: the first of ``tries``
    (the sets of arguments to scale) whose replay neither wrapped nor erred, else the
    last one; a skipped record where there is nothing to try."""
    record = None
    for n, scale in enumerate(tries, 1):
        record = _replay(executor, args, kwargs, names, grid, axis, factor, set(scale))
        record["tried"] = n
        if record.get("wrapped") is None and record.get("error") is None:
            break
    if record is None:
        name = getattr(executor.fn, "__name__", "?")
        record = {"kernel": name, "axis": axis, "factor": None, "grid": None, "programs": 0}
        record["skipped"] = "its original's replay along this axis was not kept"
    return record


def _growing(executor: Any, bound: dict, tensors: list) -> list[str]:
    """The integer arguments that may grow with the problem: not constexpr, equal to a
    tensor's length (its elements, or its first dimension)."""
    sizes = {int(t.numel()) for t in tensors} | {
        int(t.shape[0]) for t in tensors if t.dim() and int(t.shape[0]) > 1
    }
    constexprs = set(getattr(executor, "constexprs", ()))
    return [
        key
        for key, value in bound.items()
        if key not in constexprs
        and isinstance(value, int)
        and not isinstance(value, bool)
        and value in sizes
    ]


def _tries(name: str, axis: int, candidates: list[str]) -> list[list[str]]:
    """The sets of arguments to scale, in order: a mutant's, its original's kept plan (or
    none); an original's, the subsets of ``candidates``."""
    if _STATE.plans is None:
        return _subsets(candidates)
    planned = (_STATE.plans.get(name) or {}).get(str(axis))  # a mutant: as its original was
    return [planned] if planned is not None else []


def _subsets(candidates: list[str]) -> list[list[str]]:
    """All of ``candidates``, then all but one, all but two, ...: ``MAX_TRIES`` at most."""
    import itertools

    out: list[list[str]] = []
    for k in range(len(candidates), -1, -1):
        for kept in itertools.combinations(candidates, k):
            out.append(list(kept))
            if len(out) >= MAX_TRIES:
                return out
    return out


def _replay(
    executor: Any,
    args: tuple,
    kwargs: dict,
    names: list[str],
    grid: tuple[int, int, int],
    axis: int,
    factor: int,
    scale: set[str],
) -> dict:
    """One replay of a launch ``factor`` times larger along grid ``axis``, with the
    integer arguments named in ``scale`` multiplied by ``factor``."""
    mod = _interp()
    name = getattr(executor.fn, "__name__", "?")
    big_args, big_kwargs = _scaled_arguments(args, kwargs, names, scale, factor)
    big, run = _replay_grids(grid, axis, factor)
    record: dict = {
        "kernel": name,
        "axis": axis,
        "factor": factor,
        "grid": list(big),
        "programs": math.prod(run),
        "scaled": sorted(scale),
    }
    _STATE.int_loads = False

    saved = {
        "grid": executor.grid,
        "init": mod.GridExecutor._init_args_hst,
        "restore": mod.GridExecutor._restore_args_dev,
        "load": mod.InterpreterBuilder.create_masked_load,
        "store": mod.InterpreterBuilder.create_masked_store,
        "dim": mod.InterpreterBuilder.set_grid_dim,
        "idx": mod.InterpreterBuilder.set_grid_idx,
    }
    raw_init = _raw(mod, "GridExecutor._init_args_hst", saved["init"])
    raw_load = _raw(mod, "InterpreterBuilder.create_masked_load", saved["load"])
    raw_dim, raw_idx = saved["dim"], saved["idx"]

    def init(self: Any, args_dev: Any, kw: dict) -> Any:
        args_hst, kwargs_hst = raw_init(self, args_dev, kw)
        _STATE.ranges = []
        for key, value in inspect.getcallargs(self.fn, *args_hst, **kwargs_hst).items():
            for t in _tensors([value]):
                start, end = _extent(t)
                size = max(end - start, t.element_size())
                _STATE.ranges.append((start, start + size * factor, key, t.element_size()))
        return args_hst, kwargs_hst

    def restore(self: Any, *rest: Any) -> None:
        return None  # the replay leaves the check's tensors alone

    def set_dim(self: Any, nx: int, ny: int, nz: int) -> None:
        raw_dim(self, *big)

    def set_idx(self: Any, x: int, y: int, z: int) -> None:
        raw_idx(self, *(i + b - r for i, b, r in zip((x, y, z), big, run, strict=True)))

    def load(self: Any, ptrs: Any, mask: Any, other: Any, *rest: Any) -> Any:
        active = _check(self, ptrs, mask, "load")
        element = getattr(getattr(ptrs, "dtype", None), "element_ty", None)
        if element is not None and element.is_int() and not element.is_int1():
            _STATE.int_loads = True
        if other is not None and active is not None:
            other = mod.TensorHandle(
                np.where(active, 0, other.data).astype(other.data.dtype), other.dtype
            )
        nothing = mod.TensorHandle(np.zeros_like(np.asarray(ptrs.data), dtype=bool), mod.tl.int1)
        return raw_load(self, ptrs, nothing, other, *rest)

    def store(self: Any, ptrs: Any, value: Any, mask: Any, *rest: Any) -> None:
        _check(self, ptrs, mask, "store")

    _STATE.replaying, _STATE.violation, _STATE.fn = True, None, executor.fn
    executor.grid = run
    mod.GridExecutor._init_args_hst = init
    mod.GridExecutor._restore_args_dev = restore
    mod.InterpreterBuilder.create_masked_load = load
    mod.InterpreterBuilder.create_masked_store = store
    mod.InterpreterBuilder.set_grid_dim = set_dim
    mod.InterpreterBuilder.set_grid_idx = set_idx
    try:
        error = _replay_error(mod, executor, big_args, big_kwargs)
    finally:
        executor.grid = saved["grid"]
        mod.GridExecutor._init_args_hst = saved["init"]
        mod.GridExecutor._restore_args_dev = saved["restore"]
        mod.InterpreterBuilder.create_masked_load = saved["load"]
        mod.InterpreterBuilder.create_masked_store = saved["store"]
        mod.InterpreterBuilder.set_grid_dim = saved["dim"]
        mod.InterpreterBuilder.set_grid_idx = saved["idx"]
        _STATE.replaying = False
    if error is not None:
        record["error"] = error
    record["wrapped"] = _STATE.violation
    if _STATE.int_loads:
        record["int_loads"] = True
    return record


def _scaled_arguments(
    args: tuple, kwargs: dict, names: list[str], scale: set[str], factor: int
) -> tuple[tuple, dict]:
    """The launch's arguments with those named in ``scale`` multiplied by ``factor``
    (a positional one by its parameter's name in ``names``)."""

    def scaled(key: str, value: Any) -> Any:
        return value * factor if key in scale else value

    big_args = tuple(scaled(names[i] if i < len(names) else "", v) for i, v in enumerate(args))
    return big_args, {k: scaled(k, v) for k, v in kwargs.items()}


def _replay_grids(
    grid: tuple[int, int, int], axis: int, factor: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The replayed grid (``factor`` times larger along ``axis``) and the programs run of
    it (at most ``MAX_PROGRAMS`` along ``axis``, ``OTHER_PROGRAMS`` along the others)."""
    big = tuple(g * factor if a == axis else g for a, g in enumerate(grid))
    run = tuple(min(g, MAX_PROGRAMS if a == axis else OTHER_PROGRAMS) for a, g in enumerate(grid))
    return big, run


def _replay_error(mod: Any, executor: Any, big_args: tuple, big_kwargs: dict) -> str | None:
    """Run the patched launch with the scaled arguments, ``REPLAY_S`` at most; the
    replay's error, None where it ended or stopped at a recorded violation."""
    alarm = _alarm()
    try:
        _raw(mod, "GridExecutor.__call__", None)(executor, *big_args, **big_kwargs)
    except _TooLong:
        return f"the replay ran past {REPLAY_S:g} s (a loop over a scaled count?)"
    except Exception as exc:  # noqa: BLE001
        if _STATE.violation is None:
            return f"{type(exc).__name__}: {exc}"[:500]
    finally:
        alarm()
    return None


def _alarm() -> Any:
    """Arm ``REPLAY_S`` (main thread only); returns what disarms it."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def ring(signum: int, frame: Any) -> None:
        raise _TooLong

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, REPLAY_S)

    def disarm() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    return disarm


def _raw(mod: Any, key: str, fallback: Any) -> Any:
    """Triton's own method (under the bounds checker's wrapper, when installed)."""
    from . import bounds

    found = bounds._ORIGINALS.get(key)  # noqa: SLF001 - same package
    if found is not None:
        return found[1]
    if fallback is not None:
        return fallback
    cls, _, attr = key.partition(".")
    return getattr(getattr(mod, cls), attr)


def _extent(t: Any) -> tuple[int, int]:
    el = t.element_size()
    lo = hi = 0
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride > 0:
            hi += stride * (size - 1)
        else:
            lo += stride * (size - 1)
    return t.data_ptr() + lo * el, t.data_ptr() + (hi + 1) * el


def _check(builder: Any, ptrs: Any, mask: Any, op: str) -> Any:
    """The active-lane mask (None: all lanes); records a lane outside every extent
    and raises ``Wrapped``."""
    addr = np.asarray(ptrs.data).astype(np.int64, copy=False)
    active = None
    if mask is not None:
        active = np.broadcast_to(np.asarray(mask.data).astype(bool), addr.shape)
        lanes = addr[active]
    else:
        lanes = addr.reshape(-1)
    if lanes.size == 0:
        return active
    inside = np.zeros(lanes.shape, dtype=bool)
    for start, end, _, _ in _STATE.ranges:
        inside |= (lanes >= start) & (lanes < end)
    if inside.all():
        return active
    bad = lanes[~inside]
    worst = int(bad[np.argmax(np.abs(bad - _STATE.ranges[0][0]))]) if _STATE.ranges else 0
    nearest = min(
        _STATE.ranges, key=lambda r: min(abs(worst - r[0]), abs(worst - r[1])), default=None
    )
    pid = [int(v) for v in getattr(builder, "grid_idx", (0, 0, 0))]
    line = _line(_STATE.fn)
    if nearest is not None:
        start, end, name, itemsize = nearest
        if worst < start:
            gap = f"{(start - worst) // itemsize} elements before the start of the nearest, {name}"
        else:
            gap = f"{(worst - end) // itemsize + 1} elements past the end of the nearest, {name}"
        where = f"outside every tensor argument ({gap})"
    else:
        name, where = None, "outside every tensor argument"
    _STATE.violation = {
        "op": op,
        "argument": name,
        "line": line,
        "program_id": pid,
        "lanes_out": int(bad.size),
        "message": (
            f"{op} at line {line} of program {tuple(pid)} addresses {where} "
            f"({int(bad.size)} lanes): an offset that wraps past 2^31 elements"
        ),
    }
    raise Wrapped(_STATE.violation["message"])


def _line(fn: Any) -> int | None:
    """The line of the kernel's access in progress."""
    code = getattr(fn, "__code__", None)
    filename = code.co_filename if code is not None else None
    frame = sys._getframe(2)
    while frame is not None:
        if filename and os.path.basename(frame.f_code.co_filename) == os.path.basename(filename):
            return frame.f_lineno
        frame = frame.f_back
    return None
