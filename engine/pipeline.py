"""Orchestrates a run: load, mutate, baseline, then every mutant; yields events.

Stages: load the kernel file -> generate mutants -> run the original (it must
pass its own check; its time scales the mutants' timeouts) -> run each mutant
against own check + extra tests -> decide verdicts -> report. Every job result
is stored in the cache the moment it arrives, so a killed run resumes where it
stopped and a repeated run is served from the cache.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from importlib import metadata

from mutant_gate.cache import Store

from .errors import BadInput
from .events import (
    BaselineFinished,
    BaselineStarted,
    Event,
    MutantFinished,
    MutantStarted,
    RunFinished,
    RunStarted,
)
from .kernel_file import KernelFile, load_kernel_file
from .mutate import generate_mutants, select_operators
from .records import Mutant, MutantOutcome
from .report import build_report
from .sandbox import Sandbox
from .sandbox.job import Job, JobResult, JobStatus
from .verdicts import decide, summarize_error


@dataclass(frozen=True)
class RunSettings:
    kernel_path: str
    tests: tuple[str, ...] = ()
    operators: str | None = None
    workers: int | None = None
    timeout_s: float = 120.0  # limit for the original's own check
    timeout_factor: float = 3.0  # mutant limit = factor * original time + base
    timeout_base_s: float = 5.0
    memory_mb: int = 4096
    seed: int = 0
    cache_dir: str = ".mutant-gate"
    use_cache: bool = True
    fail_under: float | None = None
    mode: str = "interpret"
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def toolchain(mode: str) -> dict:
    """Versions that key the cache; read without importing torch/triton."""

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "missing"

    return {
        "python": sys.version.split()[0],
        "torch": version("torch"),
        "triton": version("triton"),
        "mode": mode,
    }


class Run:
    """One run of the pipeline; iterate ``events()`` to drive it."""

    def __init__(self, settings: RunSettings, sandbox: Sandbox, store: Store | None) -> None:
        self.settings = settings
        self.sandbox = sandbox
        self.store = store if settings.use_cache else None
        self.cancel = threading.Event()
        self.toolchain = toolchain(settings.mode)
        self.outcomes: dict[str, MutantOutcome] = {}

    # -- stages -------------------------------------------------------------
    def load(self) -> tuple[KernelFile, list[Mutant], float]:
        kernel = load_kernel_file(self.settings.kernel_path, self.settings.tests)
        try:
            operators = select_operators(self.settings.operators)
        except ValueError as exc:
            raise BadInput(f"--operators: {exc}") from None
        start = time.perf_counter()
        mutants = generate_mutants(kernel.source, kernel.path, operators)
        return kernel, mutants, time.perf_counter() - start

    def job_for(self, kernel: KernelFile, source: str | None, timeout_s: float) -> Job:
        return Job(
            files=kernel.files(source),
            checks=kernel.checks,
            mode=self.settings.mode,
            seed=self.settings.seed,
            timeout_s=round(timeout_s, 1),
            memory_mb=self.settings.memory_mb,
        )

    def cached(self, job: Job) -> JobResult | None:
        if self.store is None:
            return None
        result = self.store.get_result(job.cache_key(self.toolchain), JobResult.from_json)
        return result if result is not None and result.valid_for(job) else None

    def store_result(self, job: Job, result: JobResult) -> None:
        """Keep what a sandbox returned, the moment it arrives (never a harness error)."""
        if self.store is not None and result.status is not JobStatus.ERROR:
            data = result.to_json()
            data["extra"] = {**data.get("extra", {}), "timeout_s": job.timeout_s}
            self.store.put_result(job.cache_key(self.toolchain), data)

    def execute(self, job: Job) -> tuple[JobResult, bool]:
        """Serve from the cache or run in the sandbox (and store what arrives)."""
        cached = self.cached(job)
        if cached is not None:
            return cached, True
        result = self.sandbox.run(job)
        self.store_result(job, result)
        return result, False

    def baseline(self, kernel: KernelFile) -> tuple[JobResult, bool]:
        result, cached = self.execute(self.job_for(kernel, None, self.settings.timeout_s))
        name = kernel.path
        if result.status is JobStatus.TIMEOUT:
            raise BadInput(
                f"{name}: the original's own check timed out after {self.settings.timeout_s:g} s"
            )
        if result.status is not JobStatus.PASSED:
            why = summarize_error(result.error) or result.status.value
            raise BadInput(
                f"{name}: the original fails its own check ({result.status.value}): {why}"
            )
        return result, cached

    def mutant_timeout(self, baseline: JobResult) -> float:
        return baseline.duration_s * self.settings.timeout_factor + self.settings.timeout_base_s

    # -- driver ---------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        kernel, mutants, generation_s = self.load()
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + kernel.sha256[:8]
        yield RunStarted(run_id, kernel, tuple(mutants), generation_s)
        yield BaselineStarted(self.settings.timeout_s)
        baseline, baseline_cached = self.baseline(kernel)
        timeout = self.mutant_timeout(baseline)
        yield BaselineFinished(baseline, baseline_cached, timeout)

        record = {"run_id": run_id, "settings": self.settings.to_json(), "kernel": kernel.path}
        if self.store is not None:
            self.store.put_run(run_id, {**record, "report": None})

        finished: queue.Queue = queue.Queue()
        jobs = {m.id: self.job_for(kernel, m.source, timeout) for m in mutants}
        # Cached results first, without touching the sandbox.
        pending: list[Mutant] = []
        done = 0
        for mutant in mutants:
            cached = self.cached(jobs[mutant.id])
            if cached is None:
                pending.append(mutant)
                continue
            done += 1
            yield MutantFinished(mutant, self._outcome(mutant, cached, True), done, len(mutants))

        def work(mutant: Mutant) -> None:
            if self.cancel.is_set():
                return
            finished.put(("started", mutant, None))
            try:
                result = self.sandbox.run(jobs[mutant.id])
            except Exception as exc:  # noqa: BLE001 - a failure is data
                result = JobResult(JobStatus.ERROR, error=f"sandbox failure: {exc}")
            finished.put(("finished", mutant, result))

        workers = max(1, self.settings.workers or 1)
        pool = ThreadPoolExecutor(workers, thread_name_prefix="mutant-gate-job")
        try:
            for mutant in pending:
                pool.submit(work, mutant)
            remaining = len(pending)
            while remaining:
                kind, mutant, result = finished.get()
                if kind == "started":
                    yield MutantStarted(mutant)
                    continue
                remaining -= 1
                done += 1
                if self.store is not None and result.status is not JobStatus.ERROR:
                    self.store.put_result(
                        jobs[mutant.id].cache_key(self.toolchain), result.to_json()
                    )
                yield MutantFinished(
                    mutant, self._outcome(mutant, result, False), done, len(mutants)
                )
        finally:
            self.cancel.set()
            pool.shutdown(wait=True, cancel_futures=True)

        report = build_report(
            run_id=run_id,
            kernel=kernel,
            mutants=mutants,
            outcomes=self.outcomes,
            baseline=baseline,
            settings=self.settings.to_json(),
            toolchain=self.toolchain,
            sandbox={
                "backend": self.sandbox.name,
                "workers": workers,
                "network_cut": baseline.network_cut,
                "mutant_timeout_s": round(timeout, 2),
                "mutant_generation_s": round(generation_s, 4),
            },
        )
        if self.store is not None:
            self.store.put_run(run_id, {**record, "report": report})
        yield RunFinished(report)

    def _outcome(self, mutant: Mutant, result: JobResult, cached: bool) -> MutantOutcome:
        verdict, by, reason = decide(result)
        outcome = MutantOutcome(mutant.id, verdict, by, reason, result.duration_s, cached)
        self.outcomes[mutant.id] = outcome
        return outcome
