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

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from mutant_gate.cache import Store

from .events import Event, MutantUpdated
from .jobs import JobRunner
from .kernel_file import OWN_CHECK, KernelFile, TestFile
from .project import jit_callers
from .records import Mutant, MutantOutcome, Verdict
from .sandbox import Sandbox
from .sandbox.job import Check, CheckKind, Job, JobResult
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

    def targets(self, ctx: StageContext, mutants: list[Mutant] | None = None) -> list[Mutant]:
        """The mutants (default: the run's) whose verdict this stage applies to now; never
        one that no check reaches (nothing a stage does can give evidence on it)."""
        chosen = ctx.mutants if mutants is None else mutants
        return [
            m
            for m in chosen
            if ctx.ledger.verdict(m.id) in self.verdicts and ctx.ledger.reached(m.id)
        ]


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
        self.settings = settings
        self.jobs = jobs
        self.ledger = ledger
        self.kernel = kernel
        self.mutants = mutants
        #: the original's passing job (set once the baseline ran)
        self.baseline: JobResult | None = None
        #: each mutant's time limit, from the baseline
        self.timeout_s: float = settings.timeout_s
        #: project mode: the original's test cases {nodeid: {functions, duration_s}}
        self.coverage: dict[str, dict] | None = None
        #: ``--all-configs``: how many autotune configs each mutant runs under
        self.configs = 1

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

        In project mode a mutant runs only the test cases that reach its function
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
            trace_lines=source is None and mode == "interpret" and kernel.project is None,
        )

    def checks_for(self, function: str | None) -> tuple[Check, ...]:
        """The checks of a job for the original (``function`` None) or a mutant of
        ``function``: pytest's own selection, then in project mode ``select_tests``."""
        kernel = self.kernel
        checks = with_pytest_selection(kernel, kernel.checks, self.settings)
        if kernel.project is not None and function is not None and self.coverage is not None:
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

    def execute(
        self, job: Job, sandbox: Sandbox | None = None, on_progress: Callable | None = None
    ) -> tuple[JobResult, bool]:
        return self.jobs.execute(job, sandbox, on_progress)

    def run_jobs(self, jobs: dict[str, Job], sandbox: Sandbox | None = None):
        return self.jobs.run_jobs(jobs, sandbox)

    def run_all(self, jobs: dict[str, Job]) -> dict[str, tuple[JobResult, bool]]:
        return self.jobs.run_all(jobs)

    # -- what a stage records -------------------------------------------------------------
    def add_tests(self, tests: list[TestFile]) -> None:
        """Tests a writer proved: from now on part of every job ``job_for`` builds."""
        self.kernel = replace(self.kernel, tests=self.kernel.tests + tuple(tests))

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


def select_tests(
    kernel: KernelFile, checks: tuple[Check, ...], coverage: dict[str, dict], function: str
) -> tuple[Check, ...]:
    """Each test file's cases that launch ``function`` (or a kernel calling it), fastest first."""
    assert kernel.project is not None
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
