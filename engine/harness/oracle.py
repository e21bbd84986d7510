"""The diff-oracle's sandbox side: original and mutant side by side, launch by launch.

Runs inside the sandbox child; imports only the stdlib, numpy, torch, triton.

The child forks one grandchild per variant (original, mutant), each in its own
directory with the same files but the kernel, the same seed and the same checks.
Each grandchild traces every launch (``trace`` in ``values`` mode) and streams,
after each launch, the value of every tensor argument through a pipe. The child
reads the two streams in lockstep -- launch k of the original, then launch k of
the mutant -- compares each argument exactly and keeps only a small summary, so
memory holds one launch of each variant and nothing touches the disk (the
sandbox's file-size limit would forbid it anyway).

Interpreter dependence. A GPU never loads a masked-off lane (it gets ``other=``,
or is undefined without it) and never stores one. Two facts are collected:

* per launch, digests of the values on active and on masked-off lanes of every
  load and store. When the outputs are identical, every active lane loaded and
  stored the same values, and only masked-off lanes differ, the mutant changed
  nothing but masked-off lanes: ``masked_only``.
* the number of *undefined* lanes read (masked-off lanes of a load without
  ``other=``; the interpreter fills them with 0). If the outputs are identical
  and either variant read undefined lanes, the pair runs again with those lanes
  poisoned (NaN / the integer maximum) in both. Any difference under poison --
  in the outputs, or ``masked_only`` -- means "identical" rested on the
  interpreter's zero fill.

Either makes the verdict interpreter-dependent. Neither is claimed for outputs
that already differ: the interpreter shows a real difference there.
"""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import sys
import tempfile
import time
import traceback
from dataclasses import replace

import numpy as np

from mutant_gate.engine.job import Job

from . import trace

MAX_DIFFS = 100
_HEADER = struct.Struct("<Q")


# --------------------------------------------------------------------------
# comparison


def compare_arrays(a: np.ndarray, b: np.ndarray) -> dict | None:
    """None when ``a`` (original) and ``b`` (mutant) hold the same values, else
    numbers: how many elements differ, the first (C order) index that does,
    the largest absolute and relative difference over pairs where both are
    finite (relative to the original; ``None`` where undefined), and how many
    differing pairs involve NaN or infinity. NaN equals NaN; -0.0 equals 0.0."""
    if a.shape != b.shape:
        return {
            "count": int(max(a.size, b.size)),
            "first_index": None,
            "max_abs": None,
            "max_rel": None,
            "nonfinite": 0,
            "shape": [list(a.shape), list(b.shape)],
        }
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        x = a.astype(np.float64, copy=False)
        y = b.astype(np.float64, copy=False)
        differ = ~((x == y) | (np.isnan(x) & np.isnan(y)))
    else:
        differ = a != b
        x = y = None
    count = int(np.count_nonzero(differ))
    if count == 0:
        return None
    flat = int(np.flatnonzero(differ.reshape(-1))[0])
    first = [int(i) for i in np.unravel_index(flat, a.shape)] if a.ndim else []
    if x is None:
        xs = a[differ].astype(np.float64)
        ys = b[differ].astype(np.float64)
    else:
        xs, ys = x[differ], y[differ]
    finite = np.isfinite(xs) & np.isfinite(ys)
    nonfinite = int(count - np.count_nonzero(finite))
    max_abs = max_rel = None
    if finite.any():
        delta = np.abs(xs[finite] - ys[finite])
        max_abs = float(delta.max())
        base = np.abs(xs[finite])
        nonzero = base > 0
        if nonzero.any():
            max_rel = float((delta[nonzero] / base[nonzero]).max())
    return {
        "count": count,
        "first_index": first,
        "max_abs": max_abs,
        "max_rel": max_rel,
        "nonfinite": nonfinite,
    }


