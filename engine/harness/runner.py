"""Runs one job's checks inside a sandbox child process.

Imported by the warm worker before it forks, so everything heavy (torch,
triton, pytest) is already loaded when a job starts. Uses only the stdlib,
torch, triton, numpy and pytest: the tool's other dependencies never enter a
sandbox.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import runpy
import sys
import time
import traceback
from dataclasses import replace
from typing import Any

from mutant_gate.engine.job import (
    BOUNDS_OUTSIDE_CASES,
    CASE_TIME_WORDS,
    Check,
    CheckKind,
    CheckOutcome,
    Job,
    JobResult,
    JobStatus,
)

from . import (
    batched,
    bounds,
    closeness,
    closeness_helpers,
    compiles,
    imports,
    null_run,
    parity,
    same_ir,
    shims,
    tracebacks,
    xfail,
)
from .cuda_fault import lost_cuda_context
from .project import Coverage, launched, reached, record_launches

TAIL_CHARS = 4000
#: all of a job's failure messages together, in characters (``_fitted``); the answer may
#: hold 1 MiB (``job_process.RESULT_LIMIT``), its cases' names and coverage included
MESSAGES_BYTES = 256 * 1024
MESSAGE_FLOOR = 200
#: Set by the sandbox for a job whose progress someone follows (the original's run):
#: called with a small dict as the checks go (pytest: cases collected, each case done).
PROGRESS: Any = None


def progress(data: dict) -> None:
    if PROGRESS is not None:
        try:
            PROGRESS(data)
        except Exception:  # noqa: BLE001 - progress is a courtesy, never a failure
            pass


def tail(text: str, limit: int = TAIL_CHARS) -> str:
    text = text.rstrip()
    return text if len(text) <= limit else "..." + text[-limit:]


def write_files(job: Job, workdir: str) -> None:
    for rel, text in job.files:
        path = os.path.join(workdir, rel)
        if os.path.isabs(rel) or os.path.normpath(rel).startswith(".."):
            raise ValueError(f"job file path escapes the job directory: {rel!r}")
        os.makedirs(os.path.dirname(path) or workdir, exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    import torch

    torch.manual_seed(seed)


def fill_uninitialized(on: bool, mode: str) -> None:
    """Memory a kernel leaves unwritten reads the same in every run and every pool. On the
    CPU (the interpreter) glibc fills every allocation alike (``MALLOC_PERTURB_``, set by
    ``local.worker_env``: float32 -1.69e38). Device memory comes from torch's caching
    allocator, which hands back what an earlier tensor left there: in compiled mode torch
    fills what ``torch.empty`` (``empty_like``, ``new_empty``...) returns with NaN, or an
    integer type's largest value, as its deterministic mode does. Without it a mutant that
    skips part of an output (a loop's step doubled) passes or fails by what ran before.
    Ops torch has no deterministic version of only warn (``warn_only``); ``--no-poison``
    turns it off. Set through ``torch._C``: ``torch.use_deterministic_algorithms`` also
    imports inductor's config (0.6 CPU s, charged to the job's limit)."""
    if mode == "interpret":
        return
    import torch

    torch._C._set_deterministic_algorithms(on, warn_only=True)
    torch._C._set_deterministic_fill_uninitialized_memory(True)


def _run_main(check: Check, workdir: str) -> CheckOutcome:
    path = os.path.join(workdir, check.path)
    start = time.perf_counter()
    saved_argv = sys.argv[:]
    sys.argv = [path]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            return CheckOutcome(
                check.name, "failed", time.perf_counter() - start, f"SystemExit({exc.code!r})"
            )
    except BaseException:  # noqa: BLE001 - any exception from the check is a failure
        return CheckOutcome(
            check.name, "failed", time.perf_counter() - start, tail(traceback.format_exc())
        )
    finally:
        sys.argv = saved_argv
    return CheckOutcome(check.name, "passed", time.perf_counter() - start)


class _PytestCollector:
    """A pytest plugin that keeps one outcome per test (setup/call/teardown merged)."""

    def __init__(self, check_name: str) -> None:
        self.check_name = check_name
        self.outcomes: dict[str, CheckOutcome] = {}
        self.collect_errors: list[str] = []
        #: modules pytest skipped whole while collecting them (``pytest.skip(...,
        #: allow_module_level=True)``, ``importorskip``): (node id, the reason)
        self.collect_skips: list[tuple[str, str]] = []

    def pytest_collection_finish(self, session) -> None:
        progress({"check": self.check_name, "collected": len(session.items)})

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        # the case now running: what a timeout of the original names (worker.run_job)
        progress({"check": self.check_name, "case": nodeid, "status": "running"})
        self.violations_before = bounds.count()

    def pytest_runtest_logreport(self, report) -> None:
        name = f"{self.check_name}::{report.nodeid.split('::', 1)[-1]}"
        previous = self.outcomes.get(name)
        duration = report.duration + (previous.duration_s if previous else 0.0)
        if report.failed:
            self.outcomes[name] = CheckOutcome(name, "failed", duration, tail(report.longreprtext))
        elif previous is None or previous.status == "passed":
            status = "skipped" if report.skipped else "passed"
            if report.when == "call" or previous is None:
                why = _skip_reason(report) if report.skipped else ""
                self.outcomes[name] = CheckOutcome(name, status, duration, why)
        if report.when == "teardown":  # the case is through: say so to whoever follows
            self._bounds(name, report.nodeid)
            outcome = self.outcomes[name]
            progress(
                {
                    "check": self.check_name,
                    "case": report.nodeid,
                    "status": outcome.status,
                    "duration_s": round(outcome.duration_s, 3),
                }
            )

    def _bounds(self, name: str, nodeid: str) -> None:
        """The bounds violations this case made are its own: each names it, and the case
        fails with the first (a test that caught the checker's exception still made it),
        so an original's case that reads out of bounds is left out like a failing one."""
        message = bounds.attribute(getattr(self, "violations_before", 0), nodeid)
        outcome = self.outcomes[name]
        if message and outcome.status != "failed":
            self.outcomes[name] = replace(outcome, status="failed", message=tail(message))

    def pytest_collectreport(self, report) -> None:
        if report.failed:  # "collection failed (FILE): ..." (``baseline`` reads the file)
            self.collect_errors.append(f"({report.nodeid}): {tail(report.longreprtext)}")
        elif report.skipped:
            why = _skip_reason(report) or "skipped while collecting"
            self.collect_skips.append((report.nodeid, why))


class CaseTimeExceeded(BaseException):
    """Raised into a test case's call by ``CaseClock``: a BaseException, so a test's own
    ``except Exception`` does not swallow it; pytest records it as the case's failure."""


def descendants(root: int) -> list[int]:
    """The processes below ``root`` (children, theirs...), read from /proc; [] where there
    is no /proc."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def kill_all(pids: set[int]) -> None:
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid in pids:  # reaped where they are ours, so none stays a zombie
        try:
            os.waitpid(pid, os.WNOHANG)
        except OSError:
            pass


def case_clock(seconds: float) -> Any:
    """A pytest plugin (``--case-time`` on the original): each case's call is stopped once
    it has run ``seconds``, so a real library's slowest cases cost that, not the job's whole
    limit. SIGALRM rings again every second until the call ends, should the case catch the
    first ring; the timer and the previous handler are restored after each call, and the
    processes a stopped case started (``mp.spawn``'s ranks waiting for each other) are
    killed, not left to run beside the cases after it."""
    import signal

    import pytest

    armed = [False]  # a ring that arrives once the call is over does nothing
    rang = [False]

    def ring(signum, frame) -> None:
        if armed[0]:
            rang[0] = True
            raise CaseTimeExceeded(
                f"{CASE_TIME_WORDS} {seconds:g} s on the original (stopped there)"
            )

    class CaseClock:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_call(self, item):
            before = set(descendants(os.getpid()))
            previous = signal.signal(signal.SIGALRM, ring)
            rang[0] = False
            try:
                armed[0] = True
                signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
                return (yield)
            finally:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
                if rang[0]:  # what the stopped case started would run on beside the rest
                    kill_all(set(descendants(os.getpid())) - before)

    return CaseClock()


def _skip_reason(report) -> str:
    """pytest's words for a skip (``pytest.skip("...")``, a ``skipif`` reason)."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return ""


class _Tee(io.TextIOBase):
    """A text stream that keeps a copy of what passes through it to ``stream``."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.text = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.text.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


class _Capped(io.TextIOBase):
    """pytest's own report on its way to ``stream``: its first ``limit`` characters, the
    rest counted and left out. One a job (``_run_checks``), shared by its pytest runs (a
    spread original runs one a test file). A real library's test files with a hundred
    failing cases (the original's, under ``--case-time``) printed tracebacks past the
    job's output limit, and the job died of it; the cases' outcomes and messages come
    from pytest's reports, not from this text."""

    def __init__(self, stream: Any, limit: int) -> None:
        self.stream, self.left, self.dropped = stream, limit, 0

    def write(self, text: str) -> int:
        room = self.left
        if room:
            self.stream.write(text[:room])
            self.left -= min(room, len(text))
        self.dropped += max(len(text) - room, 0)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", None) or "utf-8"

    def close_report(self) -> None:
        """Say what this pytest run's report lost, if anything."""
        if self.dropped:
            self.stream.write(f"\n[{self.dropped} characters of pytest's report left out]\n")
            self.stream.flush()
            self.dropped = 0


#: pytest's report in a job's output, at most (``_Capped``): a quarter of its output limit
REPORT_CHARS = 1024 * 1024


_NO_AUTOLOAD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
# pytest's unraisable-exception plugin runs gc.collect() five times as a session ends:
# 1.7 s with torch and triton loaded, against 0.05 s for a small test file's cases. It
# only turns exceptions raised in __del__ into warnings: left out.
_QUIET = ("-q", "-p", "no:cacheprovider", "-p", "no:unraisableexception")


def warm_pytest() -> None:
    """Run pytest once, on one passing test in a scratch directory, and put the process
    back as it was. The plugins the environment installs (entry points) are imported and
    their modules' asserts rewritten here, once, instead of in every job forked from this
    process: with a few common plugins that was 2-3.5 CPU s a job, more than a small
    file's checks, and it varied by a second from job to job (a mutant's CPU limit and
    the probe's budget are reckoned from such jobs). Never fatal."""
    import shutil
    import tempfile

    import pytest

    saved = (list(sys.path), list(sys.meta_path), dict(os.environ), set(sys.modules))
    cwd = os.getcwd()
    scratch = tempfile.mkdtemp(prefix="mg-warm-pytest-")
    path = os.path.join(scratch, "test_mg_warm.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("def test_warm():\n    assert True\n")
    try:
        os.chdir(scratch)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            pytest.main([path, *_QUIET, "--rootdir", scratch, "-c", os.devnull])
    except Exception:  # noqa: BLE001 - a warm-up only: the jobs' own runs say what fails
        pass
    finally:
        os.chdir(cwd)
        sys.path[:], sys.meta_path[:] = saved[0], saved[1]
        os.environ.clear()
        os.environ.update(saved[2])
        for name in set(sys.modules) - saved[3]:
            if (getattr(sys.modules.get(name), "__file__", None) or "").startswith(scratch):
                sys.modules.pop(name, None)
        shutil.rmtree(scratch, ignore_errors=True)


def _run_pytest(
    check: Check,
    workdir: str,
    stop_first: bool,
    project: dict | None = None,
    coverage: Any = None,
    report: _Capped | None = None,
) -> list[CheckOutcome]:
    import pytest

    collector = _PytestCollector(check.name)
    if check.preload and check.preload not in sys.modules:
        _preload(check.preload, workdir)
    args, chosen = _pytest_args(check, workdir, stop_first, project)
    plugins = [collector, closeness.tracker(), closeness_helpers.finder(), tracebacks.mender()]
    plugins.append(xfail.not_run())  # cases that cannot fail are not run
    plugins += [coverage] if coverage is not None else []
    if check.case_time_s:
        plugins.append(case_clock(check.case_time_s))
    start = time.perf_counter()
    said = _Tee(sys.stderr)  # pytest writes its usage errors there ("ERROR: not found: ...")
    report = report or _Capped(sys.stdout, REPORT_CHARS)
    before = os.environ.pop(_NO_AUTOLOAD, None)
    if not check.plugins:  # a written test: pytest's own plugins only
        os.environ[_NO_AUTOLOAD] = "1"
    try:
        with contextlib.redirect_stderr(said), contextlib.redirect_stdout(report):
            code = pytest.main(args, plugins=plugins)
    except BaseException:  # noqa: BLE001
        return [
            CheckOutcome(
                check.name, "failed", time.perf_counter() - start, tail(traceback.format_exc())
            )
        ]
    finally:
        report.close_report()
        os.environ.pop(_NO_AUTOLOAD, None)
        if before is not None:
            os.environ[_NO_AUTOLOAD] = before
    outcomes = list(collector.outcomes.values())
    errors = [line for line in said.text.getvalue().splitlines() if line.startswith("ERROR:")]
    seconds = time.perf_counter() - start
    if collector.collect_errors:
        message = "collection failed " + "\n".join(collector.collect_errors)
        outcomes.append(CheckOutcome(check.name, "failed", seconds, tail(message)))
    elif not outcomes:
        outcomes += _none_ran(check, collector, errors, chosen, int(code), seconds)
    return outcomes


def _preload(module: str, workdir: str) -> None:
    """The kernel's module imported ahead of the tests (its definitions captured); where it
    fails, the test's own import says why."""
    from .probe.capturing import _definitions

    try:
        _definitions(module, workdir)
    except BaseException:  # noqa: BLE001 - the test's own import then says what fails
        sys.modules.pop(module, None)


def _pytest_args(
    check: Check, workdir: str, stop_first: bool, project: dict | None
) -> tuple[list[str], list[tuple[str, str]]]:
    """pytest's command line for ``check`` (its cases, the project's configuration or none,
    ``-x``, its ``-k`` / ``-m``), and the selection flags it was given."""
    path = check.path
    if project is not None and not os.path.isabs(path):  # a file of the job (a written
        path = os.path.join(workdir, path)  # test): the checks run from the project's root
    targets = [f"{path}::{s}" for s in check.select] or [path]
    if project is None:
        args = [*targets, *_QUIET, "--rootdir", workdir, "-c", os.devnull]
    else:  # the project's own configuration and conftest files, from its root
        args = [*targets, *_QUIET, "--rootdir", project["root"]]
    if stop_first:
        args.append("-x")
    chosen = [(flag, v) for flag, v in (("-k", check.keyword), ("-m", check.marker)) if v]
    for flag, value in chosen:  # pytest's own selection (--tests FILE -k EXPR -m EXPR)
        args += [flag, value]
    return args, chosen


def _none_ran(
    check: Check, collector: _PytestCollector, errors: list[str], chosen: list, code: int, s: float
) -> list[CheckOutcome]:
    """The outcome of a pytest check that ran no case, in pytest's terms: refused (a node id
    not found, a bad -k / -m expression), skipped whole while collecting (as ``pytest PATH``
    shows a file that skips itself: a skip, not a failure), a selection that leaves none of
    its cases (skipped), else no tests ran."""
    if errors:
        message = f"pytest refused {check.path}: " + " ".join(e[6:].strip() for e in errors)
        return [CheckOutcome(check.name, "failed", s, tail(message))]
    if collector.collect_skips and code == 5:
        return [
            CheckOutcome(f"{check.name}::{nodeid.split('::', 1)[-1]}", "skipped", s, why)
            for nodeid, why in collector.collect_skips
        ]
    if chosen and code == 5:
        why = "no test case selected by " + " ".join(f"{f} {v!r}" for f, v in chosen)
        return [CheckOutcome(check.name, "skipped", s, why)]
    return [CheckOutcome(check.name, "failed", s, f"no tests ran (pytest exit code {code})")]


def _run_harness(check: Check, workdir: str) -> tuple[CheckOutcome, dict | None]:
    """Call ``entry`` (``"module:function"`` inside this package) of the request in
    ``check.path`` with the request; its JSON-able answer travels back as data."""
    import importlib
    import json

    start = time.perf_counter()
    try:
        with open(os.path.join(workdir, check.path), encoding="utf-8") as fh:
            request = json.load(fh)
        module, _, function = request["entry"].partition(":")
        if not module.isidentifier() or not function.isidentifier():
            raise ValueError(f"bad harness entry {request['entry']!r}")
        fn = getattr(importlib.import_module(f"{__package__}.{module}"), function)
        data = fn(request, workdir)
    except BaseException:  # noqa: BLE001 - a failing harness call is a failed check
        return (
            CheckOutcome(
                check.name, "failed", time.perf_counter() - start, tail(traceback.format_exc())
            ),
            None,
        )
    return CheckOutcome(check.name, "passed", time.perf_counter() - start), data


def _enter_project(job: Job, workdir: str) -> tuple[CheckOutcome | None, Any]:
    """Project mode: the mutant at the module's import path, tests from the project root."""
    import importlib

    from . import project

    info = job.project
    mutant = os.path.join(workdir, job.files[0][0])
    sys.path.insert(0, info["import_root"])
    os.chdir(info["root"])
    project.install(info["module"], mutant)
    try:
        importlib.import_module(info["module"])
    except BaseException as exc:  # noqa: BLE001 - reported as the job's failure
        message = f"cannot import {info['module']} from {info['import_root']}: {exc!r}"
        return CheckOutcome("import", "failed", 0.0, tail(traceback.format_exc() + message)), None
    return None, project.Coverage()


def prepare() -> None:
    """Install the batched executor, the bounds check and the shims (idempotent) and clear
    their records. The executor goes first: the bounds check's launch context wraps it.

    The warm worker calls this once before forking, so a child only resets.
    """
    batched.install()
    batched.clear()
    bounds.install()
    bounds.reset()
    shims.install()
    shims.reset_used()


def _interpreter() -> dict:
    """Which executor ran the job's launches: the mode and, per kernel, launches by
    executor and the reasons any fell back to Triton's loop (``batched.summary``)."""
    said = {"mode": batched.mode() or "triton", "kernels": batched.summary()}
    why = batched.unsupported()
    return {**said, "reason": why} if why else said


def _with_undefined_lanes(message: str) -> str:
    """A failing check's message with one line naming the first load that read
    poisoned (undefined) lanes, if any did. When the poison itself reached memory
    (``bounds.poison_stored``) the line comes last and starts like an exception, so
    it is the error's one-line summary; otherwise the failure may have another cause,
    and the line is a note before the check's own message."""
    line = bounds.undefined_lanes_error()
    if not line:
        return message
    if bounds.poison_stored():
        return f"{message.rstrip()}\n{line}"
    note = line.split(": ", 1)[1]
    return f"note: this job {note} (no store wrote the poison itself)\n{message}"


class LineTrace:
    """The lines of one file that ran (``sys.settrace``, other files' frames untraced):
    which lines of the kernel file the checks execute, taken branches of a
    ``tl.constexpr`` included, in the interpreter, where a kernel runs as Python."""

    def __init__(self, path: str) -> None:
        self.path = os.path.realpath(path)
        self.lines: set[int] = set()

    def _local(self, frame, event, arg):
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._local

    def _global(self, frame, event, arg):
        if frame.f_code.co_filename != self.path:
            return None
        self.lines.add(frame.f_lineno)
        return self._local

    def __enter__(self) -> LineTrace:
        import threading

        sys.settrace(self._global)
        threading.settrace(self._global)
        return self

    def __exit__(self, *exc) -> None:
        import threading

        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]


def _fitted(outcomes: list[CheckOutcome]) -> tuple[CheckOutcome, ...]:
    """The outcomes with their failure messages fitted into ``MESSAGES_BYTES`` in all: a
    suite's original that fails hundreds of cases (a real library's on a CPU: 4 KB of
    traceback each) would otherwise answer more than a result may hold, and be run again
    in pieces. The first failure keeps its whole tail (the job's ``error``); the others
    keep their last lines, an equal share of the budget each (``MESSAGE_FLOOR`` at least)."""
    failed = [o for o in outcomes if o.message]
    if sum(len(o.message) for o in failed) <= MESSAGES_BYTES:
        return tuple(outcomes)
    first = next((o for o in outcomes if o.status == "failed"), None)
    share = max(MESSAGE_FLOOR, (MESSAGES_BYTES - TAIL_CHARS) // max(1, len(failed)))
    return tuple(
        o if o is first or len(o.message) <= share else replace(o, message=tail(o.message, share))
        for o in outcomes
    )


def run_checks(job: Job, workdir: str) -> JobResult:
    """Write the job's files into ``workdir`` (the cwd) and run its checks in order."""
    traced = job.trace_lines and job.mode == "interpret" and job.project is None
    project = job.project or {}
    own = (workdir, *(project[k] for k in ("root", "import_root") if project.get(k)))
    with imports.Clock(own) as clock, compiles.Compiles() as compiled:
        if traced:
            with LineTrace(os.path.join(workdir, job.files[0][0])) as trace:
                result = _run_checks(job, workdir)
            result.extra["lines"] = sorted(trace.lines)
        else:
            result = _run_checks(job, workdir)
    result.extra.update(clock.record())
    result.extra.update(compiled.record())
    return result


def _run_checks(job: Job, workdir: str) -> JobResult:
    start = time.perf_counter()
    report = _Capped(sys.stdout, REPORT_CHARS)  # pytest's, over all the job's test files
    write_files(job, workdir)
    # every closeness assertion the checks make, before any of their modules is imported
    closeness.start(job.tighten, job.project["root"] if job.project else workdir)
    sys.path.insert(0, workdir)
    _prepare(job)
    coverage = None
    if job.project is not None:
        failure, coverage = _enter_project(job, workdir)
        if failure is not None:
            seconds = time.perf_counter() - start
            extra = closeness.finish()
            return JobResult(JobStatus.FAILED, (failure,), failure.message, seconds, extra=extra)
    elif any(c.kind is CheckKind.PYTEST for c in job.checks):
        # Each test case's launches and time: a written test runs only for the mutants of
        # the kernels it launches, fastest first (``stage.select_tests``).
        coverage = Coverage()
    outcomes, harness_data = _each_check(job, workdir, coverage, report)
    violations = bounds.violations()
    status, error = _status(outcomes, violations)
    return JobResult(
        status=status,
        outcomes=_fitted(outcomes),
        error=error,
        duration_s=time.perf_counter() - start,
        bounds=violations[0] if violations else None,
        shims=tuple(shims.used()),
        extra=_job_extra(job, harness_data, coverage, violations),
    )


def _prepare(job: Job) -> None:
    """The job's process set up for its checks: seeds, poisoned memory, the interpreter's
    executor and checks (or the compiled mode's shims), the launch record."""
    seed_everything(job.seed)
    fill_uninitialized(job.poison_undefined, job.mode)
    if job.mode == "interpret":
        prepare()
        batched.install(job.interpreter)
        bounds.set_poison(job.poison_undefined)
        bounds.set_races(job.trace_races)
    else:  # compiled: the warm runner (or a child of its own) holds the CUDA context
        same_ir.install()  # a kernel whose IR is one compiled before takes that binary
        shims.install()
        shims.reset_used()
    if job.autotune_config:
        os.environ[shims.AUTOTUNE_ENV] = str(job.autotune_config)
    if job.null_launches:
        null_run.install()
    record_launches()  # the launch record: which kernels the checks reach


def _each_check(
    job: Job, workdir: str, coverage: Any, report: _Capped
) -> tuple[list[CheckOutcome], dict]:
    """The job's checks in order (to the first failure where it stops there): their
    outcomes, and each harness check's data."""
    outcomes: list[CheckOutcome] = []
    harness_data: dict = {}
    for check in job.checks:
        closeness.set_case(check.name)
        if check.kind is CheckKind.MAIN:
            outcomes.append(_run_main(check, workdir))
        elif check.kind is CheckKind.HARNESS:
            outcome, harness_data[check.name] = _run_harness(check, workdir)
            outcomes.append(outcome)
        else:
            outcomes.extend(
                _run_pytest(
                    check, workdir, job.stop_on_first_failure, job.project, coverage, report
                )
            )
        failed = any(o.status == "failed" for o in outcomes) or bounds.violations()
        if failed and job.stop_on_first_failure:
            break
    return outcomes, harness_data


def _status(outcomes: list[CheckOutcome], violations: list) -> tuple[JobStatus, str]:
    """A job's status and error: an access out of bounds first, a lost CUDA context, the
    first failing check, else passed."""
    first_failure = next((o for o in outcomes if o.status == "failed"), None)
    if violations:
        return JobStatus.BOUNDS, violations[0]["message"]
    if first_failure is not None and lost_cuda_context(first_failure.message):
        # The kernel faulted on the GPU: the context is gone, whatever the check caught.
        return JobStatus.CRASH, first_failure.message
    if first_failure is not None:
        return JobStatus.FAILED, _with_undefined_lanes(first_failure.message)
    return JobStatus.PASSED, ""


def _job_extra(job: Job, harness_data: dict, coverage: Any, violations: list) -> dict:
    """The job's records beside its outcomes, each where it has any."""
    undefined = bounds.undefined_lanes() if job.mode == "interpret" else []
    return {
        **({"harness": harness_data} if harness_data else {}),
        **({"coverage": coverage.cases} if coverage is not None else {}),
        **({"autotune_configs": shims.autotune_configs()} if shims.autotune_configs() else {}),
        **({"null_run": {"skipped_launches": null_run.skipped()}} if job.null_launches else {}),
        **({"undefined_lanes": undefined} if undefined else {}),
        # violations no test case made (a module's import launching a kernel)
        **({BOUNDS_OUTSIDE_CASES: n} if (n := sum("case" not in v for v in violations)) else {}),
        **({"interpreter_errors": parity.failures()} if parity.failures() else {}),
        **({"races": bounds.races()} if job.trace_races and job.mode == "interpret" else {}),
        **({"interpreter": _interpreter()} if job.mode == "interpret" else {}),
        **closeness.finish(),  # "closeness" (and "closeness_dropped") where any
        "launched": launched(),
        "reaches": reached(),
    }
