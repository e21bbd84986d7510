"""A kernel library in one run: every kernel module below the paths given, judged by the
project's test suite, in one report.

``mutant-gate run src/kernel_lib --tests tests``: ``find_modules`` walks the paths for
``.py`` files with a ``@triton.jit`` function (less ``--exclude`` globs), ``find_tests``
walks the test paths for the files ``pytest PATH`` would collect (both in
``library_paths``). ``Library`` then drives
one project-mode run per module over the session's one sandbox pool and one cache (an
interrupted library run resumes from the cache), each module given the whole suite; the
runs overlap (the next module starts in the tail of the one before, so no worker idles
while a module's last jobs and later stages run) and are shown one after the other:

- the suite's original runs once: the first module's passing original is every other
  module's baseline (``SharedOriginal``; the job differs from module to module only in
  which module stands at its import path, and each stands there with its own source),
  so its per-case record of the jit functions each case launched selects every
  module's cases (``stage.select_tests``);
- a module no case reaches has all its mutants "not reached" (``files[].status``
  ``not_reached``); a module whose run fails (its original, its loading) is
  ``left_out`` with the one-line reason, and the run goes on;
- ``--shard K/N`` keeps the mutants whose id hashes to share K (``in_shard``), and
  ``merge`` joins shards' reports into the report an unsharded run writes.

The report (``library_report``): the rows of every module, each naming its ``file``,
a ``files`` section (per module: mutants, killed, survived, score, status, reason), and
the library's ``score`` (``report.score``: your tests, and ``with_written``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import queue
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from .baseline import left_out_line
from .checks.tolerance import per_line
from .errors import BadInput
from .events import Event, MutantFinished, RunFinished
from .job import JobResult
from .jobs import toolchain
from .kernel_file import GIVEN
from .library_paths import shown
from .pipeline import Plan
from .project import module_path, record_reaches
from .records import Mutant
from .report import SCHEMA_VERSION, score, written_names
from .settings import RunSettings
from .stage import StageContext
from .survivor_kinds import counts
from .vocabulary import Verdict

JUDGED, NOT_REACHED, LEFT_OUT = "judged", "not_reached", "left_out"
#: how often the module being shown looks whether the newest module reached its tail
POLL_S = 0.5
#: how an original whose test paths collect no case fails (pytest's exit code 5)
NO_CASE = "no tests ran (pytest exit code 5)"


# -- shards ------------------------------------------------------------------------------
SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``K/N`` -> (K, N), 1 <= K <= N; anything else is bad input."""
    if text is None:
        return None
    match = SHARD.match(text)
    if not match:
        raise BadInput(f"--shard {text}: expected K/N, e.g. --shard 1/3")
    k, n = int(match.group(1)), int(match.group(2))
    if n < 1 or not 1 <= k <= n:
        raise BadInput(f"--shard {text}: K must be between 1 and N (N at least 1)")
    return k, n


def in_shard(mutant_id: str, shard: tuple[int, int] | None) -> bool:
    """Whether shard K of N judges the mutant: by its id's hash, the same on every machine."""
    if shard is None:
        return True
    k, n = shard
    return int(hashlib.sha256(mutant_id.encode()).hexdigest()[:12], 16) % n == k - 1


# -- one module's run in the library ------------------------------------------------------
@dataclass
class SharedOriginal:
    """The suite's passing original, taken by every module run after the first one that
    ran it. Keyed by what the original job runs beside the module: the project's root,
    its import root and the suite's files (written tests change the suite: not shared)."""

    results: dict[tuple, JobResult] = field(default_factory=dict)
    #: the suite's original that failed or hit its limit, and the one line that said so:
    #: every module's original is the same job (each module stands at its import path
    #: with its own source), so no later module runs it again
    failed: dict[tuple, str] = field(default_factory=dict)
    ran: int = 0  # module baselines that ran the suite (or read it from the cache)
    shared: int = 0  # module baselines that took another module's

    @staticmethod
    def key(ctx: StageContext) -> tuple | None:
        kernel = ctx.kernel
        if kernel.project is None or any(t.origin != GIVEN for t in kernel.tests):
            return None
        given = tuple((t.path, t.select) for t in kernel.tests)
        return (kernel.project.root, kernel.project.import_root, given)