# --------------------------------------------------------------------------
# the stream between a grandchild and the child


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _PipeSink:
    """In a grandchild: writes each launch (header + raw argument bytes) to ``fd``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __call__(self, header: dict, tensors: list) -> None:
        arrays = []
        args = []
        for name, tensor in tensors:
            try:
                array = trace.snapshot(tensor)
            except Exception as exc:  # noqa: BLE001 - an exotic tensor: say so, go on
                args.append({"name": name, "error": repr(exc)[:200]})
                continue
            arrays.append(array)
            args.append(
                {
                    "name": name,
                    "dtype": array.dtype.str,
                    "torch_dtype": str(tensor.dtype).replace("torch.", ""),
                    "shape": list(array.shape),
                    "nbytes": int(array.nbytes),
                }
            )
        self.send({"type": "launch", **header, "args": args}, arrays)

    def send(self, header: dict, arrays: list | tuple = ()) -> None:
        blob = json.dumps(header).encode()
        _write_all(self.fd, _HEADER.pack(len(blob)) + blob)
        for array in arrays:
            if array.nbytes:
                _write_all(self.fd, array.reshape(-1).view(np.uint8).data)


class _Stream:
    """In the child: reads one grandchild's messages, with a deadline."""

    def __init__(self, fd: int, pid: int, deadline: float) -> None:
        self.fd, self.pid, self.deadline = fd, pid, deadline
        self.ended: dict | None = None

    def _read(self, n: int) -> bytes | None:
        chunks = []
        while n:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def next(self) -> tuple[dict, list] | None:
        """The next launch (header, arrays); None at the end (``ended`` says how)."""
        if self.ended is not None:
            return None
        raw = self._read(_HEADER.size)
        if raw is None:
            self.ended = {"status": "crash", "error": "the variant died without a result"}
            return None
        (size,) = _HEADER.unpack(raw)
        blob = self._read(size)
        if blob is None:
            self.ended = {"status": "crash", "error": "the variant died mid-message"}
            return None
        header = json.loads(blob)
        if header.get("type") == "end":
            self.ended = header
            return None
        arrays = self._arrays(header["args"])
        return None if arrays is None else (header, arrays)

    def _arrays(self, args: list[dict]) -> list | None:
        """The launch's arguments' arrays, as ``args`` describes them (None for one that
        could not be sent); None when the variant died mid-message (``ended`` says so)."""
        arrays = []
        for arg in args:
            if "error" in arg:
                arrays.append(None)
                continue
            data = self._read(arg["nbytes"]) if arg["nbytes"] else b""
            if data is None:
                self.ended = {"status": "crash", "error": "the variant died mid-message"}
                return None
            arrays.append(np.frombuffer(data, dtype=np.dtype(arg["dtype"])).reshape(arg["shape"]))
        return arrays


# --------------------------------------------------------------------------
# one pair of runs


def _variant(job: Job, files: tuple, directory: str, fd: int, poison: bool) -> None:
    """In a forked grandchild: run the checks with value tracing; never returns."""
    from mutant_gate.engine.harness import isolation

    from .runner import run_checks, tail

    sink = _PipeSink(fd)
    code = 0
    try:
        isolation.die_with_parent()
        parent = os.path.abspath(os.getcwd())
        os.makedirs(directory, exist_ok=True)
        os.chdir(directory)
        os.environ["HOME"] = os.environ["TMPDIR"] = directory
        tempfile.tempdir = directory
        # The outer job directory (the request) must not shadow the variant's modules.
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != parent]
        trace.start("values", sink=sink, poison=poison)
        result = run_checks(replace(job, files=files), directory)
        # the checks' own result, as a job of its own running them would give (the
        # sandbox's wrapping aside): a proof takes a mutant's run of its test from here
        run = result.to_json()
        run["error"] = tail(result.error)  # as much as a job's result keeps
        end = {
            "type": "end",
            "status": result.status.value,
            "error": tail(result.error, 1000),
            "launches": trace.launch_count(),
            "internal_errors": trace.internal_errors()[:5],
            "run": run,
        }
    except BaseException:  # noqa: BLE001
        end = {"type": "end", "status": "error", "error": traceback.format_exc()[-1500:]}
        code = 1
    try:
        sink.send(end)
    except OSError:
        code = 1
    os._exit(code)


def _spawn(job: Job, files: tuple, directory: str, poison: bool) -> tuple[int, int]:
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        _variant(job, files, directory, wfd, poison)
    os.close(wfd)
    return pid, rfd


