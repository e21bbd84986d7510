"""Where a mutant's verdict is decided: from the sandbox's result, nothing else.

``killed`` needs evidence from running the mutant: a failing check, a bounds
violation, a crash or a timeout. A harness failure is ``error`` and never
counts as a kill.
"""

from __future__ import annotations

import re

from .kernel_file import EXTRA_TESTS, OWN_CHECK
from .records import Verdict
from .sandbox.job import JobResult, JobStatus


def attribute(check_name: str) -> str:
    """``own-check`` for the kernel's own check, ``test:NAME`` for an extra test."""
    if check_name.startswith(EXTRA_TESTS + "::"):
        return "test:" + check_name.split("::", 1)[1]
    if check_name.startswith(OWN_CHECK):
        return OWN_CHECK
    return "test:" + check_name


_EXCEPTION_LINE = re.compile(
    r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Violation|Warning)\b"
)


def summarize_error(text: str, limit: int = 300) -> str:
    """One line from an error tail: the last exception line and its message."""
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    start = max((i for i, ln in enumerate(lines) if _EXCEPTION_LINE.match(ln)), default=None)
    if start is None:
        picked = [ln.strip() for ln in lines if ln.strip()][-1:]
    else:
        picked = [ln.strip() for ln in lines[start:] if ln.strip()]
    line = "; ".join(picked)
    return line if len(line) <= limit else line[: limit - 3] + "..."


def decide(result: JobResult) -> tuple[Verdict, str | None, str]:
    """(verdict, by, reason) for a mutant's job result."""
    status = result.status
    if status is JobStatus.PASSED:
        ran = sum(1 for o in result.outcomes if o.status == "passed")
        if not result.outcomes:
            return Verdict.SURVIVED, None, "no test reaches this mutant's function"
        return Verdict.SURVIVED, None, f"all {ran} checks passed"
    if status is JobStatus.FAILED:
        failure = result.first_failure
        name = failure.name if failure else OWN_CHECK
        where = (
            f" ({name.split('::', 1)[1]})" if "::" in name and name.startswith(OWN_CHECK) else ""
        )
        return Verdict.KILLED, attribute(name), summarize_error(result.error) + where
    if status is JobStatus.BOUNDS:
        return (
            Verdict.KILLED,
            "bounds",
            (result.bounds or {}).get("message", summarize_error(result.error)),
        )
    if status is JobStatus.CRASH:
        return (
            Verdict.KILLED,
            "crash",
            result.error.strip().splitlines()[0] if result.error.strip() else "crashed",
        )
    if status is JobStatus.TIMEOUT:
        return Verdict.KILLED, "timeout", result.error.strip().splitlines()[0]
    return Verdict.ERROR, None, summarize_error(result.error) or "harness error"
