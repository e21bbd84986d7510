"""The original's test cases that no mutant can be judged by. A case the original fails
(project mode), one slower than ``--case-time`` on it, or a test file pytest could not
collect is left out of the mutants' runs (``leave_out_cases``); with ``--case-time``, an
original that ran out of time runs again without its slow cases (``without_slow_cases``).
An original that still ran out of time is said in one line with the ways to leave its slow
cases out (``timeout_message``).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import replace

from .errors import BadInput
from .job import (
    BOUNDS_OUTSIDE_CASES,
    CASE_TIME_WORDS,
    CheckOutcome,
    JobResult,
    JobStatus,
)
from .kernel_file import EXTRA_TESTS, KernelFile
from .spread import run_original
from .stage import StageContext
from .verdicts import summarize_error

#: slow cases a timeout of the original names
SLOWEST = 3


def timeout_message(
    name: str, limit_s: float, cases: dict | None, stopped: dict | None = None
) -> str:
    """One line for an original that ran out of time: the case it was running, the
    slowest cases that finished (the sandbox's record of the run, ``worker.CaseLog``),
    and what to do about it: a longer limit, and a way to leave the slow cases out that
    keeps others (``--case-time S`` from the cases' times, a ``-k`` naming the one case),
    never a selection that keeps none."""
    head = _timeout_head(name, limit_s, stopped)
    if not cases or not (cases.get("finished") or cases.get("running")):
        return f"{head}; give them longer with --timeout S"
    slow = _case_time_way(limit_s, cases)
    then = f" (then {slow})" if slow else ""
    keyword = _keyword_way(cases)
    leave = f", or leave the case out with {keyword}" if keyword else ""
    seen = "; ".join(_cases_seen(cases))
    return f"{head} ({seen}); give them longer with --timeout S{then}{leave}"


def _timeout_head(name: str, limit_s: float, stopped: dict | None) -> str:
    """The timeout itself: after the CPU limit, or by the wall-clock backstop (the run
    waited, using little CPU), with the seconds each measured."""
    if (stopped or {}).get("by") != "wall":
        return f"{name}: the original's checks timed out after {limit_s:g} CPU s"
    return (
        f"{name}: the original's checks timed out by the wall-clock backstop "
        f"({stopped['wall_limit_s']:g} s, for a limit of {limit_s:g} CPU s; "
        f"{stopped['cpu_s']:.1f} CPU s used)"
    )


def _cases_seen(cases: dict) -> list[str]:
    """What the record of the timed-out run shows: the case it was running, how many
    finished (of how many collected), and the slowest of those with their seconds."""
    finished = cases.get("finished") or []
    of = f" of {cases['collected']}" if cases.get("collected") else ""
    parts = [f"{len(finished)}{of} test cases finished"]
    running = cases.get("running") or ""
    if running:
        parts.insert(0, f"while running {running}")
    slowest = sorted(finished, key=lambda c: -float(c.get("duration_s") or 0.0))[:SLOWEST]
    if slowest:
        parts.append(
            "slowest: "
            + ", ".join(f"{c['case']} {float(c.get('duration_s') or 0):.1f} s" for c in slowest)
        )
    return parts


def nice_seconds(seconds: float) -> float:
    """The least of 1, 2, 5 times a power of ten at or above ``seconds``."""
    step = 10.0 ** math.floor(math.log10(max(seconds, 1e-3)))
    return next(round(m * step, 6) for m in (1, 2, 5, 10) if m * step >= seconds)


def _case_time_way(limit_s: float, cases: dict) -> str:
    """``--case-time S`` with S from the finished cases' times, so that some stay: above
    every finished case when the one running had run longer than that, else above the
    median case; "" when no case finished."""
    times = sorted(float(c.get("duration_s") or 0.0) for c in cases.get("finished") or [])
    if not times:
        return ""
    chosen = _case_time_for(limit_s, times, bool(cases.get("running")))
    kept = sum(1 for t in times if t <= chosen)
    which = f"the {kept}" if kept == len(times) else f"{kept} of the {len(times)}"
    return (
        f"--case-time {chosen:g} leaves the slower cases out of the mutants' runs, keeping "
        f"{which} finished case{'s' if len(times) != 1 else ''}"
    )


def _case_time_for(limit_s: float, times: list[float], running: bool) -> float:
    """The S to suggest for ``--case-time`` from the finished cases' sorted ``times``:
    above the slowest when the case ``running`` at the limit had run longer than that (it
    alone goes), else above the median (the slower half goes)."""
    top = nice_seconds(times[-1] * 1.01)
    if running and limit_s - sum(times) > top:
        return top
    return nice_seconds(times[(len(times) - 1) // 2] * 1.01)


#: what pytest's ``-k`` takes as one name (its expression grammar's identifiers)
K_NAME = re.compile(r"^[\w:+\-.\[\]\\/]+$")


def _keyword_way(cases: dict) -> str:
    """``-k 'not CASE'`` for the case running at the timeout, by its whole name (with its
    parameters: one case of a parametrised test, not all of them), where more than that
    one case was collected and pytest's ``-k`` can name it; else ""."""
    running = (cases.get("running") or "").split("::")[-1]
    collected = int(cases.get("collected") or 0)
    if not running or collected <= 1 or not K_NAME.match(running):
        return ""
    return f"-k 'not {running}'"


#: the run section (and the original's ``extra`` key) naming the cases left out
LEFT_OUT_CASES = "left_out_cases"
#: why a case is left out: it failed on the original, it was slower than --case-time
FAILED, SLOW, LIMIT, UNCOLLECTED_WHY = "failed", "case-time", "limit", "collect"
#: a left-out case's reason, at most this long (the report keeps one line per case)
REASON_CHARS = 160


def leave_out_cases(ctx: StageContext, result: JobResult) -> JobResult:
    """The original's result with the test cases no mutant can be judged by left out:
    in project mode (where the original runs every case to the end), each case the
    original failed; with ``--case-time S``, each case slower than S on the original.
    A case left out stays in the per-case record with no kernel launched and its reason
    (``left_out``), so ``stage.select_tests`` gives it to no mutant; the record's
    ``extra["left_out_cases"]`` names them ({case, why, reason, duration_s, the
    kernels it launched}). An
    original whose failure is not a case's (an import, a collection error, a limit), or
    with no per-case record, is returned as it came; one with no passing case left
    raises ``BadInput``."""
    if not _may_leave_out(ctx, result):
        return result
    coverage = result.extra["coverage"]
    case_time = ctx.settings.case_time_s
    own = ctx.kernel.name if ctx.kernel.project is None else None
    left = {r["case"]: r for r in result.extra.get(LEFT_OUT_CASES) or []}
    nodeids = _case_nodeids(result.outcomes, coverage, own)
    failed, uncollected = _failures(result.outcomes)
    if not failed - set(uncollected) <= set(nodeids):
        return result  # a failure not matched to a recorded case: said as it is
    _leave_out_uncollected(result.outcomes, uncollected, left)
    _leave_out_failed(result.outcomes, failed - set(uncollected), nodeids, coverage, left)
    if case_time is not None:
        _leave_out_slow(coverage, case_time, own, left)
    if not left:
        return result
    _check_cases_stay(ctx, result, nodeids, left)
    return _without_cases(result, left, failed, coverage)


def _failures(outcomes: tuple[CheckOutcome, ...]) -> tuple[set[int], dict[int, str]]:
    """The failed outcomes (by index), and those of them that say a test file could not
    be collected (index -> the file's node id)."""
    failed = {n for n, o in enumerate(outcomes) if o.status == "failed"}
    uncollected = {n: f for n in failed if (f := _uncollected(outcomes[n])) is not None}
    return failed, uncollected


def _may_leave_out(ctx: StageContext, result: JobResult) -> bool:
    """Whether the original has a per-case record and a case may be left out of it: it
    failed only in test cases, or passed with a ``--case-time`` or cases already left out
    (not a failure that is not a case's)."""
    failing = _case_failures(ctx.kernel, result)
    if result.extra.get("coverage") is None:
        return False  # nothing recorded per case
    if failing is None and result.status is not JobStatus.PASSED:
        return False  # a failure that is not a case's
    case_time = ctx.settings.case_time_s
    return failing is not None or case_time is not None or bool(result.extra.get(LEFT_OUT_CASES))


def _leave_out_uncollected(
    outcomes: tuple[CheckOutcome, ...], uncollected: dict[int, str], left: dict[str, dict]
) -> None:
    """Adds to ``left`` each test file pytest could not collect (outcome index -> its
    node id), with pytest's reason."""
    for index, path in uncollected.items():
        said = _case_reason(outcomes[index].message)
        reason = f"failed to collect on the original: {said}"
        left.setdefault(path, {"case": path, "why": UNCOLLECTED_WHY, "reason": reason,
                               "duration_s": 0.0, "functions": []})  # fmt: skip


def _leave_out_failed(
    outcomes: tuple[CheckOutcome, ...],
    failed: set[int],
    nodeids: dict[int, str],
    coverage: dict[str, dict],
    left: dict[str, dict],
) -> None:
    """Adds to ``left`` each case the original failed (by outcome index): as slow where
    the case's clock stopped it, else as failing, with its one line."""
    for index in sorted(failed):
        nodeid = nodeids[index]
        said = _case_reason(outcomes[index].message)
        if CASE_TIME_WORDS in said:  # stopped by the clock (``case_clock``): slow, not failing
            why, reason = SLOW, said[said.index(CASE_TIME_WORDS) :]
        else:
            why, reason = FAILED, f"failed on the original: {said}"
        left.setdefault(nodeid, _left(nodeid, why, reason, coverage))


def _leave_out_slow(
    coverage: dict[str, dict], case_time: float, own: str | None, left: dict[str, dict]
) -> None:
    """Adds to ``left`` each case (of the tests, not the own check ``own``) slower than
    ``--case-time`` on the original."""
    for nodeid, info in coverage.items():
        seconds = float(info.get("duration_s") or 0.0)
        if nodeid not in left and seconds > case_time and nodeid.split("::")[0] != own:
            reason = f"took {seconds:.2f} s on the original, over --case-time {case_time:g} s"
            left[nodeid] = _left(nodeid, SLOW, reason, coverage)


def _check_cases_stay(
    ctx: StageContext, result: JobResult, nodeids: dict[int, str], left: dict[str, dict]
) -> None:
    """Bad input where the cases left out leave no passing case to judge a mutant, or
    where ``--no-select`` would run them for every mutant anyway."""
    records = list(left.values())
    staying = [
        n
        for n, o in enumerate(result.outcomes)
        if n in nodeids and o.status == "passed" and nodeids[n] not in left
    ]
    if not staying:
        raise BadInput(
            f"{ctx.kernel.path}: no test case is left to judge a mutant "
            f"({left_out_line(records)}; first: {records[0]['case']} {records[0]['reason']})"
        )
    if not ctx.settings.select_tests:
        raise BadInput(
            f"{ctx.kernel.path}: {left_out_line(records)}, and with --no-select every mutant "
            "would run them: drop --no-select, or leave them out with -k or --tests FILE::CASE"
        )


def _without_cases(
    result: JobResult, left: dict[str, dict], failed: set[int], coverage: dict[str, dict]
) -> JobResult:
    """The original's result, passed, less the cases left out: their failed outcomes
    (``failed``: by index) dropped, their per-case records marked (no kernel launched,
    ``left_out``: why), the launch record less what only they launched, and
    ``extra["left_out_cases"]`` naming them."""
    kept = [o for n, o in enumerate(result.outcomes) if n not in failed]
    marked = {  # a case deselected on a rerun (``without_slow_cases``) has no record
        n: {**coverage[n], "functions": [], "reaches": [], "left_out": r["why"]}
        for n, r in left.items()
        if n in coverage
    }
    extra = {
        **result.extra,
        **_launches_kept(result.extra, coverage, set(left) & set(coverage)),
        "coverage": {**coverage, **marked},
        LEFT_OUT_CASES: list(left.values()),
    }
    return replace(
        result, status=JobStatus.PASSED, outcomes=tuple(kept), error="", bounds=None, extra=extra
    )


def _launches_kept(extra: dict, coverage: dict[str, dict], left: set[str]) -> dict:
    """The job's launch record (``launched``, ``reaches``) less what only the left-out
    cases launched: a kernel only they reached is not reached by the tests."""
    found: dict = {}
    for key, per_case in (("launched", "functions"), ("reaches", "reaches")):
        if extra.get(key) is not None:
            found[key] = _kept(extra[key], coverage, left, per_case)
    return found


def _kept(launched: list, coverage: dict[str, dict], left: set[str], per_case: str) -> list:
    """``launched`` less what only the left-out cases launched, by each case's record of
    its launches (``per_case``: its key)."""
    kept = {f for n, info in coverage.items() if n not in left for f in info.get(per_case) or ()}
    lost = {f for n in left for f in coverage[n].get(per_case) or ()} - kept
    return [f for f in launched if f not in lost]


def _case_reason(message: str) -> str:
    """A failed case's one line: pytest's first error line (``E   AssertionError: ...``),
    else the last exception line of its text."""
    said = [ln[1:].strip() for ln in message.splitlines() if re.match(r"^E\s", ln)]
    line = said[0] if said else summarize_error(message, REASON_CHARS)
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 3] + "..."


def _left(nodeid: str, why: str, reason: str, coverage: dict[str, dict]) -> dict:
    info = coverage[nodeid]
    seconds = round(float(info.get("duration_s") or 0.0), 3)
    functions = list(info.get("functions") or [])  # what it launched: whom it would judge
    record = {
        "case": nodeid,
        "why": why,
        "reason": reason,
        "duration_s": seconds,
        "functions": functions,
    }
    if info.get("reaches") is not None:  # module:name: which module's functions it reached
        record["reaches"] = list(info["reaches"])
    return record


def _case_failures(kernel: KernelFile, result: JobResult) -> list[CheckOutcome] | None:
    """The failed outcomes of a project-mode original when every one is a test case's
    (none an import, a collection error, a limit, a bounds violation no case made); else
    None. A case that read or wrote out of bounds failed with it: left out like the rest."""
    if kernel.project is None or result.status not in (JobStatus.FAILED, JobStatus.BOUNDS):
        return None
    if _failed_outside_cases(result):
        return None
    failed = [o for o in result.outcomes if o.status == "failed"]
    if not failed or not all(map(_of_a_case, failed)):
        return None
    return failed


def _of_a_case(outcome: CheckOutcome) -> bool:
    """Whether ``outcome`` is a test case's, or a test file's that could not be collected
    (which leaves its cases out), not an import's or the own check's."""
    return outcome.name.startswith(f"{EXTRA_TESTS}::") or _uncollected(outcome) is not None


def _failed_outside_cases(result: JobResult) -> bool:
    """Whether the original failed outside its test cases: it hit a limit, or read or
    wrote out of bounds where no case was running."""
    if result.extra.get("limit") or result.extra.get(BOUNDS_OUTSIDE_CASES):
        return True
    return bool(result.bounds) and not result.bounds.get("case")


#: a test file pytest could not collect, as the runner says it ("collection failed (FILE): ")
UNCOLLECTED = re.compile(r"^collection failed \(([^)\n]+)\): ")


def _uncollected(outcome: CheckOutcome) -> str | None:
    """The test file (its node id) whose collection failed, where ``outcome`` says so."""
    if outcome.name != EXTRA_TESTS:
        return None
    found = UNCOLLECTED.match(outcome.message)
    return found.group(1) if found else None


def _case_nodeids(
    outcomes: tuple[CheckOutcome, ...], coverage: dict[str, dict], own: str | None
) -> dict[int, str]:
    """outcome index -> the record's node id for each test case outcome. Outcomes name
    a case without its file; both come in the order the cases ran, so each outcome takes
    the next record of its name (a name two files share goes to each in turn)."""
    keys = [k for k in coverage if k.split("::", 1)[0] != own]
    found: dict[int, str] = {}
    at = 0
    prefix = f"{EXTRA_TESTS}::"
    for index, outcome in enumerate(outcomes):
        if not outcome.name.startswith(prefix):
            continue
        case = outcome.name[len(prefix) :]
        ahead = _named(keys, case, at)
        anywhere = _named(keys, case, 0)
        if ahead:
            at = ahead[0] + 1
        picked = ahead[:1] or anywhere[:1]
        if picked:
            found[index] = keys[picked[0]]
    return found


def _named(keys: list[str], case: str, start: int) -> list[int]:
    """The indexes from ``start`` on of the records (node ids ``keys``) of the case named
    ``case`` (without its file)."""
    return [i for i in range(start, len(keys)) if keys[i].split("::", 1)[-1] == case]


def left_out_line(records: list[dict]) -> str:
    """One line for the cases left out: "3 cases left out: 2 failed on the original, 1
    over --case-time 5 s"."""
    files = Counter(r["why"] for r in records)[UNCOLLECTED_WHY]
    n = len(records) - files
    parts = ", ".join(_left_out_counts(records))
    cases = f"{n} test case{'s' if n != 1 else ''} left out: {parts}" if n else ""
    if not files:
        return cases
    uncollected = f"{files} test file{'s' if files != 1 else ''} pytest could not collect"
    return f"{cases}; {uncollected} left out" if cases else f"{uncollected} left out"


def _left_out_counts(records: list[dict]) -> list[str]:
    """The cases left out counted by why: "2 failed on the original", "1 over --case-time 5 s"."""
    counts = Counter(r["why"] for r in records)
    parts = [f"{counts[FAILED]} failed on the original"] if counts[FAILED] else []
    if counts[LIMIT]:
        parts.append(f"{counts[LIMIT]} ran past the original's limit")
    slow = [r for r in records if r["why"] == SLOW]
    if slow:
        limit = re.search(r"--case-time (\S+) s", slow[0]["reason"])
        parts.append(f"{len(slow)} over --case-time {limit.group(1) if limit else '?'} s")
    return parts


#: the original's ``extra`` key: the ``-k`` its rerun passed with (every later job's)
DESELECTED = "deselected"
#: ``--case-time``: how many times an original that ran out of time runs again, each time
#: without the case it was running at the limit and the finished cases over the time
RERUNS = 3


def without_slow_cases(
    ctx: StageContext, job, result: JobResult, cached: bool, on_progress
) -> tuple[JobResult, bool]:
    """``--case-time S``, project mode: an original that ran out of time runs again
    without the case it was running at the limit (it ran past the limit) and the cases
    that finished slower than S, deselected by name (pytest's ``-k``), up to ``RERUNS``
    times. The cases so left out ride in the result's ``extra["left_out_cases"]``. Where
    a case cannot be named to ``-k``, or no case is left to leave out, the timeout stays."""
    case_time = ctx.settings.case_time_s
    if case_time is None or ctx.kernel.project is None:
        return result, cached
    left: dict[str, dict] = {}
    for _ in range(RERUNS):
        cases = result.extra.get("cases") or {}
        more = _slow_in(cases, case_time, ctx.settings.timeout_s)
        if not _nameable(more):
            break
        left.update({r["case"]: r for r in more})
        keyword = _deselecting(left, ctx.settings.keyword)
        result, cached = run_original(ctx, _with_keyword(job, keyword), on_progress)
        if result.status is not JobStatus.TIMEOUT:
            extra = {**result.extra, LEFT_OUT_CASES: list(left.values()), DESELECTED: keyword}
            return replace(result, extra=extra), cached
    return result, cached


def _nameable(more: list[dict]) -> bool:
    """Whether there are cases to leave out and pytest's ``-k`` can name each of them."""
    return bool(more) and all(K_NAME.match(r["case"].split("::")[-1]) for r in more)


def _deselecting(left: dict[str, dict], keyword: str | None) -> str:
    """The ``-k`` that leaves out every case in ``left`` by its name (within the user's
    own ``-k``, where one was given)."""
    shown = sorted({r["case"].split("::")[-1] for r in left.values()})
    deselect = f"not ({' or '.join(shown)})"
    return f"({keyword}) and {deselect}" if keyword else deselect


def _with_keyword(job, keyword: str):
    """The original's job with the project's test files run under the ``-k`` ``keyword``."""
    checks = tuple(replace(c, keyword=keyword) if c.name == EXTRA_TESTS else c for c in job.checks)
    return replace(job, checks=checks)


def with_case_clock(job, seconds: float):
    """The original's job with each of the project's test files' cases stopped once it has
    run ``seconds`` (``--case-time``; ``harness/runner.case_clock``): such a case is left
    out as slow (``leave_out_cases``), and one slow case costs the original ``seconds``,
    not its whole limit. Project mode only, where a case the original fails is left out
    and the run goes on."""
    checks = tuple(
        replace(c, case_time_s=float(seconds)) if c.name == EXTRA_TESTS else c for c in job.checks
    )
    return replace(job, checks=checks)


def _slow_in(cases: dict, case_time: float, limit_s: float) -> list[dict]:
    """The cases a timed-out original's record shows over ``case_time``: the one running
    at the limit, and each finished one slower than it."""
    found = []
    running = cases.get("running") or ""
    if running:
        reason = f"ran past the original's limit of {limit_s:g} s (it was running then)"
        found.append({"case": running, "why": LIMIT, "reason": reason, "duration_s": 0.0,
                      "functions": []})  # fmt: skip
    for case in cases.get("finished") or []:
        seconds = float(case.get("duration_s") or 0.0)
        if seconds > case_time:
            reason = f"took {seconds:.2f} s on the original, over --case-time {case_time:g} s"
            found.append({"case": case["case"], "why": SLOW, "reason": reason,
                          "duration_s": round(seconds, 3), "functions": []})  # fmt: skip
    return found
