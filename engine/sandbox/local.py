"""The embedded default sandbox: a pool of warm worker processes.

Each worker imports torch/triton once (with ``TRITON_INTERPRET=1`` unless compiled)
and runs the jobs of the file's own code in one hardened runner process of its own
(``warm.run_warm``); any other job (a generated or project test, --sanitize) gets a
freshly forked child. A job costs no 3-second import, and (compiled) no new CUDA
context. The workers are started with a scrubbed environment: no key or token ever reaches
them, let alone the code they run. A worker that dies or stops answering is
replaced and its job reported as an error, never as a kill.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

from ..job import CLOSED_WHILE_RUNNING, Job, JobResult, JobStatus
from . import Sandbox
from .handoff import Handoff

#: How long the tool waits past a job's own timeout before giving up on a worker.
WORKER_GRACE_S = 30.0
START_TIMEOUT_S = 120.0
#: How long closing waits for workers to end their jobs themselves before killing them.
CLOSE_GRACE_S = 1.0
#: How often a job waiting for its worker (or for a free one) looks whether the pool closed.
CLOSED_POLL_S = 0.5


class SandboxStartError(RuntimeError):
    """The worker could not start (import failure, bad environment)."""


def worker_env(mode: str = "interpret") -> dict[str, str]:
    extra = {
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        # glibc fills every allocation with one byte (0xFE) and every freed block with
        # another: an output a mutant leaves unwritten (``torch.empty``) holds the same
        # values in every run, on every pool (float32 -1.69e38, float16 NaN), never
        # what an earlier run of the original left in recycled memory, by which the
        # same mutant passed in one run and failed in the next
        "MALLOC_PERTURB_": "1",
    }
    if mode == "interpret":
        extra["TRITON_INTERPRET"] = "1"
        # Interpreted jobs run on the CPU even on a GPU machine: the same verdicts
        # everywhere, and no CUDA context in a worker that forks.
        extra["CUDA_VISIBLE_DEVICES"] = ""
    from ..harness.isolation import scrubbed_env  # with the first worker: a cached run starts none

    env = scrubbed_env(dict(os.environ), extra)
    if mode != "interpret":
        env.pop("TRITON_INTERPRET", None)
    return env


def visible_gpus() -> list[str]:
    """GPU ids a compiled-mode pool spreads its workers over (no CUDA context is made)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g for g in listed.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


class _Worker:
    """One warm worker process. Construction starts it; ``wait_ready`` waits for its imports."""

    def __init__(
        self,
        mode: str,
        gpu: str | None = None,
        warm: bool = False,
        triton_cache: str | None = None,
        slot: int = 0,
    ) -> None:
        self.versions: dict = {}
        self.slot = slot  # compiled mode: which entry of the visible GPUs it runs on
        self.scratch: str | None = None  # the worker's job directories (it reports it)
        self.runner: dict | str | None = None  # the warm runner's hello (or why it failed)
        self.gpu, self.mode, self.warm, self.triton_cache = gpu, mode, warm, triton_cache
        env = worker_env(mode)
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mutant_gate.engine.harness.worker"]
            + (["--warm"] if warm else [])
            + (["--triton-cache", triton_cache] if warm and triton_cache else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
            start_new_session=True,
        )

    def wait_ready(self) -> _Worker:
        hello = self._read_line(START_TIMEOUT_S)
        if hello is None or not hello.get("ready"):
            self.kill()
            detail = (hello or {}).get("error", "no answer")
            raise SandboxStartError(
                f"sandbox worker failed to start: {detail.strip().splitlines()[-1]}"
            )
        self.versions = hello["versions"]
        self.scratch = hello.get("scratch")
        self.runner = hello.get("runner")
        #: the warm runner's pid while one waits for jobs (a process of the sandbox uid
        #: that is not a job's leftover), from its hello and then from each warm result
        self.runner_pid = self.runner.get("pid") if isinstance(self.runner, dict) else None
        return self

    def _answer(self, deadline: float, closed: Callable[[], bool] | None) -> dict | None:
        """The worker's next line by ``deadline``, looking every ``CLOSED_POLL_S`` whether
        the pool closed (then None at once: a job never outlives its pool's closing)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (closed is not None and closed()):
                return None
            if self._readable(min(left, CLOSED_POLL_S) if closed is not None else left):
                assert self.proc.stdout is not None
                line = self.proc.stdout.readline()
                return json.loads(line) if line else None

    def _readable(self, timeout: float) -> bool:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            return bool(sel.select(timeout))

    def _read_line(self, timeout: float) -> dict | None:
        return self._answer(time.monotonic() + timeout, None)

    def execute(
        self,
        job: Job,
        on_progress: Callable[[dict], None] | None = None,
        closed: Callable[[], bool] | None = None,
    ) -> JobResult | None:
        """Run one job; None when the worker died or hung (it must be replaced), or when
        ``closed()`` turns true meanwhile (the pool closed: nobody waits for the answer).
        ``on_progress`` is called with each progress report of the job as it arrives."""
        assert self.proc.stdin is not None
        deadline = time.monotonic() + job.wall_limit_s + WORKER_GRACE_S
        request = {"job": job.to_json(), **({"progress": True} if on_progress else {})}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            answer = self._answer(deadline, closed)
            while answer is not None and "progress" in answer:
                if on_progress is not None:
                    on_progress(answer["progress"])
                answer = self._answer(deadline, closed)
        except (BrokenPipeError, OSError, ValueError):
            return None
        if answer is None:
            return None
        result = JobResult.from_json(answer["result"])
        if "runner" in result.extra:
            self.runner_pid = result.extra["runner"].get("pid")
        return result

    def kill(self) -> None:
        """Kill the worker, its job (in a process group of its own) and whatever the
        job started (as root every process of the worker's sandbox uid)."""
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        if os.geteuid() == 0:
            from ..harness.isolation import kill_uid, sandbox_uid

            kill_uid(sandbox_uid(self.proc.pid))
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)


