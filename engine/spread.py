"""The original's test suite spread over the run's workers.

A library's suite is hundreds of cases; run as one job it takes the sum of their times, and
one job's limit ends it long before it finishes (a real library's 543 cases did not finish in
the 120 s default on an H200). ``spread_jobs`` splits the original's job into one job a worker
(where the suite has at least two test files a worker's share): the module's own check and the
test files dealt out so that each share holds about the same amount of test code (the files'
sizes; a file's cases stay together, in one pytest session, as its fixtures expect), each share
with the whole limit. ``joined`` then makes the shares' results
one result, as one job running them all would have returned: every outcome, every case's record
(its launches and time), the first failure, the shims and interpreter records of all.

Each share is a job of its own in the cache, so an interrupted original resumes share by share,
and a second run reads them back.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace

from .job import TOO_BIG_WORDS, Check, Job, JobResult, JobStatus
from .kernel_file import EXTRA_TESTS

#: a failed share's status wins over a passing one's; the first in this order over the rest
WORST_FIRST = (
    JobStatus.ERROR,
    JobStatus.CRASH,
    JobStatus.BOUNDS,
    JobStatus.TIMEOUT,
    JobStatus.FAILED,
)


def _size(check: Check) -> int:
    try:
        return os.path.getsize(check.path)
    except OSError:
        return 0


#: test files a share holds at least: a share is a job of its own, with its own start (a
#: fresh pytest session, the project's imports), worth it only for a suite of several files
PER_SHARE = 2


def shares(checks: tuple[Check, ...], workers: int) -> list[tuple[Check, ...]]:
    """The checks in at most ``workers`` shares of at least ``PER_SHARE`` test files: the
    checks that are not test files in the first, the test files dealt largest first onto the
    lightest share; each share keeps the checks in their given order. Too few test files
    to share: one share."""
    tests = [c for c in checks if c.name == EXTRA_TESTS]
    n = min(workers, len(tests) // PER_SHARE)
    if n < 2:
        return [checks]
    owner = _owners(checks, n)
    out = [tuple(c for i, c in enumerate(checks) if owner[i] == k) for k in range(n)]
    return [s for s in out if s]


def _owners(checks: tuple[Check, ...], n: int) -> dict[int, int]:
    """Each check's share (by its index) among ``n``: the checks that are not test files in
    the first, the test files dealt largest first onto the lightest share."""
    load = [0] * n
    owner: dict[int, int] = {}
    for i in sorted(range(len(checks)), key=lambda i: -_size(checks[i])):
        if checks[i].name != EXTRA_TESTS:
            owner[i] = 0
            continue
        k = min(range(n), key=lambda k: (load[k], k))
        owner[i] = k
        load[k] += max(1, _size(checks[i]))
    return owner


def spread_jobs(job: Job, workers: int) -> list[Job]:
    """The original's job as one job a share (just ``[job]`` where it does not split)."""
    split = shares(job.checks, workers)
    if len(split) < 2:
        return [job]
    return [replace(job, checks=share) for share in split]


def _status(results: list[JobResult]) -> JobStatus:
    for status in WORST_FIRST:
        if any(r.status is status for r in results):
            return status
    return results[0].status


def _merged_interpreter(found: list[dict]) -> dict | None:
    if not found:
        return None
    out = {k: v for k, v in found[0].items() if k != "kernels"}
    kernels: dict[str, dict] = {}
    for section in found:
        for name, k in (section.get("kernels") or {}).items():
            into = kernels.setdefault(name, {"batched": 0, "triton": 0, "reasons": {}})
            _add_kernel(into, k)
    return {**out, "kernels": kernels}


def _add_kernel(into: dict, k: dict) -> None:
    """Adds one share's record of a kernel (its batched and Triton launches, its counts of
    reasons and masked lanes) into the joined record ``into``."""
    into["batched"] += k.get("batched", 0)
    into["triton"] += k.get("triton", 0)
    for key in ("reasons", "masked"):
        for why, n in (k.get(key) or {}).items():
            counts = into.setdefault(key, {})
            counts[why] = counts.get(why, 0) + n


def _joined_extra(results: list[JobResult]) -> dict:
    """The shares' records as one job's: the first share's value of anything not joined."""
    extras = [r.extra for r in results]
    out = _first_values(extras)
    out.update(_joined_records(extras))
    out.pop("cases", None)
    if any(r.status is JobStatus.TIMEOUT for r in results):  # the case log a timeout keeps
        out["cases"] = _joined_case_log(results)
    interp = _merged_interpreter([e["interpreter"] for e in extras if e.get("interpreter")])
    if interp is not None:
        out["interpreter"] = interp
    out.pop("limit", None)
    out.update(_failing_limit(results))
    out["spread"] = {"shares": len(results), "seconds": [round(r.duration_s, 3) for r in results]}
    return out


def _first_values(extras: list[dict]) -> dict:
    """Every key any share's record holds, with the first share's value of it."""
    out: dict = {}
    for extra in extras:
        for key, value in extra.items():
            out.setdefault(key, value)
    return out