def _reap(pid: int, kill: bool) -> None:
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


class _Comparison:
    """Accumulates what differs between the two streams."""

    def __init__(self) -> None:
        self.launches = 0
        self.kernels: list[str] = []
        self.diffs: list[dict] = []
        self.diff_total = 0
        self.by_argument: dict[str, dict] = {}
        self.launches_differing = 0
        self.errors: list[dict] = []
        self.divergence: str | None = None
        self.active_differs = False
        self.masked_differs = False
        self.undefined = {"original": 0, "mutant": 0}

    def add(self, a: tuple[dict, list], b: tuple[dict, list]) -> None:
        (ha, xa), (hb, xb) = a, b
        index = self.launches
        self.launches += 1
        self.undefined["original"] += ha["lanes"]["undefined"]
        self.undefined["mutant"] += hb["lanes"]["undefined"]
        if ha["kernel"] != hb["kernel"]:
            self.divergence = (
                f"launch {index}: the original launched {ha['kernel']}, the mutant {hb['kernel']}"
            )
            return
        kernel = ha["kernel"]
        if kernel not in self.kernels:
            self.kernels.append(kernel)
        if ha.get("error") or hb.get("error"):
            if ha.get("error") != hb.get("error"):
                self.errors.append(
                    {
                        "launch": index,
                        "kernel": kernel,
                        "original": ha["error"],
                        "mutant": hb["error"],
                    }
                )
        self._compare_lanes(ha["lanes"], hb["lanes"])
        if self._compare_arguments(index, kernel, (ha, xa), (hb, xb)):
            self.launches_differing += 1

    def _compare_lanes(self, la: dict, lb: dict) -> None:
        """Notes whether the launch's active lanes, or its masked-off lanes, differ."""
        if la["load_active"] != lb["load_active"] or la["store_active"] != lb["store_active"]:
            self.active_differs = True
        if la["load_masked"] != lb["load_masked"] or la["store_masked"] != lb["store_masked"]:
            self.masked_differs = True

    def _compare_arguments(
        self, index: int, kernel: str, a: tuple[dict, list], b: tuple[dict, list]
    ) -> bool:
        """Compares each tensor argument of launch ``index`` that both variants sent, keeping
        its difference; whether any differed."""
        (ha, xa), (hb, xb) = a, b
        mutant_args = {arg["name"]: (arg, arr) for arg, arr in zip(hb["args"], xb, strict=True)}
        differing = False
        for arg, arr in zip(ha["args"], xa, strict=True):
            name = arg["name"]
            other = mutant_args.get(name)
            if arr is None or other is None or other[1] is None:
                continue
            diff = compare_arrays(arr, other[1])
            if diff is None:
                continue
            differing = True
            self.diff_total += 1
            entry = {
                "launch": index,
                "kernel": kernel,
                "argument": name,
                "dtype": arg.get("torch_dtype", arg["dtype"]),
                "numel": int(arr.size),
                **diff,
            }
            if len(self.diffs) < MAX_DIFFS:
                self.diffs.append(entry)
            self._aggregate(f"{kernel}:{name}", entry)
        return differing

    def _aggregate(self, key: str, entry: dict) -> None:
        agg = self.by_argument.get(key)
        if agg is None:
            self.by_argument[key] = {
                "kernel": entry["kernel"],
                "argument": entry["argument"],
                "launches": 1,
                "count": entry["count"],
                "max_abs": entry["max_abs"],
                "max_rel": entry["max_rel"],
                "nonfinite": entry["nonfinite"],
                "first_launch": entry["launch"],
                "first_index": entry["first_index"],
            }
            return
        agg["launches"] += 1
        agg["count"] += entry["count"]
        agg["nonfinite"] += entry["nonfinite"]
        for k in ("max_abs", "max_rel"):
            if entry[k] is not None and (agg[k] is None or entry[k] > agg[k]):
                agg[k] = entry[k]

    @property
    def outputs_identical(self) -> bool:
        return self.diff_total == 0 and not self.errors and self.divergence is None

    def note_launch_counts(self, extra: dict) -> None:
        """Where no launch diverged but one side made more (``extra``): that divergence."""
        if self.divergence is None and (extra["original"] or extra["mutant"]):
            self.divergence = (
                f"the original made {self.launches + extra['original']} launches, "
                f"the mutant {self.launches + extra['mutant']}"
            )

    @property
    def masked_only(self) -> bool:
        """Identical outputs, and only masked-off lanes differed."""
        return self.outputs_identical and self.masked_differs and not self.active_differs


