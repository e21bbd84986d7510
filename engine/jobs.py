"""Sandbox jobs, cache first: what every stage uses to run code.

``JobRunner.execute`` serves one job from the cache or runs it; ``run_jobs`` runs many
in parallel and yields them as they start and finish. Every result is stored the
moment it arrives (never a harness error), so an interrupted run resumes where it
stopped and a repeated run is served from the cache. The cache key is the job's
canonical JSON plus the toolchain (``toolchain``).
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

from mutant_gate.cache import Store

from .job import Job, JobResult, JobStatus
from .limits import hit
from .sandbox import Sandbox
from .versions import installed_version


@dataclass
class Meter:
    """What ``JobRunner.metered`` counts: the jobs' seconds (the CPU seconds each took when
    it ran: the same on a busy machine as on an idle one, ``JobResult.spent_s``) and their
    rounds one after the other (``path_s``)."""

    job_s: float = 0.0
    path_s: float = 0.0


def toolchain(mode: str, sandbox: Sandbox | None = None) -> dict:
    """Versions that key the cache; read without importing torch/triton. A remote
    sandbox, started when opened, knows the versions its image really runs: those win. A
    local pool's workers' own words never do (``Sandbox.versions_key``): the same job gets
    the same key whether the pool had started when its run began or not."""

    versions = {
        "python": sys.version.split()[0],
        "torch": installed_version("torch") or "missing",
        "triton": installed_version("triton") or "missing",
        "mode": mode,
    }
    remote = sandbox.versions if sandbox is not None and sandbox.versions_key else {}
    versions.update({k: remote[k] for k in ("python", "torch", "triton") if k in remote})
    return versions


class Happened(StrEnum):
    STARTED = "started"  # a worker took the job
    CACHED = "cached"  # served from the cache: it did not run
    FINISHED = "finished"  # it ran (or ran ahead of the call) and its result arrived


@dataclass(frozen=True)
class JobEvent:
    """One thing that happened to a job of ``JobRunner.run_jobs``: ``result`` for a cached
    or finished one, None when it started."""

    kind: Happened
    key: str
    result: JobResult | None = None

    @property
    def cached(self) -> bool:
        return self.kind is Happened.CACHED


class JobRunner:
    """Runs jobs in a sandbox, cache first; ``fresh`` reads no cached result (``--force``)
    but still stores what arrives. ``cancel`` (set once when a run is abandoned) skips
    every queued job."""

    def __init__(
        self,
        sandbox: Sandbox,
        store: Store | None,
        mode: str,
        workers: int | None,
        *,
        fresh: bool = False,
    ) -> None:
        self.sandbox = sandbox
        self.store = store
        self.fresh = fresh
        self.cancel = threading.Event()
        self.toolchain = toolchain(mode, sandbox)
        self.workers = max(1, workers or sandbox.size)
        self._meters = threading.local()
        #: jobs started ahead (``ahead``) by cache key, until a call for them takes them
        self._ahead: dict[str, Future] = {}
        self._ahead_lock = threading.Lock()

    @contextmanager
    def metered(self) -> Iterator[Meter]:
        """A ``Meter``: the seconds of the jobs this thread runs or reads from the cache
        meanwhile, at the seconds each took when it ran (a run served from the cache costs
        what it did: a budget spent this way is spent alike on every rerun); and their
        rounds one after the other (``path``): each ``run_all`` call costs its longest
        job, or its jobs' seconds over the workers where that is more, as a phase of
        rounds takes on the wall clock."""
        outer = getattr(self._meters, "value", None)
        meter = Meter()
        self._meters.value = meter
        try:
            yield meter
        finally:
            self._meters.value = outer
            if outer is not None:
                outer.job_s += meter.job_s
                outer.path_s += meter.path_s

    def _round(self, results: dict[str, tuple[JobResult, bool]]) -> None:
        meter = getattr(self._meters, "value", None)
        if meter is None or not results:
            return
        seconds = [r.spent_s for r, _ in results.values()]
        meter.path_s += max(max(seconds), sum(seconds) / self.workers)

    def _metered(self, result: JobResult) -> None:
        meter = getattr(self._meters, "value", None)
        if meter is not None:
            meter.job_s += result.spent_s

    def cached(self, job: Job) -> JobResult | None:
        if self.store is None or self.fresh:
            return None
        result = self.store.get_result(job.cache_key(self.toolchain), JobResult.from_json)
        return result if result is not None and result.valid_for(job) else None

    def store_result(self, job: Job, result: JobResult) -> None:
        """Keep what a sandbox returned, the moment it arrives (never a harness error),
        with the limit it hit, if one did (``limits.hit``), and the limits it ran under."""
        limit = hit(job, result)
        if limit is not None:
            result.extra["limit"] = limit
        if self.store is not None and result.status is not JobStatus.ERROR:
            data = result.to_json()
            data["extra"] = {
                **data.get("extra", {}),
                "timeout_s": job.timeout_s,
                "memory_mb": job.memory_mb,
            }
            self.store.put_result(job.cache_key(self.toolchain), data)

    def execute(
        self, job: Job, sandbox: Sandbox | None = None, on_progress: Callable | None = None
    ) -> tuple[JobResult, bool]:
        """Serve from the cache or run in the sandbox (and store what arrives);
        ``on_progress`` follows the job's checks where the sandbox can tell."""
        cached = self.cached(job)
        if cached is not None:
            self._metered(cached)
            return cached, True
        result = (sandbox or self.sandbox).run(job, on_progress)
        self.store_result(job, result)
        self._metered(result)
        return result, False

    def ahead(self, job: Job, then: Callable[[JobResult], None] | None = None) -> None:
        """Start ``job`` now in a thread of its own, beside whatever runs (it waits for a
        free sandbox worker like any job), unless the cache holds it or it is started
        already. The first later ``run_jobs`` call for the same job takes its result
        instead of running it again (and meters it then, for its caller); what arrives is
        stored as usual. ``then(result)``, when given, runs in that thread before the
        result is handed over (what it starts ahead is started before anyone waiting for
        this result goes on); its failure loses nothing but what it would have started."""
        if self.cancel.is_set() or self.cached(job) is not None:
            return
        key = job.cache_key(self.toolchain)
        with self._ahead_lock:
            if key in self._ahead:
                return
            future: Future = Future()
            self._ahead[key] = future

        def work() -> None:
            try:
                result = self.sandbox.run(job)
            except Exception as exc:  # noqa: BLE001 - a failure is data
                result = JobResult(JobStatus.ERROR, error=f"sandbox failure: {exc}")
            self.store_result(job, result)
            if then is not None:
                try:
                    then(result)
                except Exception:  # noqa: BLE001, S110 - work started early, or not at all
                    pass
            future.set_result(result)

        threading.Thread(target=work, name="mutant-gate-ahead", daemon=True).start()

    def _started_ahead(self, job: Job) -> Future | None:
        if not self._ahead:
            return None
        with self._ahead_lock:
            return self._ahead.pop(job.cache_key(self.toolchain), None)

    def run_all(self, jobs: dict[str, Job]) -> dict[str, tuple[JobResult, bool]]:
        """Run jobs in parallel, cache first; (result, cached) per key (fewer if cancelled)."""
        results: dict[str, tuple[JobResult, bool]] = {}
        for event in self.run_jobs(jobs):
            if event.result is not None:
                results[event.key] = (event.result, event.cached)
        self._round(results)
        return results

    def run_jobs(  # noqa: C901 - listed in tests/test_complexity.py
        self, jobs: dict[str, Job], sandbox: Sandbox | None = None
    ) -> Iterator[JobEvent]:
        """Run jobs in parallel (cache first); yield a ``JobEvent`` as each is served from
        the cache, starts and finishes.

        Calls may overlap (the explorer's stage 2 while a check runs): each stops only
        its own queued jobs when its consumer stops early; ``cancel`` skips every queued
        job of every call, and a call then ends with the results it has.
        """
        sandbox = sandbox or self.sandbox
        pending: list[str] = []
        started: dict[str, Future] = {}  # jobs started ahead: their results, awaited
        for key, job in jobs.items():
            future = self._started_ahead(job)
            if future is not None:
                started[key] = future
                pending.append(key)
                continue
            cached = self.cached(job)
            if cached is None:
                pending.append(key)
            else:
                self._metered(cached)
                yield JobEvent(Happened.CACHED, key, cached)
        finished: queue.Queue = queue.Queue()
        stop = threading.Event()

        def work(key: str) -> None:
            if stop.is_set() or self.cancel.is_set():
                finished.put(("skipped", key, None))
                return
            finished.put(("started", key, None))
            if key in started:  # already running (stored when it arrived)
                finished.put(("ahead", key, started[key].result()))
                return
            try:
                result = sandbox.run(jobs[key])
            except Exception as exc:  # noqa: BLE001 - a failure is data
                result = JobResult(JobStatus.ERROR, error=f"sandbox failure: {exc}")
            finished.put(("finished", key, result))

        todo: queue.SimpleQueue = queue.SimpleQueue()
        for key in pending:
            todo.put(key)

        def serve() -> None:
            while not stop.is_set():
                try:
                    key = todo.get_nowait()
                except queue.Empty:
                    return
                work(key)

        # Daemon threads, not an executor's: a job that never came back (a sandbox
        # that hangs) cannot keep the process from exiting.
        threads = [
            threading.Thread(target=serve, name=f"mutant-gate-job_{i}", daemon=True)
            for i in range(min(max(1, self.workers), len(pending)))
        ]
        interrupted = False
        try:
            for thread in threads:
                thread.start()
            remaining = len(pending)
            while remaining:
                kind, key, result = finished.get()
                if kind == "skipped":
                    remaining -= 1
                    continue
                if kind == "started":
                    yield JobEvent(Happened.STARTED, key)
                    continue
                remaining -= 1
                if kind == "finished":  # "ahead": stored when it arrived
                    self.store_result(jobs[key], result)
                self._metered(result)
                yield JobEvent(Happened.FINISHED, key, result)
        except (KeyboardInterrupt, SystemExit):
            # Ctrl-C, SIGTERM: leave at once; closing the sandbox ends the jobs in flight
            # (their threads then return an error that is never stored).
            interrupted = True
            raise
        finally:
            stop.set()  # queued jobs are dropped; those in flight end (awaited unless interrupted)
            for thread in threads if not interrupted else ():
                thread.join()