def _failing_limit(results: list[JobResult]) -> dict:
    """The first share that did not pass's ``limit`` record, as ``{"limit": ...}``; empty
    where there is no such share or it has none."""
    failing = next((r for r in results if r.status is not JobStatus.PASSED), None)
    if failing is not None and "limit" in failing.extra:
        return {"limit": failing.extra["limit"]}
    return {}


def _joined_case_log(results: list[JobResult]) -> dict:
    """The shares' case logs as one timed-out job's: every finished case, the first share's
    running one."""
    logs = [_case_log(r) for r in results]
    return {
        "collected": sum(log["collected"] for log in logs),
        "finished": [c for log in logs for c in log["finished"]],
        "running": next((log["running"] for log in logs if log["running"]), ""),
    }


def _joined_records(extras: list[dict]) -> dict:
    """Per-case coverage merged, the kernels launched and functions reached as one union,
    the lists of findings (races, interpreter errors, undefined lanes) joined, each
    autotuned kernel's configs at their most."""
    return {key: join(extras, key) for key, join in _JOINS.items() if any(key in e for e in extras)}


def _merged(extras: list[dict], key: str) -> dict:
    """The shares' dicts under ``key`` as one (per-case coverage: each case in one share)."""
    return {k: v for e in extras for k, v in (e.get(key) or {}).items()}


def _union(extras: list[dict], key: str) -> list:
    """The shares' lists under ``key`` as one, each item once, in the order first seen."""
    return list(dict.fromkeys(k for e in extras for k in e.get(key) or []))


def _sorted_union(extras: list[dict], key: str) -> list:
    """The shares' lists under ``key`` as one sorted list, each item once."""
    return sorted(_union(extras, key))


def _concatenated(extras: list[dict], key: str) -> list:
    """The shares' lists under ``key`` one after the other (findings are never merged)."""
    return [x for e in extras for x in (e.get(key) or [])]


def _most_configs(extras: list[dict], key: str) -> dict:
    """Each autotuned kernel's count of configs, the most any share saw."""
    configs: dict = {}
    for e in extras:
        for name, n in (e.get(key) or {}).items():
            configs[name] = max(configs.get(name, 0), n)
    return configs


#: how each record the shares' results hold is joined, in the order a joined result holds them
_JOINS = {
    "coverage": _merged,
    "launched": _union,
    "reaches": _sorted_union,
    "races": _concatenated,
    "interpreter_errors": _concatenated,
    "undefined_lanes": _concatenated,
    "autotune_configs": _most_configs,
}


def _case_log(result: JobResult) -> dict:
    """A share's cases as a timed-out job's log holds them (``harness/worker.CaseLog``):
    a timeout's own log; else its outcomes, every one finished."""
    found = result.extra.get("cases")
    if isinstance(found, dict):
        return {
            "collected": int(found.get("collected") or 0),
            "finished": list(found.get("finished") or []),
            "running": found.get("running") or "",
        }
    finished = [
        {"case": o.name.split("::", 1)[1], "status": o.status, "duration_s": o.duration_s}
        for o in result.outcomes
        if "::" in o.name
    ]
    return {"collected": len(finished), "finished": finished, "running": ""}


def _case_seconds(result: JobResult) -> float:
    return sum(float(c.get("duration_s") or 0) for c in _case_log(result)["finished"])


def _case_cpu_seconds(result: JobResult) -> float | None:
    """A share's cases' CPU seconds, as its coverage record holds them; None where a case
    has none."""
    records = (result.extra.get("coverage") or {}).values()
    if not records or any("cpu_s" not in r for r in records):
        return None
    return sum(float(r["cpu_s"]) for r in records)


def _one_start(totals: list[float], cases: list[float]) -> float:
    """Every case's own seconds plus the most any share spent outside its cases."""
    return sum(cases) + max(max(t - c, 0.0) for t, c in zip(totals, cases, strict=True))


def _imports_s(results: list[JobResult], key: str, totals: list[float], cases: list) -> float:
    """The joined job's ``imports`` seconds (``key``: ``cpu_s`` or ``wall_s``), set so that
    its time outside the cases less them is what a warm runner's share pays most: the
    largest of the shares' outside times less their own imports (``harness/imports.py``)."""
    imports = [float((r.extra.get("imports") or {}).get(key, 0.0)) for r in results]
    outside = [max(t - c, 0.0) for t, c in zip(totals, cases, strict=True)]
    warm = max(max(o - i, 0.0) for o, i in zip(outside, imports, strict=True))
    return round(max(outside) - warm, 4)