def _without_path(reason: str, path: str) -> str:
    """A module's failure line without its leading ``PATH: `` (said of the suite)."""
    return reason[len(path) + 2 :] if reason.startswith(f"{path}: ") else reason


class LibraryPlan(Plan):
    """A module of a library: every mutant of its shard, the whole suite beside it, the
    suite's original shared with the other modules."""

    whole_suite = True

    def __init__(self, shared: SharedOriginal, shard: tuple[int, int] | None) -> None:
        self.shared = shared
        self.shard = shard
        self.asked: tuple | None = None  # the key this module asked for
        self.took_shared = False  # this module's original was another module's

    def choose(self, ctx: StageContext, mutants: list[Mutant]) -> list[Mutant]:
        chosen = [m for m in mutants if in_shard(m.id, self.shard)]
        if self.shard is not None:
            ctx.set_mutants(chosen)  # the report holds this shard's rows only
        return chosen

    def original(self, ctx: StageContext) -> JobResult | None:
        key = SharedOriginal.key(ctx)
        self.asked = key
        if key is not None and key in self.shared.failed:
            raise BadInput(
                f"the suite's original, as for an earlier module: {self.shared.failed[key]}"
            )
        found = self.shared.results.get(key) if key is not None else None
        if found is not None:
            self.shared.shared += 1
            self.took_shared = True
        return found

    def ran_original(self, ctx: StageContext, result: JobResult) -> None:
        key = SharedOriginal.key(ctx)
        if key is not None and key not in self.shared.results:
            self.shared.ran += 1
            self.shared.results[key] = result


@dataclass
class ModuleRun:
    """One module's part: its report, or why it was left out; its plan (did it take the
    suite's original from an earlier module) and its driver (``Session.write_tests``)."""

    path: str  # absolute
    report: dict | None = None
    reason: str = ""
    plan: LibraryPlan | None = None
    driver: object = None
    #: when its run began and ended, in seconds after the library run's start
    started_s: float | None = None
    finished_s: float | None = None

    @property
    def took_shared(self) -> bool:
        return self.plan is not None and self.plan.took_shared


class _Feed:
    """A module's events, produced in a thread of its own into a queue: the module runs
    while the one before it is still being shown. ``tail`` is set once fewer of its mutant
    jobs are left than the pool has workers (or its run ended): the pool would idle, so
    the next module may start."""

    def __init__(self, events: Iterator[Event], workers: int) -> None:
        self.queue: queue.Queue = queue.Queue()
        self.tail = threading.Event()

        def work() -> None:
            try:
                for event in events:
                    if isinstance(event, MutantFinished) and event.total - event.done < workers:
                        self.tail.set()
                    self.queue.put(("event", event))
            except BaseException as exc:  # noqa: BLE001 - raised again where it is shown
                self.queue.put(("error", exc))
            self.tail.set()
            self.queue.put(("end", None))

        threading.Thread(target=work, name="library-module", daemon=True).start()

    def take(self, wait_s: float) -> tuple[str, object] | None:
        try:
            return self.queue.get(timeout=wait_s)
        except queue.Empty:
            return None


