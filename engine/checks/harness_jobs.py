"""What both checks share: harness jobs and the mutants a check reaches.

A check's sandbox work is a ``harness`` check (``runner._run_harness``): the job
holds one JSON request naming an entry in ``engine/harness`` and the inner job
(files and checks of the variant) it works on. The answer comes back in
``JobResult.extra["harness"][name]``. Nothing here runs kernel code.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator

from ..events import Event
from ..harness import TRACE_VERSION
from ..job import Check, CheckKind, Job, JobResult, JobStatus
from ..kernel_file import KernelFile
from ..records import Mutant
from ..stage import StageContext
from ..verdicts import summarize_error

REQUEST = "_mg_check.json"


def checks_job(ctx: StageContext, source: str | None, function: str | None = None) -> Job:
    """The job the own check (and every accepted test) runs in, for one variant; with
    ``function``, only the test cases that launch it (a library's suite: the cases of its
    module's kernel, not the whole suite)."""
    return ctx.job_for(source, ctx.settings.timeout_s, function=function)


def selected(mutant) -> str | None:
    """The function whose test cases judge ``mutant`` (None, every case: a launcher's)."""
    return mutant.judging_function


def harness_job(ctx: StageContext, entry: str, name: str, request: dict, timeout_s: float) -> Job:
    payload = {"entry": entry, "version": TRACE_VERSION, **request}
    return Job(
        files=((REQUEST, json.dumps(payload, sort_keys=True)),),
        checks=(Check(CheckKind.HARNESS, REQUEST, name),),
        mode=ctx.settings.mode,
        seed=ctx.settings.seed,
        timeout_s=round(timeout_s, 1),
        memory_mb=ctx.settings.memory_mb,
        poison_undefined=ctx.settings.poison_undefined,
        interpreter=ctx.settings.interpreter,
    )


def harness_data(result: JobResult, name: str) -> dict | None:
    data = (result.extra or {}).get("harness", {}).get(name)
    return data if isinstance(data, dict) else None


def failure(result: JobResult) -> str:
    """One line saying why a harness job gave no answer."""
    if result.status is JobStatus.TIMEOUT:
        return result.error.strip().splitlines()[0] if result.error.strip() else "timed out"
    return summarize_error(result.error) or result.status.value


def reached_kernels(kernel: KernelFile, mutant: Mutant, launched: list[str]) -> list[str]:
    """The launched kernels whose compiled code contains the mutated function:
    itself if it is launched, else every launched kernel that calls it (directly
    or through other jit functions). A launcher mutant reaches all of them."""
    if mutant.in_launcher:
        return list(launched)
    if mutant.function in launched:
        return [mutant.function]
    callers = _callers(kernel, mutant.function)
    return [k for k in launched if k in callers]


def _callers(kernel: KernelFile, function: str) -> set[str]:
    """``function`` and the jit functions of ``kernel`` that call it, directly or
    through other jit functions (by their text)."""
    lines = kernel.source.splitlines()
    bodies = {f.name: "\n".join(lines[f.line - 1 : f.end_line]) for f in kernel.jit_functions}
    callers = {function}
    grew = True
    while grew:
        grew = False
        for name, body in bodies.items():
            if name not in callers and any(
                re.search(rf"\b{re.escape(c)}\s*\(", body) for c in callers
            ):
                callers.add(name)
                grew = True
    return callers


def publishing(
    ctx: StageContext, name: str, summary: dict, events: Iterator[Event]
) -> Iterator[Event]:
    """A check's events, then its ``summary`` put into the run's ``checks`` section (also
    when it stops early or raises): the check owns the dict it fills, the ledger gets a
    copy of it, under its lock."""
    try:
        yield from events
    finally:
        done = copy.deepcopy(summary)
        ctx.ledger.update_section("checks", lambda checks: {**checks, name: done}, {})
