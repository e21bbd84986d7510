"""Orchestrates a run: load, mutate, baseline, then every mutant; yields events.

Stages: load the kernel file -> generate mutants -> run the original (it must
pass its own check; its time scales the mutants' timeouts) -> run each mutant
against own check + extra tests -> decide verdicts -> report. Every job result
is stored in the cache the moment it arrives, so a killed run resumes where it
stopped and a repeated run is served from the cache.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from importlib import metadata

from mutant_gate.cache import Store

from .changes import changed_functions
from .checks import install_checks
from .errors import BadInput
from .events import (
    BaselineFinished,
    BaselineStarted,
    Event,
    MutantFinished,
    MutantStarted,
    MutantUpdated,
    OwnCheckJudged,
    RunFinished,
    RunStarted,
)
from .kernel_file import OWN_CHECK, KernelFile, TestFile, load_kernel_file
from .mutate import generate_mutants, select_operators
from .own_check import NOTHING_ASSERTED
from .project import jit_callers
from .records import Mutant, MutantOutcome, Verdict
from .report import build_report
from .sandbox import Sandbox
from .sandbox.job import Check, Job, JobResult, JobStatus
from .settings import RunSettings
from .verdicts import decide, summarize_error
from .writers import install_writers


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


def select_tests(
    kernel: KernelFile, checks: tuple[Check, ...], coverage: dict[str, dict], function: str
) -> tuple[Check, ...]:
    """Each test file's cases that launch ``function`` (or a kernel calling it), fastest first."""
    reach = jit_callers(kernel.source, function)
    chosen = []
    for check in checks:
        rel = os.path.relpath(check.path, kernel.project.root)
        cases = sorted(
            (info["duration_s"], nodeid.split("::", 1)[1])
            for nodeid, info in coverage.items()
            if nodeid.split("::", 1)[0] == rel and reach & set(info["functions"])
        )
        if cases:
            chosen.append(replace(check, select=tuple(name for _, name in cases)))
    return tuple(chosen)


def load(settings: RunSettings) -> tuple[KernelFile, list[Mutant], float, dict | None]:
    """Read the kernel file and plant its mutants: (kernel, mutants, seconds, changed_since).

    Bad input (a missing or broken file, unknown operators, a bad git ref) raises
    ``BadInput`` here, before anything runs."""
    kernel = load_kernel_file(settings.kernel_path, settings.tests, settings.project_root)
    try:
        operators = select_operators(settings.operators)
    except ValueError as exc:
        raise BadInput(f"--operators: {exc}") from None
    start = time.perf_counter()
    mutants = generate_mutants(kernel.source, kernel.path, operators)
    changed = None
    if settings.changed_since is not None:
        names = [f.name for f in kernel.jit_functions]
        functions = changed_functions(kernel.path, kernel.source, names, settings.changed_since)
        mutants = [m for m in mutants if m.function in functions]
        changed = {
            "ref": settings.changed_since,
            "functions": functions,
            "unchanged": [n for n in names if n not in functions],
        }
    return kernel, mutants, time.perf_counter() - start, changed


