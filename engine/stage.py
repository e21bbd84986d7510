"""The stage contract: what a writer or a check is, and all that it may touch.

A ``Stage`` has a name, says which mutants it applies to (by verdict), and runs as
``stage.run(ctx, mutants) -> Iterator[Event]`` against a ``StageContext``: submit
jobs cache first, read the baseline and the kernel, record into the verdict ledger,
add proved tests. It never sees the driver (``engine/pipeline.py``), so writers and
checks import this module, never the pipeline.

Two phases: ``before_mutants`` stages run after the baseline and before any mutant
(stage 1 writes tests that then join every mutant's job); ``survivors`` stages run in
order on the mutants whose verdict they apply to, after every mutant is judged.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from mutant_gate.cache import Store

from .events import Event, MutantFinished, MutantUpdated
from .job import Check, CheckKind, Job, JobResult
from .jobs import JobEvent, JobRunner
from .kernel_file import EXTRA_TESTS, OWN_CHECK, KernelFile, TestFile
from .project import jit_callers, record_reaches
from .records import Mutant, MutantOutcome, Verdict
from .sandbox import Sandbox
from .settings import RunSettings
from .verdicts import Ledger

BEFORE_MUTANTS = "before_mutants"
SURVIVORS = "survivors"


@dataclass(frozen=True)
class Stage:
    """A named step of a run. ``verdicts``: the mutants it applies to (survivors phase)."""

    name: str
    run: Callable[[StageContext, list[Mutant]], Iterator[Event]]
    verdicts: tuple[Verdict, ...] = (Verdict.SURVIVED,)
    phase: str = SURVIVORS
    #: starts the jobs of the original alone that the stage's run will ask for first
    #: (survivors phase; ``StageContext.start_ahead``): the driver calls it beside the
    #: mutant phase at the first survivor of each function (a job started already is not
    #: started again), and the stage's own call for those jobs takes their results
    #: (``JobRunner.ahead``)
    ahead: Callable[[StageContext], None] | None = None

    def targets(self, ctx: StageContext, mutants: list[Mutant] | None = None) -> list[Mutant]:
        """The mutants (default: the run's) whose verdict this stage applies to now; never
        one that no check reaches (nothing a stage does can give evidence on it)."""
        chosen = ctx.mutants if mutants is None else mutants
        return [
            m
            for m in chosen
            if ctx.ledger.verdict(m.id) in self.verdicts and ctx.ledger.reached(m.id)
        ]


def selection_seconds(whole_s: float, cases_s: float, selected_s: float) -> float:
    """The original's time on a selection of its test cases: its time outside the cases
    (``whole_s`` less all its cases' ``cases_s``, never below 0) plus the selected cases'.
    The cases' own times can add up to more than the whole (a real library's suite spread
    over the workers, each case timed with what the harness does around it): taken from the
    selection instead, that gave every mutant of a module 0 s, and the base limit alone."""
    return max(whole_s - cases_s, 0.0) + selected_s


def _seconds_by(info: dict, key: str) -> float:
    """A case's seconds on the original: ``key`` (CPU seconds) where recorded, else wall."""
    return float(info.get(key, info["duration_s"]))


class StageContext:
    """What a stage may use. Built by the driver; stages never see the driver itself."""

    def __init__(
        self,
        settings: RunSettings,
        jobs: JobRunner,
        ledger: Ledger,
        kernel: KernelFile,
        mutants: list[Mutant],
    ) -> None:
        # Every field is read-only to a stage (a property): the driver sets them through
        # ``set_baseline``, ``set_mutants`` and ``set_configs``; a stage changes the run only
        # through the ledger and ``add_tests``.
        self._settings = settings
        self._jobs = jobs
        self._ledger = ledger
        self._kernel = kernel
        self._mutants = list(mutants)
        #: the original's passing job (set once the baseline ran)
        self._baseline: JobResult | None = None
        #: each mutant's time limit, from the baseline
        self._timeout_s: float = settings.timeout_s
        #: the test cases a mutant may be spared: {nodeid: {functions, duration_s}}, which
        #: jit functions each launched on the original and how long it took. Project mode:
        #: the baseline's; a kernel file's own tests: the baseline's, and each written
        #: test's proof on the original (``add_tests``). None: run every test (no record).
        self._coverage: dict[str, dict] | None = None
        #: the nodeids of ``coverage`` the baseline's run measured (part of its time)
        self._baseline_cases: frozenset[str] = frozenset()
        #: ``--all-configs``: how many autotune configs each mutant runs under
        self._configs = 1
        #: what a stage hands to its own later part in this run (``hand_on``/``take``):
        #: jobs its ``ahead`` started beside the mutant phase, for its run to take
        self._handed: dict[str, object] = {}
        self._handed_lock = threading.Lock()

    # -- the driver's (``pipeline``, ``baseline``, ``rerun``): never a stage's -------------
    def set_baseline(self, result: JobResult) -> None:
        """The original passed: its run, and each mutant's limit from its time."""
        self._baseline = result
        self._timeout_s = self.mutant_timeout(result.spent_s)

    def set_mutants(self, mutants: list[Mutant]) -> None:
        """The mutants a rerun carries over, in the recorded run's order."""
        self._mutants = list(mutants)

    def set_configs(self, configs: int) -> None:
        self._configs = configs

    def deselect(self, keyword: str) -> None:
        """The original passed only with cases deselected by name (``baseline``'s
        ``--case-time`` rerun of an original out of time): every later job too."""
        self._settings = replace(self._settings, keyword=keyword)

    # -- what a stage reads (read-only) ----------------------------------------------------
    settings = property(lambda self: self._settings)
    jobs = property(lambda self: self._jobs)
    ledger = property(lambda self: self._ledger)
    kernel = property(lambda self: self._kernel)
    baseline = property(lambda self: self._baseline)
    timeout_s = property(lambda self: self._timeout_s)
    coverage = property(lambda self: self._coverage)
    baseline_cases = property(lambda self: self._baseline_cases)
    configs = property(lambda self: self._configs)

    @property
    def mutants(self) -> list[Mutant]:
        return list(self._mutants)

    @property
    def workers(self) -> int:
        """How many jobs run at once (the job runner's workers)."""
        return self._jobs.workers

    # -- what a stage reads ------------------------------------------------------------
    @property
    def store(self) -> Store | None:
        """The cache (model replies are stored there too); None with ``--no-cache``."""
        return self.jobs.store

    @property
    def cancel(self):
        return self.jobs.cancel

    def mutant_timeout(self, original_s: float) -> float:
        """A mutant's limit from the original's time: ``factor * time + base``."""
        return original_s * self.settings.timeout_factor + self.settings.timeout_base_s

    def limit_words(self, job: Job) -> str:
        """How ``job``'s CPU limit was set, in words: ``the limit: the original's 1.1 CPU s
        x 3 + 5``."""
        original = self.original_s(job.checks) if self.baseline is not None else 0.0
        s = self.settings
        return (
            f"the limit: the original's {original:.2f} CPU s x {s.timeout_factor:g} + "
            f"{s.timeout_base_s:g}"
        )

    def original_s(self, checks: tuple[Check, ...], warm: bool = False) -> float:
        """The original's time on ``checks`` (a mutant's selection): the baseline's time
        less its test cases, plus the cases ``checks`` run, each at its time on the
        original. The baseline's whole time where a test file's cases are unknown.
        ``warm``: less the imports a warm runner keeps loaded (``harness/imports.py``),
        what a mutant's job on a runner that ran a job before pays (the estimate); a
        limit keeps them, as a job on a fresh runner pays them."""
        baseline = self.baseline
        if baseline is None:
            return self.settings.timeout_s
        key = "cpu_s" if baseline.cpu_s > 0 else "duration_s"  # CPU seconds where measured
        imports = baseline.extra.get("imports") or {}
        kept = float(imports.get("cpu_s" if key == "cpu_s" else "wall_s", 0.0)) if warm else 0.0
        whole = max(baseline.spent_s - kept, 0.0)
        if self.coverage is None:
            return whole
        everyone = sum(_seconds_by(self.coverage[n], key) for n in self.baseline_cases)
        selected = self._selected_seconds(checks, key)
        return whole if selected is None else selection_seconds(whole, everyone, selected)

    def _selected_seconds(self, checks: tuple[Check, ...], key: str) -> float | None:
        """The original's seconds (``key``: CPU or wall) on the test cases ``checks``
        select; None where a test file's cases are unknown."""
        selected = 0.0
        for check in (c for c in checks if c.name == EXTRA_TESTS):
            mine = file_cases(self.kernel, check, self.coverage)
            if not mine:
                return None
            selected += sum(_seconds_by(mine[n], key) for n in check.select or mine if n in mine)
        return selected

    # -- jobs ------------------------------------------------------------------------
    def job_for(
        self,
        source: str | None,
        timeout_s: float,
        mode: str | None = None,
        *,
        function: str | None = None,
        config: int = 0,
    ) -> Job:
        """The checks' job for the original (``source`` None) or a mutant of ``function``.

        A mutant runs its own check, then only the test cases that launch its function
        (``select_tests``), fastest first; the original runs every case, to the end.
        """
        kernel = self.kernel
        mode = mode or self.settings.mode
        return Job(
            files=kernel.files(source),
            checks=self.checks_for(function),
            mode=mode,
            seed=self.settings.seed,
            timeout_s=round(timeout_s, 1),
            memory_mb=self.settings.memory_mb,
            sanitize=self.settings.sanitize and mode == "compiled",
            stop_on_first_failure=source is not None or kernel.project is None,
            project=kernel.project.to_json() if kernel.project is not None else None,
            autotune_config=config,
            poison_undefined=self.settings.poison_undefined,
            interpreter=self.settings.interpreter,
            trace_lines=source is None and mode == "interpret" and kernel.project is None,
        )

    def checks_for(self, function: str | None) -> tuple[Check, ...]:
        """The checks of a job for the original (``function`` None) or a mutant of
        ``function``: pytest's own selection, then the cases that launch it
        (``select_tests``, from the original's record)."""
        kernel = self.kernel
        checks = with_pytest_selection(kernel, kernel.checks, self.settings)
        if function is not None and self.coverage is not None:
            checks = select_tests(kernel, checks, self.coverage, function)
        return checks

    def judged_by(self, function: str) -> list[str]:
        """Project mode: the test cases (node ids from the project root) that judge the
        mutants of ``function``: those ``select_tests`` chose, else every case of the
        test files that the original ran."""
        project = self.kernel.project
        assert project is not None and self.baseline is not None
        ran = list(self.baseline.extra.get("coverage") or {})
        cases: list[str] = []
        for check in self.checks_for(function):
            rel = os.path.relpath(check.path, project.root)
            if check.select:
                cases += [f"{rel}::{name}" for name in check.select]
            else:
                cases += [node for node in ran if node.split("::", 1)[0] == rel]
        return cases

    def mutant_job(self, mutant: Mutant, config: int = 0) -> Job:
        """A mutant's job: the tests that launch its function (all, for a launcher
        mutant), and a limit from the original's time on exactly those (``original_s``)."""
        function = None if mutant.in_launcher else mutant.function
        job = self.job_for(mutant.source, self.timeout_s, function=function, config=config)
        if self.coverage is None:
            return job
        return replace(job, timeout_s=round(self.mutant_timeout(self.original_s(job.checks)), 1))

    def execute(
        self, job: Job, sandbox: Sandbox | None = None, on_progress: Callable | None = None
    ) -> tuple[JobResult, bool]:
        return self.jobs.execute(job, sandbox, on_progress)

    def run_jobs(self, jobs: dict[str, Job], sandbox: Sandbox | None = None) -> Iterator[JobEvent]:
        return self.jobs.run_jobs(jobs, sandbox)

    def run_all(self, jobs: dict[str, Job]) -> dict[str, tuple[JobResult, bool]]:
        return self.jobs.run_all(jobs)

    def start_ahead(self, jobs: Iterable[Job], then: Callable | None = None) -> None:
        """Start ``jobs`` now, beside whatever runs; a later ``run_all`` of the same job
        takes its result (``JobRunner.ahead``). ``then(result)`` runs with each one's
        result as it arrives, before a call waiting for it gets it (it may start more)."""
        for job in jobs:
            self.jobs.ahead(job, then)

    def metered(self):
        """A context: a ``Meter`` of the jobs this thread runs (or reads from the cache)
        inside it (``JobRunner.metered``)."""
        return self.jobs.metered()

    def hand_on(self, key: str, value: object) -> None:
        """Keep ``value`` for this run's later ``take(key)`` (a stage's ``ahead`` hands its
        started jobs to the stage's run; from any thread)."""
        with self._handed_lock:
            self._handed[key] = value

    def take(self, key: str, default: object = None) -> object:
        """What ``hand_on(key)`` kept, once (``default`` where nothing was)."""
        with self._handed_lock:
            return self._handed.pop(key, default)

    def mutant_job_seconds(self) -> float:
        """The mutants' jobs so far, at the CPU seconds each took when it ran (its wall
        seconds where they were not measured)."""
        return sum(self.ledger.spent_s(i) for i in self.ledger.outcomes())

    # -- what a stage records -------------------------------------------------------------
    def add_tests(self, tests: list[TestFile]) -> None:
        """Tests a writer proved: from now on part of every job ``job_for`` builds (for a
        mutant, the cases that launch its function, known from the test's proof)."""
        self._kernel = replace(self._kernel, tests=self._kernel.tests + tuple(tests))
        self._proved(tests)

    def _proved(self, tests: Iterable[TestFile]) -> None:
        """The cases of written tests as their proofs on the original recorded them."""
        if self.coverage is None:
            return
        for test in tests:
            for case, info in (test.cases or {}).items():
                if info.get("functions") is not None:
                    self.coverage.setdefault(f"{test.name}::{case}", info)

    def measured(self, baseline: JobResult) -> None:
        """The test cases beside the own check as the original's run ran them (their
        launches and times), then the written tests' proofs for the others. Project mode
        keeps the record as it came; a kernel file's own run takes each case's time with
        its setup and teardown (the outcome's)."""
        found = baseline.extra.get("coverage")
        if not self.settings.select_tests or (found is None and self.kernel.project is None):
            return
        if self.kernel.project is not None:
            self._coverage = dict(found or {})
        else:
            times = {
                o.name.split("::", 1)[1]: o.duration_s for o in baseline.outcomes if "::" in o.name
            }
            self._coverage = {
                nodeid: {
                    "functions": list(info.get("functions", [])),
                    **({"reaches": list(info["reaches"])} if "reaches" in info else {}),
                    "duration_s": times.get(nodeid.split("::", 1)[1], info.get("duration_s", 0.0)),
                }
                for nodeid, info in found.items()
                if nodeid.split("::", 1)[0] != self.kernel.name  # the own check always runs
            }
        self._baseline_cases = frozenset(self._coverage)
        self._proved(self.kernel.tests)

    def updated(self, mutant: Mutant, outcome: MutantOutcome | None) -> Iterator[Event]:
        """The event for a verdict the ledger changed (nothing when it refused)."""
        if outcome is not None:
            yield MutantUpdated(mutant, outcome)


def with_pytest_selection(
    kernel: KernelFile, checks: tuple[Check, ...], settings: RunSettings
) -> tuple[Check, ...]:
    """The given test files' checks with pytest's own ``-k`` / ``-m`` selection (written
    tests and the file's own check run whole): part of every job, so of its cache key."""
    if not (settings.keyword or settings.marker):
        return checks
    given = {p for t in kernel.tests if t.origin == "given" for p in (t.path, t.name)}
    return tuple(
        replace(c, keyword=settings.keyword or "", marker=settings.marker or "")
        if c.kind is CheckKind.PYTEST and c.name != OWN_CHECK and c.path in given
        else c
        for c in checks
    )


def file_cases(kernel: KernelFile, check: Check, coverage: dict[str, dict]) -> dict[str, dict]:
    """The recorded cases of ``check``'s test file: {case: {functions, duration_s}}."""
    rel = os.path.relpath(check.path, kernel.project.root) if kernel.project else check.path
    return {
        nodeid.split("::", 1)[1]: info
        for nodeid, info in coverage.items()
        if nodeid.split("::", 1)[0] == rel
    }


#: Cases (and test files) run fastest first by classes of their seconds on the original,
#: each class twice the one before from this floor; within a class, by node id (test
#: files: in the order given), however the original's record was put together (one run,
#: or shares merged). Sorted by the seconds themselves, two cases a millisecond apart
#: swapped places with the load, and with them the case that killed a mutant.
SPEED_FLOOR_S = 0.05


def speed_class(seconds: float) -> int:
    """0 up to ``SPEED_FLOOR_S``, then 1, 2, ... for each doubling above it."""
    return 0 if seconds <= SPEED_FLOOR_S else math.ceil(math.log2(seconds / SPEED_FLOOR_S))


def _case_seconds(info: dict) -> float:
    """A case's time on the original: its CPU seconds where measured."""
    return float(info.get("cpu_s", info["duration_s"]))


def select_tests(
    kernel: KernelFile, checks: tuple[Check, ...], coverage: dict[str, dict], function: str
) -> tuple[Check, ...]:
    """The own check, then each test file's cases that reach ``function`` (a kernel they
    launch calls it, wherever that kernel was defined or generated: ``record_reaches``),
    fastest first by ``speed_class``, files too. A test file of a kernel file's own run
    with no record (a result cached before launches were recorded) runs whole, last."""
    reach = jit_callers(kernel.source, function)
    module = kernel.project.module if kernel.project is not None else None
    own: list[Check] = []
    chosen: list[tuple[float, int, Check]] = []
    for n, check in enumerate(checks):
        if check.name != EXTRA_TESTS:
            own.append(check)
            continue
        known = file_cases(kernel, check, coverage)
        if not known:
            if kernel.project is None:  # unknown: run it (the project's record is whole)
                chosen.append((float("inf"), n, check))
            continue
        seconds = {
            name: _case_seconds(info)
            for name, info in known.items()
            if record_reaches(info, module, reach)
        }
        if seconds:
            order = sorted(seconds, key=lambda name: (speed_class(seconds[name]), name))
            speed = speed_class(sum(seconds.values()))
            chosen.append((speed, n, replace(check, select=tuple(order))))
    return (*own, *(check for *_, check in sorted(chosen, key=lambda c: c[:2])))


def ahead_caller(ctx: StageContext, stages: list[Stage]) -> Callable[[Event], None]:
    """What the driver calls with each event of the mutant phase: at the first survivor of
    each function (the cases that judge it: ``Mutant.judging_function``), the ``ahead`` of
    every survivors-phase stage that has one."""
    ahead = [s for s in stages if s.phase != BEFORE_MUTANTS and s.ahead is not None]
    seen: set[str | None] = set()

    def saw(event: Event) -> None:
        if not ahead or not isinstance(event, MutantFinished):
            return
        function = event.mutant.judging_function
        if event.outcome.verdict is Verdict.SURVIVED and function not in seen:
            seen.add(function)
            for stage in ahead:
                stage.ahead(ctx)

    return saw
