"""Sandboxes run jobs; every backend runs the same harness and returns the same data."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from ..job import Check, CheckKind, CheckOutcome, Job, JobResult, JobStatus


class Sandbox(Protocol):
    name: str
    versions: dict

    def start(self) -> None: ...
    def run(self, job: Job, on_progress: Callable[[dict], None] | None = None) -> JobResult: ...
    def run_many(self, jobs: Iterable[Job]) -> Iterator[tuple[int, JobResult]]: ...
    def close(self) -> None: ...


__all__ = ["Check", "CheckKind", "CheckOutcome", "Job", "JobResult", "JobStatus", "Sandbox"]