def joined(results: list[JobResult]) -> JobResult:
    """The shares' results as one job running every check would have returned. Its time,
    in wall and in CPU seconds: every case's own time, plus the most a share spent outside
    its cases (a mutant's job pays one job's start, not every share's: summed, a real
    library's three shares gave its mutants 7-minute limits for 12 CPU s of cases)."""
    if len(results) == 1:
        return results[0]
    status = _status(results)
    failing = next((r for r in results if r.status is status), results[0])
    case_s = [_case_seconds(r) for r in results]
    case_cpu = _cases_cpu_seconds(results)
    extra = _joined_extra(results)
    if any("imports" in r.extra for r in results):
        extra["imports"] = _joined_imports(results, case_s, case_cpu)
    return JobResult(
        status=status,
        outcomes=tuple(o for r in results for o in r.outcomes),
        error=failing.error if status is not JobStatus.PASSED else "",
        duration_s=_one_start([r.duration_s for r in results], case_s),
        network_cut=any(r.network_cut for r in results),
        signal=failing.signal,
        bounds=next((r.bounds for r in results if r.bounds), None),
        shims=tuple(dict.fromkeys(s for r in results for s in r.shims)),
        extra=extra,
        cpu_s=_joined_cpu_s(results, case_cpu),
    )


def _joined_cpu_s(results: list[JobResult], case_cpu: list[float] | None) -> float:
    """The joined job's CPU seconds: every case's own plus the most a share spent outside
    its cases; the shares' sum where their cases' CPU seconds are not known."""
    if case_cpu is None:
        return sum(r.cpu_s for r in results)
    return _one_start([r.cpu_s for r in results], case_cpu)


def _cases_cpu_seconds(results: list[JobResult]) -> list[float] | None:
    """Each share's cases' CPU seconds; None unless every share has them and its own."""
    found = [_case_cpu_seconds(r) for r in results]
    if any(c is None for c in found) or any(r.cpu_s <= 0 for r in results):
        return None
    return found  # type: ignore[return-value]


def _joined_imports(results: list[JobResult], case_s: list[float], case_cpu) -> dict:
    """The joined job's ``imports`` record (``harness/imports.py``): its seconds as a warm
    runner's share pays them, the modules every share loaded."""
    out: dict = {
        "wall_s": _imports_s(results, "wall_s", [r.duration_s for r in results], case_s),
        "modules": sum(int((r.extra.get("imports") or {}).get("modules", 0)) for r in results),
    }
    if case_cpu is not None:
        out["cpu_s"] = _imports_s(results, "cpu_s", [r.cpu_s for r in results], case_cpu)
    return out


def run_original(ctx, job: Job, on_progress=None) -> tuple[JobResult, bool]:
    """The original's job on ``ctx`` (a ``StageContext``), spread over its workers where the
    suite splits (project mode: the test files are the project's own); (result, served
    whole from the cache). The shares run at once, each followed live: every share's cases
    reach ``on_progress`` as they go (its count of collected cases too: the progress line
    adds them up), as one job's would. A share whose answer is too large for one result (a
    real library's thousand cases, their failures' text) runs again as one job a
    test file."""
    jobs = spread_jobs(job, ctx.workers) if ctx.kernel.project is not None else [job]
    found = _side_by_side([lambda job=j: _share(ctx, job, on_progress) for j in jobs])
    if ctx.cancel.is_set() or any(not share for share in found):
        return JobResult(JobStatus.ERROR, error="the original was cancelled"), False
    return _joined_answers(found)


def _joined_answers(found: list[list[tuple[JobResult, bool]]]) -> tuple[JobResult, bool]:
    """The shares' answers as one: their joined result, and whether every one of them was
    served whole from the cache."""
    done = [f for share in found for f in share]
    return joined([r for r, _ in done]), all(c for _, c in done)


def _side_by_side(calls: list) -> list:
    """Each call in a thread of its own (their jobs wait for the pool's workers like any),
    their answers in order."""
    found: list = [None] * len(calls)

    def work(number: int) -> None:
        found[number] = calls[number]()

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


def _executed(ctx, job: Job, on_progress) -> tuple[JobResult, bool]:
    try:
        return ctx.execute(job, on_progress=on_progress)
    except Exception as exc:  # noqa: BLE001 - a failure is data
        return JobResult(JobStatus.ERROR, error=f"sandbox failure: {exc}"), False


def _share(ctx, job: Job, on_progress) -> list[tuple[JobResult, bool]]:
    result, cached = _executed(ctx, job, on_progress)
    pieces = _per_file(job)
    if result.status is not JobStatus.ERROR or TOO_BIG_WORDS not in result.error or not pieces:
        return [(result, cached)]
    # at once down to one test file a job (halving ran a real library's cases again and
    # again), the pieces side by side on the pool
    return _side_by_side([lambda job=p: _executed(ctx, job, on_progress) for p in pieces])


def _per_file(job: Job) -> list[Job] | None:
    """The job as one job a test file (its other checks in the first); None where it holds
    fewer than two test files."""
    tests = [c for c in job.checks if c.name == EXTRA_TESTS]
    if len(tests) < 2:
        return None
    others = tuple(c for c in job.checks if c.name != EXTRA_TESTS)
    return [replace(job, checks=(*others, c) if n == 0 else (c,)) for n, c in enumerate(tests)]