def run_group(job: Job, files: dict, workdir: str, poison: bool, timeout_s: float) -> dict:
    """Run the original and every other variant of ``files`` side by side (each in a
    process of its own), comparing each variant's launches with the original's as they
    come: the original runs once for all of them. Per variant, the comparison as JSON
    data. A variant that times out is cut alone; the deadline is the group's, so those
    still running then time out too (the caller runs those again on their own)."""
    start = time.monotonic()
    tag = "poisoned-" if poison else ""
    streams = {}
    for name in files:
        pid, fd = _spawn(job, files[name], os.path.join(workdir, tag + name), poison)
        streams[name] = _Stream(fd, pid, start + timeout_s)
    a = streams["original"]
    others = [name for name in files if name != "original"]
    comparisons = {name: _Comparison() for name in others}
    extra = {name: {"original": 0, "mutant": 0} for name in others}
    try:
        timed_out, original_done = _compare_streams(streams, comparisons, extra)
    finally:
        for stream in streams.values():
            os.close(stream.fd)
            _reap(stream.pid, kill=True)
    seconds = round(time.monotonic() - start, 3)
    return {
        name: _answer(
            comparisons[name],
            extra[name],
            {"original": a, "mutant": streams[name]},
            name in timed_out or not original_done,
            seconds,
        )
        for name in others
    }


def _compare_streams(
    streams: dict[str, _Stream], comparisons: dict[str, _Comparison], extra: dict[str, dict]
) -> tuple[set[str], bool]:
    """Reads the original's launches and each variant's in lockstep until every stream
    ends or the deadline passes; returns (the variants that timed out, whether the
    original ended). A variant that times out is cut alone; one whose launches go on
    past the other's end, or past a divergence, has them counted in ``extra``."""
    a = streams["original"]
    live = set(comparisons)  # variants still sending launches
    timed_out: set[str] = set()
    original_done = False
    while live or not original_done:
        la = None
        if not original_done:
            try:
                la = a.next()
            except TimeoutError:
                timed_out.update(live)
                break
            original_done = la is None
        for name, comparison in comparisons.items():
            if name in live:
                _step_variant(name, streams[name], la, comparison, extra[name], live, timed_out)
            elif la is not None and name not in timed_out:
                extra[name]["original"] += 1
    return timed_out, original_done


def _step_variant(
    name: str,
    stream: _Stream,
    la: tuple | None,
    comparison: _Comparison,
    extra: dict,
    live: set[str],
    timed_out: set[str],
) -> None:
    """One live variant's step of the lockstep: reads its next launch and pairs it with
    the original's ``la``; one that ends leaves ``live``, one that times out is cut and
    joins ``timed_out``."""
    try:
        lb = stream.next()
    except TimeoutError:
        timed_out.add(name)
        live.discard(name)
        _reap(stream.pid, kill=True)
        return
    if lb is None:
        live.discard(name)
    _pair_launches(la, lb, comparison, extra)


def _pair_launches(la, lb, comparison: _Comparison, extra: dict) -> None:
    """Compares the variant's launch ``lb`` with the original's ``la`` while the streams
    agree; a launch made past the other side's end (None) or after they diverged is
    counted in ``extra`` instead."""
    if la is not None and lb is not None and comparison.divergence is None:
        comparison.add(la, lb)
        return
    extra["original"] += int(la is not None)
    extra["mutant"] += int(lb is not None)