class LocalSandbox(Sandbox):
    """A pool of ``workers`` warm processes; ``run`` is thread-safe."""

    name = "local"
    versions_key = False  # its jobs are keyed by this interpreter's installs (``Sandbox``)

    def __init__(
        self,
        workers: int | None = None,
        mode: str = "interpret",
        warm: bool | None = None,
        shared_cache: bool | None = None,
    ) -> None:
        self.size = max(1, workers or os.cpu_count() or 1)
        self.mode = mode
        #: jobs of the file's own code run in each worker's long-lived runner (see
        #: ``warm.run_warm``): in compiled mode a process per job pays a CUDA context
        #: and Triton's driver builds, in the interpreter a fork and the hardening
        self.warm = True if warm is None else warm
        #: compiled mode: the warm runners share one Triton cache (see
        #: ``isolation.shared_triton_cache``), so a kernel, its launcher and the driver
        #: utilities are built once for the pool, not once per runner; children of
        #: other jobs (generated tests among them) keep a private cache each
        self.shared_cache = mode == "compiled" if shared_cache is None else shared_cache
        #: compiled mode: {"SLOT:DEVICE": [jobs, seconds]} per visible GPU (``gpu_throughput``)
        self.gpu_jobs: dict[str, list] = {}
        #: the shared cache's path, or why there is none (for the report and benchmarks)
        self.triton_cache: str | None = None
        self.triton_cache_note = ""
        self._idle: Handoff[_Worker] = Handoff()  # first come, first served
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._starting: list[_Worker] = []  # launched, not ready yet
        self._starters: list[threading.Thread] = []
        #: why workers that never became ready failed (the pool runs on without them)
        self.start_errors: list[str] = []
        self._started = False
        self._closed = False
        self.versions: dict = {}

    def start(self, wait_all: bool = False) -> None:
        """Start every worker in parallel (each pays the torch/triton import, and a warm
        runner its CUDA context, once) and return as soon as one is ready: the first
        jobs (the original's) run while the others still start, and each joins the pool
        when ready. A worker that fails to start leaves the pool smaller
        (``start_errors`` says why); none ready is ``SandboxStartError``. ``wait_all``
        returns only once every worker is ready or failed."""
        with self._start_lock:
            with self._lock:
                if self._closed:
                    raise SandboxStartError("the sandbox is closed")
            if not self._started:
                self._launch()
            if wait_all:
                for thread in list(self._starters):
                    thread.join()

    def _new_workers(self, gpus: list) -> list[_Worker]:
        """The pool's worker processes, each launched as it is made. Compiled mode: one
        worker pool per visible GPU (``gpus``), workers dealt round-robin."""
        return [
            _Worker(
                self.mode,
                gpus[i % len(gpus)] if gpus else None,
                self.warm,
                self.triton_cache,
                i % len(gpus) if gpus else 0,
            )
            for i in range(self.size)
        ]

    def _launch(self) -> None:
        gpus = visible_gpus() if self.mode == "compiled" else []
        if self.mode == "compiled" and not gpus:
            raise SandboxStartError("--mode compiled needs a CUDA device; none is visible")
        if self.warm and self.shared_cache:
            from ..harness.isolation import shared_triton_cache

            self.triton_cache, self.triton_cache_note = shared_triton_cache()
        launched = self._new_workers(gpus)
        ready: queue.Queue[tuple[_Worker, SandboxStartError | None]] = queue.Queue()
        with self._lock:
            self._starting.extend(launched)

        def wait(worker: _Worker) -> None:
            failure = None
            try:
                worker.wait_ready()
            except SandboxStartError as exc:
                failure = exc
            except Exception as exc:  # noqa: BLE001 - a garbled hello: the start still answers
                worker.kill()
                failure = SandboxStartError(f"sandbox worker failed to start: {exc}")
            with self._lock:
                self._starting.remove(worker)
                if failure is None and not self._closed:
                    self._all.append(worker)
                    self._idle.put(worker)
                elif failure is not None:
                    self.start_errors.append(str(failure))
            if failure is None and self._closed:
                worker.kill()
            ready.put((worker, failure))

        self._starters = [
            threading.Thread(target=wait, args=(w,), name="mutant-gate-worker-start", daemon=True)
            for w in launched
        ]
        for thread in self._starters:
            thread.start()
        failures = []
        for _ in launched:
            worker, failure = ready.get()
            if failure is None:
                self.versions = worker.versions
                self._started = True
                return
            failures.append(failure)
        raise failures[0]

    def run(self, job: Job, on_progress: Callable[[dict], None] | None = None) -> JobResult:
        if self._closed:
            return JobResult(JobStatus.ERROR, error=CLOSED_WHILE_RUNNING)
        self.start()
        worker = self._take()
        if worker is None:
            return JobResult(JobStatus.ERROR, error=CLOSED_WHILE_RUNNING)
        start = time.monotonic()
        try:
            result = worker.execute(job, on_progress, closed=lambda: self._closed)
        except BaseException:
            self._replace(worker)
            raise
        if result is None:
            if self._closed:
                return JobResult(JobStatus.ERROR, error=CLOSED_WHILE_RUNNING)
            self._replace(worker)
            if self._closed:
                return JobResult(JobStatus.ERROR, error=CLOSED_WHILE_RUNNING)
            return JobResult(
                JobStatus.ERROR,
                error="sandbox worker died or stopped answering; it was replaced",
                duration_s=time.monotonic() - start,
            )
        if worker.gpu is not None:
            with self._lock:
                slot = self.gpu_jobs.setdefault(f"{worker.slot}:{worker.gpu}", [0, 0.0])
                slot[0] += 1
                slot[1] += result.duration_s
        self._idle.put(worker)
        return result

    def _take(self) -> _Worker | None:
        """An idle worker; None once the pool is closed (never a wait past the closing)."""
        if self._closed:
            return None
        return self._idle.take(lambda: self._closed, CLOSED_POLL_S)

    def gpu_throughput(self, wall_s: float) -> list[dict]:
        """Compiled mode, per GPU slot of the pool (``CUDA_VISIBLE_DEVICES`` entry, in the
        order listed): jobs run, their summed time, and jobs per second of ``wall_s``."""
        with self._lock:
            slots = sorted(self.gpu_jobs.items(), key=lambda kv: int(kv[0].split(":")[0]))
        return [
            {
                "slot": int(key.split(":")[0]),
                "device": key.split(":", 1)[1],
                "jobs": jobs,
                "busy_s": round(busy, 2),
                "jobs_per_s": round(jobs / wall_s, 2) if wall_s > 0 else None,
            }
            for key, (jobs, busy) in slots
        ]

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
        if self._closed:
            return
        fresh = _Worker(self.mode, worker.gpu, self.warm, self.triton_cache, worker.slot)
        with self._lock:
            self._starting.append(fresh)  # closing ends it too
        failure: SandboxStartError | None = None
        try:
            fresh.wait_ready()
        except SandboxStartError as exc:
            failure = exc
        with self._lock:
            self._starting.remove(fresh)
            closed = self._closed
            if not closed and failure is None:
                self._all.append(fresh)
        if closed:
            fresh.kill()
            return
        if failure is not None:
            raise failure
        self._idle.put(fresh)

    def run_many(self, jobs: Iterable[Job]) -> Iterator[tuple[int, JobResult]]:
        """Run jobs on all workers; yield ``(index, result)`` as each finishes."""
        self.start()
        with ThreadPoolExecutor(self.size) as pool:
            futures = {pool.submit(self.run, job): i for i, job in enumerate(jobs)}
            for future in as_completed(futures):
                yield futures[future], future.result()

    def close(self) -> None:
        """End every worker; jobs in flight end as errors, never as verdicts.

        Closing a worker's stdin ends it (a job in flight is killed with everything it
        started, see ``worker.run_job``); one that has not gone within
        ``CLOSE_GRACE_S`` is killed from here."""
        with self._lock:
            workers, self._all = self._all + self._starting, []
            self._closed = True
        for w in workers:
            try:
                if w.proc.stdin:
                    w.proc.stdin.close()
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + CLOSE_GRACE_S
        for w in workers:
            try:
                w.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            w.kill()

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
