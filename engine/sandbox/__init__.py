"""Sandboxes run jobs; every backend runs the same harness and returns the same data."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from ..job import Check, CheckKind, CheckOutcome, Job, JobResult, JobStatus


class Sandbox(Protocol):
    """What every backend does. A backend subclasses it (``backends.BACKENDS`` lists them)
    and so inherits the optional capabilities' defaults below: the engine reads them without
    asking whether a backend has them."""

    name: str
    mode: str
    #: workers (jobs at once)
    size: int
    #: the python, torch and triton versions the jobs run with, as the workers report them
    versions: dict
    #: whether ``versions`` key the cache (``jobs.toolchain``): a backend started when opened
    #: knows them before any key is made. A local pool runs this interpreter's own installs,
    #: keyed by their metadata: its workers report only once it has started (with the
    #: first job), and in words of their own (``torch.__version__`` says "2.11.0+cu130" where
    #: the metadata says "2.11.0"), so a run made after it started would key its jobs apart
    versions_key: bool = True

    #: warm workers: a warm runner per worker serves the file's own checks
    warm: bool = False
    #: compiled mode's Triton cache shared by the warm runners, or None (``triton_cache_note``
    #: says why not)
    triton_cache: str | None = None
    triton_cache_note: str = ""
    #: workers that never started, why (the pool ran without them)
    start_errors: Sequence[str] = ()

    def start(self) -> None: ...
    def run(self, job: Job, on_progress: Callable[[dict], None] | None = None) -> JobResult: ...
    def run_many(self, jobs: Iterable[Job]) -> Iterator[tuple[int, JobResult]]: ...
    def close(self) -> None: ...

    def cluster_record(self) -> dict:
        """The report's words on a cluster the jobs ran on (none for a local pool)."""
        return {}

    def gpu_throughput(self, wall_s: float) -> list[dict]:
        """Compiled mode: jobs and seconds per visible GPU over ``wall_s`` (none by default)."""
        return []


__all__ = ["Check", "CheckKind", "CheckOutcome", "Job", "JobResult", "JobStatus", "Sandbox"]