def _answer(
    comparison: _Comparison, extra: dict, streams: dict, timed_out: bool, seconds: float
) -> dict:
    comparison.note_launch_counts(extra)
    ended = {k: s.ended or {} for k, s in streams.items()}
    return {
        "launches": comparison.launches,
        "launches_original": comparison.launches + extra["original"],
        "launches_mutant": comparison.launches + extra["mutant"],
        "kernels": comparison.kernels,
        "identical": comparison.outputs_identical and not timed_out,
        "diffs": comparison.diffs,
        "diff_count": comparison.diff_total,
        "launches_differing": comparison.launches_differing,
        "by_argument": list(comparison.by_argument.values()),
        "launch_errors": comparison.errors[:10],
        "divergence": comparison.divergence,
        "masked_only": comparison.masked_only,
        "active_lanes_differ": comparison.active_differs,
        "masked_lanes_differ": comparison.masked_differs,
        "undefined_lanes": comparison.undefined,
        "checks": {k: end.get("status", "unknown") for k, end in ended.items()},
        "check_errors": {
            k: end.get("error", "")
            for k, end in ended.items()
            if end.get("status") not in ("passed", None)
        },
        "timed_out": timed_out,
        "seconds": seconds,
        # each side's run of the checks (``JobResult`` JSON), where it ended in time
        "runs": {} if timed_out else {k: end.get("run") for k, end in ended.items()},
    }


def run(request: dict, workdir: str) -> dict:
    """Harness entry ``oracle:run``. ``request``: ``job`` (the original's checks job),
    ``kernel`` (the file the mutant replaces), ``pair_timeout_s``, and either
    ``mutant_source`` (one mutant: its comparison is the answer) or ``mutant_sources``
    (id -> source, several mutants beside one run of the original: the answer's
    ``mutants`` holds each one's comparison, as one mutant's would be)."""
    job = Job.from_json(request["job"])
    kernel = request["kernel"]
    pair_timeout = float(request["pair_timeout_s"])
    if kernel not in dict(job.files):
        raise ValueError(f"oracle: {kernel!r} is not one of the job's files")
    group = request.get("mutant_sources")
    sources = group if group is not None else {"mutant": request["mutant_source"]}
    if "original" in sources:
        raise ValueError("oracle: a mutant may not be called 'original'")

    normal = run_group(
        job, _variant_files(job, kernel, sources), workdir, poison=False, timeout_s=pair_timeout
    )
    poisoned = _poisoned_runs(job, kernel, sources, normal, workdir, pair_timeout)
    answers = {}
    for name, data in normal.items():
        other = poisoned.get(name)
        if other is not None:
            for key in ("diffs", "launch_errors"):
                other[key] = other[key][:10]
        dependent = _interpreter_dependent(data, other)
        answers[name] = {**data, "poisoned": other, "interpreter_dependent": dependent}
    return {"mutants": answers} if group is not None else answers["mutant"]


def _poisoned_runs(
    job: Job, kernel: str, sources: dict[str, str], normal: dict, workdir: str, timeout_s: float
) -> dict:
    """The variants whose ``normal`` comparison was identical with undefined lanes read,
    run once more with those lanes poisoned: per variant, that comparison (none: {})."""
    again = {
        n: sources[n]
        for n, data in normal.items()
        if data["identical"] and any(data["undefined_lanes"].values())
    }
    if not again:
        return {}
    files = _variant_files(job, kernel, again)
    return run_group(job, files, workdir, poison=True, timeout_s=timeout_s)


def _variant_files(job: Job, kernel: str, sources: dict[str, str]) -> dict:
    """The original's files and, per variant, the same files with ``kernel``'s source
    replaced by the variant's."""
    files = {"original": job.files}
    for name, source in sources.items():
        files[name] = tuple((p, source if p == kernel else t) for p, t in job.files)
    return files


def _interpreter_dependent(data: dict, poisoned: dict | None) -> bool:
    """Whether an identical comparison rested on the interpreter: only masked-off lanes
    differed, or the run with undefined lanes poisoned (where it ended in time) differs."""
    return bool(
        data["identical"]
        and (
            data["masked_only"]
            or (
                poisoned is not None
                and not poisoned["timed_out"]
                and (not poisoned["identical"] or poisoned["masked_only"])
            )
        )
    )