class Run:
    """One run of the pipeline; iterate ``events()`` to drive it."""

    def __init__(
        self,
        settings: RunSettings,
        sandbox: Sandbox,
        store: Store | None,
        *,
        other_sandbox: Sandbox | None = None,
    ) -> None:
        self.settings = settings
        self.sandbox = sandbox
        self.store = store if settings.use_cache else None
        self.cancel = threading.Event()
        self.toolchain = toolchain(settings.mode)
        # A started remote sandbox knows the versions its image really runs: key by those.
        remote = getattr(sandbox, "versions", None) or {}
        self.toolchain.update({k: remote[k] for k in ("python", "torch", "triton") if k in remote})
        self.outcomes: dict[str, MutantOutcome] = {}
        #: project mode: the original's test cases {nodeid: {functions, duration_s}}
        self.coverage: dict[str, dict] | None = None
        #: ``--all-configs``: how many autotune configs each mutant runs under
        self.configs = 1
        #: ``--compare-modes``: a sandbox of the other mode
        self.other_sandbox = other_sandbox
        #: Extra report fields per mutant id (compile, oracle, claims...), filled by later stages.
        self.details: dict[str, dict] = {}
        #: Extra top-level report fields (tokens, check summaries...).
        self.report_extra: dict = {}
        #: Stages run in order on the mutants still surviving: writers first, then checks.
        #: Each is ``stage(run, survivors) -> Iterator[Event]``.
        self.survivor_stages: list[Callable[[Run, list[Mutant]], Iterator[Event]]] = []
        #: Stages run after the baseline and before the mutants (stage-1 writers), each
        #: ``stage(run) -> Iterator[Event]``; tests they accept (``add_tests``) join every
        #: mutant's job.
        self.pre_mutant_stages: list[Callable[[Run], Iterator[Event]]] = []
        #: Test writers: stage 1 before the mutants, probe / stage 2 first among survivor stages.
        self.writers = install_writers(self)
        install_checks(self)  # compile-check, diff-oracle: after the writers' stages

    # -- stages -------------------------------------------------------------
    def load(self) -> tuple[KernelFile, list[Mutant], float]:
        kernel, mutants, generation_s, changed = load(self.settings)
        if changed is not None:
            self.report_extra["changed_since"] = changed
        return kernel, mutants, generation_s

    def job_for(
        self,
        kernel: KernelFile,
        source: str | None,
        timeout_s: float,
        mode: str | None = None,
        *,
        function: str | None = None,
        config: int = 0,
    ) -> Job:
        """The job for the original (``source`` None) or a mutant of ``function``.

        In project mode a mutant runs only the test cases that reach its function
        (``select_tests``), fastest first; the original runs every case, to the end.
        """
        mode = mode or self.settings.mode
        checks = kernel.checks
        if kernel.project is not None and function is not None and self.coverage is not None:
            checks = select_tests(kernel, checks, self.coverage, function)
        return Job(
            files=kernel.files(source),
            checks=checks,
            mode=mode,
            seed=self.settings.seed,
            timeout_s=round(timeout_s, 1),
            memory_mb=self.settings.memory_mb,
            sanitize=self.settings.sanitize and mode == "compiled",
            stop_on_first_failure=source is not None or kernel.project is None,
            project=kernel.project.to_json() if kernel.project is not None else None,
            autotune_config=config,
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

    def execute(self, job: Job, sandbox: Sandbox | None = None) -> tuple[JobResult, bool]:
        """Serve from the cache or run in the sandbox (and store what arrives)."""
        cached = self.cached(job)
        if cached is not None:
            return cached, True
        result = (sandbox or self.sandbox).run(job)
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
            failing = result.first_failure
            if failing is not None and failing.name == "import":
                raise BadInput(f"{name}: {summarize_error(failing.message)}")
            if failing is not None and "::" in failing.name:
                why = f"{failing.name.split('::', 1)[1]}: {why}"
            raise BadInput(
                f"{name}: the original fails its own check ({result.status.value}): {why}"
            )
        if self.settings.all_configs:
            result = self.other_configs(kernel, result)
        if kernel.project is not None and self.settings.select_tests:
            self.coverage = result.extra.get("coverage", {})
            cases = len(self.coverage)
            self.report_extra["selection"] = {"suite_cases": cases, "cases_run": 0, "mutants": 0}
        return result, cached

    def judge_own_check(self, kernel: KernelFile) -> Iterator[Event]:
        """Run the own check once with every kernel launch skipped and empty tensors -31337
        (``harness/null_run.py``): if it still passes, it cannot see a wrong result,
        whatever its source says (``assert x.device == DEVICE`` is not a check of the
        output). Falls back on reading the source when that run says nothing."""
        own = tuple(c for c in kernel.checks if c.name == OWN_CHECK)  # as "kinds" counts them
        if not own:
            return
        record = self.report_extra["own_check"]
        job = replace(
            self.job_for(kernel, None, self.settings.timeout_s), checks=own, null_launches=True
        )
        result, _ = self.execute(job)
        skipped = int(result.extra.get("null_run", {}).get("skipped_launches", 0))
        if result.status is JobStatus.PASSED and skipped:
            asserts = False
            launches = f"{skipped} kernel launch" + ("es" if skipped != 1 else "")
            evidence = f"it still passes with its {launches} skipped, outputs left as -31337"
        elif result.status is JobStatus.PASSED:
            asserts = False
            evidence = "it launches no kernel at all"
        elif result.status in (JobStatus.FAILED, JobStatus.CRASH, JobStatus.BOUNDS):
            asserts = True
            why = summarize_error(result.error) or result.status.value
            why = why if len(why) <= 120 else why[:117].rstrip() + "..."
            evidence = f"it fails when no kernel runs ({why})"
        else:
            asserts = kernel.asserts
            what = "finds a result check" if asserts else "finds no result check"
            evidence = (
                f"reading its source {what} (the run without kernels ended "
                f"{result.status.value}: {summarize_error(result.error) or 'no detail'})"
            )
        note = "" if asserts else NOTHING_ASSERTED
        record.update(asserts=asserts, evidence=evidence, note=note)
        yield OwnCheckJudged(asserts, evidence, note)

    def mutant_timeout(self, baseline: JobResult) -> float:
        return baseline.duration_s * self.settings.timeout_factor + self.settings.timeout_base_s

    # -- driver ---------------------------------------------------------------
    def events(self) -> Iterator[Event]:
        """Drive the whole run, yielding events; the last one is ``RunFinished``."""
        kernel, mutants, generation_s = self.load()
        self.run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + kernel.sha256[:8]
        self.kernel, self.mutants = kernel, mutants
        self.report_extra["own_check"] = {
            "kinds": [c.kind.value for c in kernel.checks if c.name == OWN_CHECK],
            "module_level": kernel.module_check,
            "asserts": kernel.asserts,
            "evidence": "read from its source",  # until judge_own_check runs it
            "note": "" if kernel.asserts else NOTHING_ASSERTED,
        }
        yield RunStarted(self.run_id, kernel, tuple(mutants), generation_s)
        yield BaselineStarted(self.settings.timeout_s)
        baseline, baseline_cached = self.baseline(kernel)
        self.timeout_s = self.mutant_timeout(baseline)
        yield BaselineFinished(baseline, baseline_cached, self.timeout_s)
        yield from self.judge_own_check(kernel)
        self.save(None)

        for pre in self.pre_mutant_stages:
            yield from pre(self)
        if self.kernel is not kernel:  # written tests join every job: time the whole set
            kernel = self.kernel
            baseline, baseline_cached = self.baseline(kernel)
            self.timeout_s = self.mutant_timeout(baseline)
            yield BaselineFinished(baseline, baseline_cached, self.timeout_s)
        self.baseline_result, self.generation_s = baseline, generation_s

        yield from self.run_mutants(kernel, mutants)
        if self.other_sandbox is not None:
            yield from self.compare_modes(kernel, mutants)
        for stage in self.survivor_stages:
            # A stage may also take other verdicts (the oracle checks equivalence claims).
            wanted = getattr(stage, "verdicts", (Verdict.SURVIVED,))
            targets = [m for m in mutants if self.outcomes[m.id].verdict in wanted]
            if targets:
                yield from stage(self, targets)

        report = self.report()
        self.save(report)
        yield RunFinished(report)

    def report(self) -> dict:
        """The JSON report as things stand (again after a later stage, e.g. the TUI's stage 2)."""
        baseline = self.baseline_result
        return build_report(
            run_id=self.run_id,
            kernel=self.kernel,
            mutants=self.mutants,
            outcomes=self.outcomes,
            details=self.details,
            baseline=baseline,
            settings=self.settings.to_json(),
            toolchain=self.toolchain,
            sandbox={
                "backend": self.sandbox.name,
                "workers": self.workers,
                "network_cut": baseline.network_cut,
                "isolation": baseline.extra.get("isolation", {}),
                "mutant_timeout_s": round(self.timeout_s, 2),
                "mutant_generation_s": round(self.generation_s, 4),
            },
            extra=self.report_extra,
        )

    def add_tests(self, tests: list[TestFile]) -> None:
        """Tests a writer accepted: from now on part of every job ``job_for`` builds."""
        self.kernel = replace(self.kernel, tests=self.kernel.tests + tuple(tests))

    def save(self, report: dict | None) -> None:
        """The run record that replay and reports read (``report`` None while running)."""
        if self.store is not None:
            record = {
                "run_id": self.run_id,
                "settings": self.settings.to_json(),
                "kernel": self.kernel.path,
            }
            self.store.put_run(self.run_id, {**record, "report": report})

    @property
    def workers(self) -> int:
        return max(1, self.settings.workers or getattr(self.sandbox, "size", 1))

    def run_jobs(
        self, jobs: dict[str, Job], sandbox: Sandbox | None = None
    ) -> Iterator[tuple[str, str, JobResult | None]]:
        """Run jobs in parallel (cache first); yield ("started"|"finished", key, result).

        Each result is stored the moment it arrives. ``sandbox`` defaults to the run's.
        Calls may overlap (the explorer's stage 2 while a check runs): each stops only
        its own queued jobs when its consumer stops early; ``cancel`` (the run's, set
        once when the run is abandoned) skips every queued job of every call, and a
        call then ends with the results it has.
        """
        sandbox = sandbox or self.sandbox
        pending: list[str] = []
        for key, job in jobs.items():
            cached = self.cached(job)
            if cached is None:
                pending.append(key)
            else:
                yield "cached", key, cached
        finished: queue.Queue = queue.Queue()
        stop = threading.Event()

        def work(key: str) -> None:
            if stop.is_set() or self.cancel.is_set():
                finished.put(("skipped", key, None))
                return
            finished.put(("started", key, None))
            try:
                result = sandbox.run(jobs[key])
            except Exception as exc:  # noqa: BLE001 - a failure is data
                result = JobResult(JobStatus.ERROR, error=f"sandbox failure: {exc}")
            finished.put(("finished", key, result))

        pool = ThreadPoolExecutor(self.workers, thread_name_prefix="mutant-gate-job")
        try:
            for key in pending:
                pool.submit(work, key)
            remaining = len(pending)
            while remaining:
                kind, key, result = finished.get()
                if kind == "skipped":
                    remaining -= 1
                    continue
                if kind == "finished":
                    remaining -= 1
                    self.store_result(jobs[key], result)
                yield kind, key, result
        finally:
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)

    def other_configs(self, kernel: KernelFile, baseline: JobResult) -> JobResult:
        """``--all-configs``: the original must pass under every autotune config too.

        Returns the slowest of the baseline runs (it sets the mutants' limit).
        """
        self.configs = max(baseline.extra.get("autotune_configs", {}).values(), default=1)
        self.report_extra["autotune"] = {"configs": self.configs, "all_configs": True}
        slowest = baseline
        for config in range(1, self.configs):
            job = self.job_for(kernel, None, self.settings.timeout_s, config=config)
            result, _ = self.execute(job)
            if result.status is not JobStatus.PASSED:
                why = summarize_error(result.error) or result.status.value
                raise BadInput(
                    f"{kernel.path}: the original fails its own check with autotune config "
                    f"{config + 1} of {self.configs}: {why}"
                )
            slowest = max(slowest, result, key=lambda r: r.duration_s)
        return slowest

    def run_mutants(self, kernel: KernelFile, mutants: list[Mutant]) -> Iterator[Event]:
        by_id = {m.id: m for m in mutants}
        if self.configs > 1:
            yield from self._run_mutants_all_configs(kernel, mutants)
            return
        jobs = {
            m.id: self.job_for(kernel, m.source, self.timeout_s, function=m.function)
            for m in mutants
        }
        if "selection" in self.report_extra:
            selection = self.report_extra["selection"]
            for mutant_id, job in jobs.items():
                cases = sum(len(c.select) for c in job.checks)
                self.details.setdefault(mutant_id, {})["tests_selected"] = cases
                selection["cases_run"] += cases
                selection["mutants"] += 1
        done = 0
        for kind, mutant_id, result in self.run_jobs(jobs):
            mutant = by_id[mutant_id]
            if kind == "started":
                yield MutantStarted(mutant)
                continue
            done += 1
            outcome = self._outcome(mutant, result, kind == "cached")
            yield MutantFinished(mutant, outcome, done, len(mutants))

    def _run_mutants_all_configs(
        self, kernel: KernelFile, mutants: list[Mutant]
    ) -> Iterator[Event]:
        """Each mutant once per autotune config; the first config that kills it decides."""
        by_id = {m.id: m for m in mutants}
        jobs = {
            f"{m.id}@{c}": self.job_for(
                kernel, m.source, self.timeout_s, function=m.function, config=c
            )
            for m in mutants
            for c in range(self.configs)
        }
        results: dict[str, dict[int, tuple[JobResult, bool]]] = {m.id: {} for m in mutants}
        done = 0
        for kind, key, result in self.run_jobs(jobs):
            mutant_id, config = key.split("@")
            mutant = by_id[mutant_id]
            if kind == "started":
                if not results[mutant_id]:
                    yield MutantStarted(mutant)
                continue
            results[mutant_id][int(config)] = (result, kind == "cached")
            if len(results[mutant_id]) < self.configs:
                continue
            done += 1
            ordered = [results[mutant_id][c] for c in range(self.configs)]
            config, (chosen, cached) = next(
                ((c, r) for c, r in enumerate(ordered) if decide(r[0])[0] is not Verdict.SURVIVED),
                (self.configs - 1, ordered[-1]),
            )
            outcome = self._outcome(mutant, chosen, all(c for _, c in ordered))
            if outcome.verdict is not Verdict.SURVIVED:
                outcome = replace(
                    outcome,
                    reason=f"{outcome.reason} (autotune config {config + 1} of {self.configs})",
                )
                self.outcomes[mutant_id] = outcome
            yield MutantFinished(mutant, outcome, done, len(mutants))

    def compare_modes(self, kernel: KernelFile, mutants: list[Mutant]) -> Iterator[Event]:
        """``--compare-modes``: every mutant again in the other mode; report disagreements.

        The verdicts stay the primary mode's; each mutant's row gets ``modes``
        and the report ``modes`` {compared, agree, disagreements}.
        """
        primary = self.settings.mode
        other = "compiled" if primary == "interpret" else "interpret"
        baseline, _ = self.execute(
            self.job_for(kernel, None, self.settings.timeout_s, other), self.other_sandbox
        )
        if baseline.status is not JobStatus.PASSED:
            self.report_extra["modes"] = {
                "compared": [primary, other],
                "skipped": f"the original fails its own check in {other} mode: "
                + (summarize_error(baseline.error) or baseline.status.value),
            }
            return
        timeout = self.mutant_timeout(baseline)
        by_id = {m.id: m for m in mutants}
        jobs = {m.id: self.job_for(kernel, m.source, timeout, other) for m in mutants}
        disagreements = []
        for kind, mutant_id, result in self.run_jobs(jobs, self.other_sandbox):
            if kind == "started":
                continue
            verdict, by, reason = decide(result)
            mine = self.outcomes[mutant_id]
            modes = {
                primary: {"verdict": mine.verdict.value, "by": mine.by, "reason": mine.reason},
                other: {"verdict": verdict.value, "by": by, "reason": reason},
            }
            self.details.setdefault(mutant_id, {})["modes"] = modes
            killed = [v["verdict"] == "killed" for v in modes.values()]
            if killed[0] != killed[1]:
                m = by_id[mutant_id]
                disagreements.append({"id": m.id, "operator": m.operator, "line": m.line, **modes})
        self.report_extra["modes"] = {
            "compared": [primary, other],
            "agree": len(mutants) - len(disagreements),
            "disagreements": disagreements,
        }
        yield from ()

    def update(self, mutant: Mutant, outcome: MutantOutcome) -> MutantUpdated:
        """A later stage changes a verdict (a killer test, a compile failure)."""
        self.outcomes[mutant.id] = outcome
        return MutantUpdated(mutant, outcome)

    def rerun(self, mutant: Mutant, *, force: bool = False) -> Iterator[Event]:
        """Judge one mutant again after the baseline: from the cache, or (``force``) in the
        sandbox, storing what arrives. Yields ``MutantStarted`` then ``MutantUpdated``."""
        job = self.job_for(self.kernel, mutant.source, self.timeout_s)
        yield MutantStarted(mutant)
        if force:
            result, cached = self.sandbox.run(job), False
            self.store_result(job, result)
        else:
            result, cached = self.execute(job)
        verdict, by, reason = decide(result)
        yield self.update(
            mutant, MutantOutcome(mutant.id, verdict, by, reason, result.duration_s, cached)
        )

    def _outcome(self, mutant: Mutant, result: JobResult, cached: bool) -> MutantOutcome:
        verdict, by, reason = decide(result)
        outcome = MutantOutcome(mutant.id, verdict, by, reason, result.duration_s, cached)
        self.outcomes[mutant.id] = outcome
        return outcome
