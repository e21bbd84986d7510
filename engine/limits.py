"""Sandbox limits: the default memory limit sized to the machine, and which limit a
job hit, said in words with the flag that raises it.

A job runs under an address-space limit (interpreted jobs: ``--memory-mb`` on top of
what the warm worker maps), a CPU-time limit (its time limit), an output limit and
the process's open-files limit. When one of them ends a job, the error a user reads
otherwise names the place that noticed (``shims.py:191: RuntimeError``,
``killed by SIGXCPU``), not the limit: ``hit`` recognises the limit from the job and
its result, ``describe`` says it in one line.
"""

from __future__ import annotations

import os
import re
import signal

from .job import Job, JobResult, JobStatus

__all__ = ["describe", "hit", "machine_memory_mb", "sized_memory_mb"]

#: Kept for the tool itself (the command, the pool's own processes, the page cache):
#: the larger of this and ``HEADROOM_SHARE`` of the machine's memory.
HEADROOM_MB = 2048
HEADROOM_SHARE = 0.15
#: No job gets less than this, however many workers share the machine.
FLOOR_MB = 1024
STEP_MB = 256  # rounded down to a step, so small changes of the machine keep the value
#: A remote sandbox's jobs (another machine's memory): the fixed default of before.
REMOTE_MEMORY_MB = 4096

_MEMORY = re.compile(
    r"DefaultCPUAllocator: can't allocate memory|\bMemoryError\b|_ArrayMemoryError"
    r"|Unable to allocate [\d.]+ \w+ for an array|std::bad_alloc|Cannot allocate memory"
    r"|alloc_cpu\.cpp.*(?:allocate|ENOMEM)"
)
_CPU = re.compile(r"CPU time limit exceeded")
_OUTPUT = re.compile(r"output exceeded \d+ bytes")
_FILES = re.compile(r"Too many open files|\[Errno 24\]")


def machine_memory_mb() -> int | None:
    """The machine's memory (MemTotal) in MB, or None where it cannot be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return None


def sized_memory_mb(workers: int, total_mb: int | None = None) -> int:
    """Each job's memory limit when ``--memory-mb`` is not given: the machine's memory
    less the tool's headroom, shared by the workers that run jobs at once."""
    total = machine_memory_mb() if total_mb is None else total_mb
    if not total:
        return 4096
    headroom = max(HEADROOM_MB, int(total * HEADROOM_SHARE))
    share = (total - headroom) // max(1, workers)
    return max(FLOOR_MB, share // STEP_MB * STEP_MB)


def _text(result: JobResult) -> str:
    failing = result.first_failure
    return "\n".join(filter(None, [result.error, failing.message if failing else ""]))


def _said(text: str, pattern: re.Pattern) -> str:
    """The line of ``text`` where the limit shows (an allocator's message), trimmed."""
    for line in text.splitlines():
        if pattern.search(line):
            line = line.strip().removeprefix("E").strip()
            return line if len(line) <= 200 else line[:197] + "..."
    return ""


def hit(job: Job, result: JobResult) -> dict | None:
    """The limit that ended ``job`` (``{"limit", "value", "flag", "said"}``), or None."""
    found = _hit(job, result)
    if found is not None:
        pattern = {"memory": _MEMORY, "open files": _FILES}.get(found["limit"])
        found["said"] = _said(_text(result), pattern) if pattern else ""
    return found


def _hit(job: Job, result: JobResult) -> dict | None:
    if result.status not in (JobStatus.FAILED, JobStatus.CRASH):
        return None
    text = _text(result)
    if result.signal == signal.SIGXCPU or _CPU.search(text):
        return {"limit": "cpu time", "value": f"{job.timeout_s:g} s", "flag": "--timeout"}
    if result.signal == signal.SIGXFSZ or _OUTPUT.search(text):
        mib = job.output_limit_bytes / (1024 * 1024)
        return {"limit": "output", "value": f"{mib:g} MiB", "flag": None}
    if job.mode == "interpret" and _MEMORY.search(text):
        return {"limit": "memory", "value": f"{job.memory_mb} MB", "flag": "--memory-mb"}
    if _FILES.search(text):
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return {"limit": "open files", "value": str(soft), "flag": "ulimit -n"}
    return None


def describe(limit: dict) -> str:
    """One line: which limit, its value, and what raises it."""
    what = {
        "memory": "the sandbox's memory limit ({value} of address space per job)",
        "cpu time": "the sandbox's CPU-time limit ({value}, the job's time limit)",
        "output": "the sandbox's output limit ({value} per job)",
        "open files": "the open-files limit ({value} per process)",
    }.get(limit["limit"], "the sandbox's {limit} limit ({value})")
    line = what.format(**limit)
    flag = limit.get("flag")
    if limit["limit"] == "cpu time":
        return f"{line}; --timeout raises the original's, --timeout-factor a mutant's"
    if flag == "ulimit -n":
        return f"{line}; raise it with ulimit -n before mutant-gate starts"
    return f"{line}; {flag} raises it" if flag else f"{line}; it is fixed"
