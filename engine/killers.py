"""The cases that killed mutants run first for the mutants that come after them.

A mutant's job runs the cases that reach its kernel, fastest first, and stops at the first
failure: a killed mutant pays every case before the one that kills it. On a real library
that was 23 cases a killed mutant, on average (Liger's attn_res and cross_entropy on an
H100, ``benchmarks/results/h200-2026-12-07c-whole-library``), while a few cases kill most
mutants of a kernel. So a run remembers which cases killed (``Killers.learn``, from every
result, cached ones too) and a job about to start takes those cases first, most kills first
(``Killers.first``), the rest keeping their order; test files with a killer come before
those without.

Only the order of running changes, never which cases run, so the job keeps its cache key
(its own, fastest-first order) and a result served from the cache answers it whichever
order ran it. A mutant no case kills runs every case either way; one a case kills is killed
whichever order finds it, though by which case (``tests_run``) may differ between runs.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace

from .job import Job, JobResult, JobStatus
from .kernel_file import EXTRA_TESTS

_CASE = EXTRA_TESTS + "::"  # the outcome name of a test file's case


class Killers:
    """Kills per case name, learnt from the results of one job runner's jobs."""

    def __init__(self) -> None:
        self._kills: Counter[str] = Counter()
        self._lock = threading.Lock()

    def learn(self, result: JobResult) -> None:
        """Count the case whose failure killed this job's mutant, if a case did."""
        failed = result.first_failure if result.status is JobStatus.FAILED else None
        if failed is not None and failed.name.startswith(_CASE):
            with self._lock:
                self._kills[failed.name[len(_CASE) :]] += 1

    def first(self, job: Job) -> Job:
        """``job`` with the killers among its selected cases first (most kills first), and
        its test files with killers before those without; ``job`` itself where none is
        known or where its job runs every case to the end."""
        if not job.stop_on_first_failure:
            return job
        with self._lock:
            kills = dict(self._kills)
        if not kills:
            return job
        checks = list(job.checks)
        chosen = [n for n, c in enumerate(checks) if c.name == EXTRA_TESTS and c.select]
        if not any(kills.get(case) for n in chosen for case in checks[n].select):
            return job

        def most(case: str) -> int:
            return -kills.get(case, 0)

        ordered = [
            replace(checks[n], select=tuple(sorted(checks[n].select, key=most))) for n in chosen
        ]
        ordered.sort(key=lambda check: most(check.select[0]))  # stable: files keep their order
        for n, check in zip(chosen, ordered, strict=True):
            checks[n] = check
        return replace(job, checks=tuple(checks))