class Library:
    """The library's run: ``modules(session)`` yields (module path, its events) for each
    module in turn (drive each to its end before the next); ``report()`` then joins them.
    A module whose run raises ``BadInput`` ends its events early and is left out."""

    def __init__(
        self,
        settings: RunSettings,
        modules: list[str],
        tests: list[str],
        *,
        paths: list[str],
        given_tests: list[str],
        exclude: tuple[str, ...] = (),
        shard: tuple[int, int] | None = None,
        unchanged: list[str] | None = None,
        overlap: bool = True,
    ) -> None:
        self.settings = settings
        #: the next module starts in the tail of the one before (False: once it has ended,
        #: as ``benchmarks/library_overlap.py`` compares)
        self.overlap = overlap
        self.modules = modules
        #: ``--changed-since``: the modules with no changed line, not run
        self.unchanged = list(unchanged or [])
        self.tests = tests
        self.paths, self.given_tests, self.exclude = paths, given_tests, exclude
        self.shard = shard
        self.shared = SharedOriginal()
        self.runs: list[ModuleRun] = []
        self.started = time.perf_counter()

    def module_runs(self, session) -> Iterator[tuple[ModuleRun, Iterator[Event]]]:
        """(module, its events) for each module in turn, on ``session``'s sandbox and cache.
        Drive each to its end before the next: events come module by module, in order.
        Underneath, the modules overlap on the one pool: the next module starts once the
        newest one running has fewer mutant jobs left than the pool has workers (or has
        ended), so no worker idles through a module's tail or its later stages; its events
        wait until it is shown. The first module runs alone until then: the suite's
        original it runs is every later module's (``SharedOriginal``)."""
        self.started = time.perf_counter()
        feeds: list[tuple[ModuleRun, _Feed]] = []

        def launch() -> None:
            path = self.modules[len(feeds)]
            plan = LibraryPlan(self.shared, self.shard)
            run = ModuleRun(path, plan=plan, started_s=self._clock())
            self.runs.append(run)
            settings = replace(self.settings, kernel_path=path, tests=tuple(self.tests))
            events = session.events(settings, plan=plan)  # the driver is made here, at once
            run.driver = session.driver
            workers = max(1, self.settings.workers or getattr(session.sandbox, "size", 1))
            workers = workers if self.overlap else 0  # 0: its tail is its end
            feeds.append((run, _Feed(self._events(run, events), workers)))

        def more() -> None:  # the newest module in its tail: start the next
            while len(feeds) < len(self.modules) and feeds[-1][1].tail.is_set():
                launch()

        def shown(feed: _Feed) -> Iterator[Event]:
            while True:
                taken = feed.take(POLL_S)
                more()
                if taken is None:
                    continue
                kind, value = taken
                if kind == "end":
                    return
                if kind == "error":
                    assert isinstance(value, BaseException)
                    raise value
                yield value  # type: ignore[misc]

        if self.modules:
            launch()
        for number in range(len(self.modules)):
            more()
            if number == len(feeds):  # cannot happen: the one before ended, so its tail is set
                launch()
            run, feed = feeds[number]
            yield run, shown(feed)

    def _clock(self) -> float:
        return round(time.perf_counter() - self.started, 2)

    def _events(self, run: ModuleRun, events: Iterator[Event]) -> Iterator[Event]:
        try:
            for event in events:
                if isinstance(event, RunFinished):
                    run.report = event.report
                    run.finished_s = self._clock()
                yield event
        except BadInput as exc:
            self._bad_input(run, exc)

    def _bad_input(self, run: ModuleRun, exc: BadInput) -> None:
        """Records a module's run that ended on bad input: its reason, and the suite's
        original's failure for the modules that share it; a suite with no test case is
        the library's bad input, raised."""
        run.finished_s = self._clock()
        if NO_CASE in str(exc):  # the suite, not the module: every module would say it
            tests = " ".join(self.given_tests) or "(none)"
            raise BadInput(f"--tests {tests}: pytest collects no test case") from None
        run.reason = str(exc)
        key = run.plan.asked if run.plan is not None else None
        if key is not None and key not in self.shared.results:  # the suite's original
            self.shared.failed.setdefault(key, _without_path(run.reason, run.path))

    def report(self) -> dict:
        """The library's report as the module runs left it."""
        reports = [r.report for r in self.runs if r.report is not None]
        first = reports[0] if reports else None
        files = self._files()
        rows = self._rows()
        settings = self._settings(first)
        sandbox = self._sandbox(first, reports)
        library = self._library()
        return library_report(
            run_id=_library_id(files),
            library=library,
            files=files,
            rows=rows,
            tests=_joined_tests([r["tests"] for r in reports]),
            settings=settings,
            toolchain=first["toolchain"] if first else toolchain(self.settings.mode),
            sandbox=sandbox,
            baseline=_joined_baseline(reports),
            complete=all(r.get("complete") for r in reports),
            left_out_cases=_joined_left_out([r.get("left_out_cases") or [] for r in reports]),
        )

    def _files(self) -> list[dict]:
        """Each module's ``files`` entry before its counts, with when its run began and
        ended."""
        return [
            {**file_record(r.path, r.report, r.reason), "started_s": r.started_s,
             "finished_s": r.finished_s}
            for r in self.runs
        ]  # fmt: skip

    def _rows(self) -> list[dict]:
        """The rows of every module that has a report, each naming its module's file."""
        return [
            {**row, "file": shown(r.path)}
            for r in self.runs
            if r.report is not None
            for row in r.report["mutants"]
        ]

    def _settings(self, first: dict | None) -> dict:
        """The first module's settings (the run's, with no module), less its kernel
        path (one per module: ``files``), with the suite's test files."""
        settings = dict(first["settings"] if first else self.settings.to_json())
        settings["kernel_path"] = None  # one per module: ``files``
        settings["tests"] = [shown(t) for t in self.tests]
        return settings

    def _sandbox(self, first: dict | None, reports: list[dict]) -> dict:
        """The pool the modules shared: the originals' and the mutants' times summed over
        the modules, the wall time the library's run's own."""
        return {
            "backend": first["sandbox"]["backend"] if first else self.settings.backend,
            "workers": first["sandbox"]["workers"] if first else (self.settings.workers or 1),
            "original_s": round(sum(r["sandbox"].get("original_s", 0.0) for r in reports), 4),
            "mutants_wall_s": round(
                sum(r["sandbox"].get("mutants_wall_s", 0.0) for r in reports), 2
            ),
            "wall_s": round(time.perf_counter() - self.started, 2),
        }

    def _library(self) -> dict:
        """The report's ``library`` section: the paths, tests and flags given, the test
        files found, how many modules ran the suite's original and how many shared it."""
        library = {
            "paths": list(self.paths),
            "tests": list(self.given_tests),
            "exclude": list(self.exclude),
            "test_files": [shown(t) for t in self.tests],
            "shard": f"{self.shard[0]}/{self.shard[1]}" if self.shard else None,
            "originals_run": self.shared.ran,
            "originals_shared": self.shared.shared,
        }
        if self.settings.changed_since is not None:
            library["changed_since"] = self.settings.changed_since
            library["unchanged"] = [shown(p) for p in self.unchanged]
        return library


