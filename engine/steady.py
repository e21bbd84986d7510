"""Verdicts a limit decided near its edge (or the GPU's memory): run once more, and two
outcomes that differ make the mutant ``flaky``, never a silent pick.

A job's limit is CPU seconds (``Job.timeout_s``; the wall clock is only its far
backstop), so the same job keeps its verdict on a busy machine. CPU seconds still vary
a little from run to run; where the limit decided a verdict within ``MARGIN`` of it, the
verdict could be the other one on the next run:

- a job stopped at its CPU limit (``over``) runs again with ``1 + MARGIN`` times the
  limit: stopped again, it is over the margin and the timeout stands; passing then, it
  was just over the limit, and two outcomes differ;
- a job that passed with CPU seconds within the margin under its limit (``under``) runs
  again at the same limit: stopped then, two outcomes differ.

Two kills (a timeout, then a test's failure) are one verdict: the second run's stands.

A GPU's memory is the other thing a run's jobs share: a kill whose failure says the GPU
ran out of memory (``memory``) runs again too, alone, after the others (two runs of a real
library's modules at ``-j 16`` on one H100 moved five verdicts with it).
"""

from __future__ import annotations

from dataclasses import replace

from .job import Job, JobResult, JobStatus
from .verdicts import decide
from .vocabulary import Verdict

#: How near its limit a verdict must be decided to be run once more: a timeout runs
#: again with ``1 + MARGIN`` times the limit, a pass within ``limit / (1 + MARGIN)`` of
#: it at the same limit.
MARGIN = 0.25
#: what a failure says when the GPU ran out of memory (torch's error, CUDA's)
OUT_OF_MEMORY = ("OutOfMemoryError", "CUDA out of memory", "CUDA error: out of memory")
#: the side of a job that runs again alone
ALONE = "memory"
#: said of a kill that ran out of GPU memory beside other jobs, and was killed again alone
ALONE_NOTE = "its first run ran out of GPU memory beside the run's other jobs; run again alone"


def out_of_memory(result: JobResult) -> bool:
    """The job failed because the GPU ran out of memory."""
    if result.status not in (JobStatus.FAILED, JobStatus.CRASH):
        return False
    failure = result.first_failure
    text = result.error + (failure.message if failure is not None else "")
    return any(words in text for words in OUT_OF_MEMORY)


def in_doubt(job: Job, result: JobResult) -> str | None:
    """``over`` (stopped at its CPU limit), ``under`` (passed within the margin under
    it), ``memory`` (failed for want of GPU memory) or None: nothing the run's other jobs
    share decided this verdict. A job already run again is never run a third time; the
    wall clock's backstop is far from any edge."""
    if job.attempt:
        return None
    stopped = result.extra.get("timed_out") or {}
    if result.status is JobStatus.TIMEOUT and stopped.get("by") == "cpu":
        return "over"
    if result.status is JobStatus.PASSED and result.cpu_s >= job.timeout_s / (1 + MARGIN):
        return "under"
    if out_of_memory(result):
        return ALONE
    return None


def again(job: Job, side: str) -> Job:
    """The job run once more: with the margin added to its limit (``over``), or as it
    was (``under``, ``memory``); ``attempt`` keeps its result apart from the first in the
    cache."""
    if side == "over":
        return replace(job, timeout_s=round(job.timeout_s * (1 + MARGIN), 2), attempt=1)
    return replace(job, attempt=1)


def said(job: Job, result: JobResult) -> str:
    """One run in words: how it ended, with its CPU seconds against its limit."""
    verdict, _, reason = decide(result)
    used = f"{result.cpu_s:.2f} CPU s against a limit of {job.timeout_s:g}"
    if result.status is JobStatus.TIMEOUT:
        return reason.split("\n", 1)[0]
    if verdict is Verdict.SURVIVED:
        return f"passed ({used})"
    return f"{verdict.value}: {reason} ({used})"


def settle(
    first: tuple[Job, JobResult], second: tuple[Job, JobResult], side: str = "over"
) -> dict | None:
    """None where both runs give one verdict (the second's stands); else the flaky
    record: both runs, each in words, with its figures, and why it ran again (``side``)."""
    if decide(first[1])[0] is decide(second[1])[0]:
        return None
    runs = [
        {
            "status": r.status.value,
            "verdict": decide(r)[0].value,
            "cpu_s": round(r.cpu_s, 3),
            "limit_s": j.timeout_s,
            "wall_s": round(r.duration_s, 3),
            "said": said(j, r),
        }
        for j, r in (first, second)
    ]
    if side == ALONE:
        reason = (
            f"two runs disagree: the first ran out of GPU memory beside the run's other "
            f"jobs: {runs[0]['said']}; run again alone: {runs[1]['said']}"
        )
    else:
        reason = (
            f"two runs disagree near the CPU limit: {runs[0]['said']}; run again: {runs[1]['said']}"
        )
    return {"runs": runs, "reason": reason}