def _joined_left_out(lists: list[list[dict]]) -> list[dict]:
    """The cases the modules' runs left out (the suite's: each module's run takes the
    same original), each once, in the order first named."""
    joined: dict[str, dict] = {}
    for entries in lists:
        for entry in entries:
            joined.setdefault(entry["case"], entry)
    return list(joined.values())


def _library_id(files: list[dict]) -> str:
    digest = hashlib.sha256("".join(f["sha256"] for f in files).encode()).hexdigest()
    return "lib-" + time.strftime("%Y%m%d-%H%M%S") + "-" + digest[:8]


def _file_sha(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return hashlib.sha256(b"").hexdigest()


def file_record(path: str, report: dict | None, reason: str = "") -> dict:
    """A module's entry of ``files`` before its counts (``library_report`` adds them)."""
    located = module_path(path)
    record: dict = {
        "path": shown(path),
        "module": located[1] if located else None,
        "sha256": report["kernel"]["sha256"] if report else _file_sha(path),
        "jit_functions": list(report["kernel"]["jit_functions"]) if report else [],
        "run_id": report["run_id"] if report else None,
    }
    if report is None:
        record.update(status=LEFT_OUT, reason=reason or "its run ended before a report")
    return record


def _joined_tests(lists: list[list[dict]]) -> list[dict]:
    """Every module's ``tests`` entries, one per name, their kills joined."""
    joined: dict[str, dict] = {}
    for entries in lists:
        for entry in entries:
            had = joined.get(entry["name"])
            if had is None:
                joined[entry["name"]] = {**entry, "kills": list(entry.get("kills") or [])}
            else:
                had["kills"] += [k for k in entry.get("kills") or [] if k not in had["kills"]]
    return list(joined.values())


def _joined_baseline(reports: list[dict]) -> dict:
    """The suite's original as the modules' runs took it: its time (the first module's:
    the others shared it), the shims any needed, its cases."""
    if not reports:
        return {"duration_s": 0.0, "shims": []}
    shims = sorted({s for r in reports for s in r["baseline"].get("shims", [])})
    first = reports[0]["baseline"]
    spread = {"spread": first["spread"]} if "spread" in first else {}
    return {"duration_s": first["duration_s"], "shims": shims, "cases": first.get("cases", []),
            **spread}  # fmt: skip


def _row_order(files: list[dict]):
    index = {f["path"]: n for n, f in enumerate(files)}
    return lambda row: (index.get(row["file"], len(index)), row["line"], row["col"], row["id"])


def _counted(
    record: dict, rows: list[dict], written: frozenset[str], left: list[dict] | None = None
) -> dict:
    """A ``files`` entry with its counts and status from its rows; a module no case
    reaches but cases left out (``left``) would have is left out, saying so."""
    mine = score(rows, written)
    errors = sum(1 for r in rows if r["verdict"] == Verdict.ERROR.value)
    entry = {
        **record,
        "mutants": len(rows),
        "killed": mine["killed"],
        # survivors of your tests: a mutant only a written test kills is one of them
        "survived": len(rows) - mine["killed"] - len(mine["excluded"]) - errors,
        "score": mine["adjusted"],
        "status": record.get("status") or JUDGED,
    }
    if entry["status"] == JUDGED:
        entry.update(_reach_of(record, rows, left or []))
    entry.setdefault("reason", "")
    return entry


def _reach_of(record: dict, rows: list[dict], left: list[dict]) -> dict:
    """A judged module's status and reason where no case reached it (left out where every
    case that would have was left out), or the functions no case reached."""
    if rows and all(r.get("reached") is False for r in rows):
        return _never_reached(record, left)
    unreached = sorted({r["function"] for r in rows if r.get("reached") is False})
    return {"not_reached": unreached} if unreached else {}


def _never_reached(record: dict, left: list[dict]) -> dict:
    """The status and reason of a judged module no case reached: left out where cases that
    would have were left out, else not reached."""
    kernels = set(record.get("jit_functions") or [])
    # a left-out case that reached this module's functions (another module's functions
    # of the same names, a backend's copy, are not its)
    lost = [c for c in left if record_reaches(c, record.get("module"), kernels)]
    if lost:
        why = f"every test case that reaches it was left out ({left_out_line(lost)})"
        return {"status": LEFT_OUT, "reason": why}
    of = record.get("module") or record["path"]
    why = f"not reached by the tests: no test case launches a kernel of {of}"
    return {"status": NOT_REACHED, "reason": why}


def library_report(
    *,
    run_id: str,
    library: dict,
    files: list[dict],
    rows: list[dict],
    tests: list[dict],
    settings: dict,
    toolchain: dict,
    sandbox: dict,
    baseline: dict,
    complete: bool,
    left_out_cases: list[dict] | None = None,
) -> dict:
    """The library's report: built here for a run and for ``merge``, so a merged report
    is the one an unsharded run writes (rows in file, line, column, id order)."""
    rows = sorted(rows, key=_row_order(files))
    written = written_names(tests)
    entries = [
        _counted(f, [r for r in rows if r["file"] == f["path"]], written, left_out_cases)
        for f in files
    ]
    # a module left out (every case that reaches it was) is said, not scored
    out = {e["path"] for e in entries if e["status"] == LEFT_OUT}
    judged = [r for r in rows if r["verdict"] != "pending" and r["file"] not in out]
    left = {"left_out_cases": left_out_cases} if left_out_cases else {}
    return {
        **_survivors_said(judged),
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "library": library,
        "files": entries,
        "toolchain": toolchain,
        "settings": settings,
        "sandbox": sandbox,
        "tests": tests,
        "baseline": baseline,
        "mutants": rows,
        "score": score(judged, written),
        "complete": complete,
        **left,
    }


def _survivors_said(rows: list[dict]) -> dict:
    """The library's survivors by kind, and what the tolerance hid per test line, drawn
    from every module's rows (as a module's run says them of its own)."""
    tolerance = {r["id"]: r["tolerance"] for r in rows if isinstance(r.get("tolerance"), dict)}
    out: dict = {"survivor_kinds": counts(rows)}
    if tolerance:
        out["checks"] = {
            "tolerance": {
                "mutants": len(tolerance),
                "hidden": sum(bool(x.get("hidden")) for x in tolerance.values()),
                "proposals": sum(x.get("proposal") is not None for x in tolerance.values()),
                "lines": per_line(tolerance),
            }
        }
    return out


# -- per-path thresholds ----------------------------------------------------------------------
def under_thresholds(report: dict, thresholds: list[tuple[str, float]]) -> list[str]:
    """``[tool.mutant-gate.fail-under-paths]``: one line for each module whose adjusted
    score (your tests') is under the percent of the first glob its path matches (globs
    are absolute: the configuration's directory joined). A module left out under a
    threshold fails it too; one with no mutant has no score to gate."""
    if not thresholds:
        return []
    lines = []
    for entry in _gated_files(report):
        path = os.path.abspath(entry["path"])
        found = next(((g, p) for g, p in thresholds if fnmatch.fnmatch(path, g)), None)
        if found is None:
            continue
        line = _under_line(entry, *found)
        if line:
            lines.append(line)
    return lines


def _gated_files(report: dict) -> list[dict]:
    """The report's ``files`` entries; one kernel file's run as one judged entry."""
    files = report.get("files")
    if files is not None:
        return files
    kernel = report.get("kernel") or {}
    score_ = (report.get("score") or {}).get("adjusted")
    return [{"path": kernel.get("path", ""), "score": score_, "status": JUDGED}]


def _under_line(entry: dict, glob: str, pct: float) -> str:
    """The line for a module under the threshold ``pct`` of ``glob`` (left out, or its
    score below it); empty where it is not under."""
    under = f"under its threshold {pct:g}% (fail-under-paths {shown(glob)})"
    if entry["status"] == LEFT_OUT:
        why = entry.get("reason") or "no score"
        return f"{shown(entry['path'])}: left out ({why}), {under}"
    if entry.get("score") is not None and entry["score"] < pct:
        return f"{shown(entry['path'])}: {entry['score']:.1f}%, {under}"
    return ""


# -- merging shards ---------------------------------------------------------------------------
#: settings that may differ between shards' machines without changing a verdict
LOCAL_SETTINGS = frozenset({"workers", "cache_dir", "use_cache", "memory_mb", "fail_under"})


def _comparable(settings: dict) -> dict:
    data = {k: v for k, v in settings.items() if k not in LOCAL_SETTINGS}
    writers = dict(data.get("writers") or {})
    writers.pop("write_tests", None)
    data["writers"] = writers
    return data


def merge(reports: list[tuple[str, dict]]) -> dict:
    """Shards' reports (``(path, report)``) joined into the report an unsharded run of
    the same library writes. Reports of other files, other settings, a shard twice or
    one missing are bad input (one line)."""
    _check_libraries(reports)
    _check_shards(reports)
    _check_alike(reports)
    first = reports[0][1]
    records = _merged_files(reports)
    library = _merged_library(reports)
    sandbox = _merged_sandbox([r["sandbox"] for _, r in reports])
    return library_report(
        run_id=_library_id(records),
        library=library,
        files=records,
        rows=[row for _, r in reports for row in r["mutants"]],
        tests=_joined_tests([r["tests"] for _, r in reports]),
        settings=first["settings"],
        toolchain=first["toolchain"],
        sandbox=sandbox,
        baseline=first["baseline"],
        complete=all(r.get("complete") for _, r in reports),
        left_out_cases=_joined_left_out([r.get("left_out_cases") or [] for _, r in reports]),
    )


def _merged_files(reports: list[tuple[str, dict]]) -> list[dict]:
    """Each module's ``files`` entry before its counts, as the first shard names it;
    left out where any shard left it out, with the first such shard's reason."""
    records = []
    for number, record in enumerate(reports[0][1]["files"]):
        left = [r["files"][number] for _, r in reports if r["files"][number]["status"] == LEFT_OUT]
        keep = {k: record[k] for k in ("path", "module", "sha256", "jit_functions", "run_id")}
        if left:
            keep.update(status=LEFT_OUT, reason=left[0]["reason"])
        records.append(keep)
    return records


def _merged_library(reports: list[tuple[str, dict]]) -> dict:
    """The first shard's ``library`` section as an unsharded run's: no shard, the
    originals counted over every shard, and the run ids merged."""
    return {
        **reports[0][1]["library"],
        "shard": None,
        "originals_run": sum(r["library"].get("originals_run", 0) for _, r in reports),
        "originals_shared": sum(r["library"].get("originals_shared", 0) for _, r in reports),
        "merged": [r["run_id"] for _, r in reports],
    }


def _merged_sandbox(sandboxes: list[dict]) -> dict:
    """The shards' ``sandbox`` sections as one: the first shard's pool, the times summed,
    the wall time the longest shard's (the shards run side by side)."""
    return {
        "backend": sandboxes[0]["backend"],
        "workers": sandboxes[0]["workers"],
        "original_s": round(sum(s.get("original_s", 0.0) for s in sandboxes), 4),
        "mutants_wall_s": round(sum(s.get("mutants_wall_s", 0.0) for s in sandboxes), 2),
        "wall_s": round(max(s.get("wall_s", 0.0) for s in sandboxes), 2),  # the longest job
    }


def _check_libraries(reports: list[tuple[str, dict]]) -> None:
    """At least one report, each a library run's."""
    if not reports:
        raise BadInput("merge: no report given")
    for path, report in reports:
        if not isinstance(report.get("files"), list) or "library" not in report:
            raise BadInput(f"{path}: not a library run's report (no files section)")


def _check_shards(reports: list[tuple[str, dict]]) -> None:
    """Every shard of one split, each once."""
    shards = [_shard_of(path, r) for path, r in reports]
    splits = {n for _, n in shards}
    if len(splits) != 1:
        raise BadInput(f"merge: the reports are shards of different splits ({sorted(splits)})")
    n = splits.pop()
    seen = [k for k, _ in shards]
    twice = sorted({k for k in seen if seen.count(k) > 1})
    if twice:
        raise BadInput(f"merge: shard {twice[0]}/{n} is given twice")
    missing = sorted(set(range(1, n + 1)) - set(seen))
    if missing:
        raise BadInput(f"merge: shard {missing[0]}/{n} is missing")


def _check_alike(reports: list[tuple[str, dict]]) -> None:
    """The same files (path and content, in order) and the same settings in every shard."""
    first_path, first = reports[0]
    files = [(f["path"], f["sha256"]) for f in first["files"]]
    mine = _comparable(first["settings"])
    for path, report in reports[1:]:
        theirs = [(f["path"], f["sha256"]) for f in report["files"]]
        if theirs != files:
            differ = sorted({p for p, _ in set(theirs) ^ set(files)})
            raise BadInput(
                f"merge: {path} judged other files than {first_path} "
                f"({', '.join(differ[:3]) or 'in another order'})"
            )
        other = _comparable(report["settings"])
        if mine != other:
            key = next(k for k in sorted(set(mine) | set(other)) if mine.get(k) != other.get(k))
            raise BadInput(f"merge: {path} ran with other settings than {first_path} ({key})")


def _shard_of(path: str, report: dict) -> tuple[int, int]:
    said = (report.get("library") or {}).get("shard")
    if not said:
        raise BadInput(f"{path}: not a shard's report (run with --shard K/N)")
    parsed = parse_shard(said)
    assert parsed is not None
    return parsed
