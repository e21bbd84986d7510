"""A warm sandbox worker: imports torch/triton once, then forks a child per job.

Started by ``LocalSandbox`` as ``python -m mutant_gate.engine.harness.worker``
with an already scrubbed environment. Protocol on stdin/stdout, one JSON object
per line: the worker first says ``{"ready": ...}``, then answers each
``{"job": ...}`` with ``{"result": ...}``. A child that crashes or hangs
becomes a result; the worker itself lives on.

The warm runner (``--warm``) and the sweep after each job are in ``warm.py``; hardening a
job's process and turning what it left into a result, in ``job_process.py``.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback

from . import warm
from .job_process import (
    RESULT_LIMIT,
    SANITIZER_ERROR_EXIT,
    ParentGone,
    _harden,
    _hung_up,
    _read_head,
    _read_tail,
    _result,
    _too_big,
    wall_limit_s,
)
from .warm import _runner, _sandbox_uid, _sweep, run_warm, warm_eligible

#: Set by ``main`` from ``--warm``: which jobs a runner serves (see ``warm_eligible``).
_WARM = False


def _protocol_stream():
    """Keep the real stdout for the protocol; stray prints go to stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return proto


#: Modules that ordinary checks load lazily, at great cost, on first use, imported by a
#: worker once before it forks any job: torch.testing.assert_close pulls in
#: torch.distributed.tensor (sympy...), numpy 2 loads numpy.random on first touch, and
#: a kernel's first launch specialises its arguments with Triton's native code, which
#: imports triton.experimental.gluon (about 0.07 s a job here).
LAZY_MODULES = (
    "torch.distributed.tensor",
    "torch.testing._comparison",
    "numpy.random",
    "triton.experimental.gluon",
)


def _warm_imports() -> dict:
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch
    import triton

    from mutant_gate.engine.harness import compiler, runner

    for name in LAZY_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional warm-up, never fatal
            pass
    # Seeding once here pays the generators' first-use cost before any fork;
    # each child seeds again with its job's seed (cheap from then on).
    if os.environ.get("TRITON_INTERPRET") == "1":
        runner.seed_everything(0)
        # Patch the interpreter once; children inherit the patches and reset the records.
        runner.prepare()
        compiler.warm()  # the compile-check's one-off cost per process, paid before forking
    # Compiled mode: nothing here may touch CUDA. A CUDA context does not survive
    # fork, so each child initialises its own.
    # pytest's first run in a process imports the installed plugins and rewrites their
    # asserts: paid here once, not by every job (their CPU seconds set mutants' limits).
    runner.warm_pytest()

    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": sys.version.split()[0],
    }


def _child(job_data: dict, workdir: str, log_path: str, wfd: int, follow: bool = False) -> None:
    """Runs in the forked child; never returns. ``follow``: progress lines go to the
    worker (``{"progress": ...}``) ahead of the result."""
    code = 0
    try:
        from mutant_gate.engine.harness.runner import run_checks

        if follow:
            _send_progress(wfd)
        from mutant_gate.engine.harness import isolation
        from mutant_gate.engine.job import Job

        os.setpgid(0, 0)
        worker = os.getppid()
        isolation.die_with_parent()
        job = Job.from_json(job_data)
        env = isolation.scrubbed_env(dict(os.environ))
        report = {"network_cut": isolation.cut_network()}
        isolation.redirect_output(log_path)
        keep = tuple(job.project[k] for k in ("root", "import_root") if k in (job.project or {}))
        report["isolation"] = _harden(isolation, keep, job.max_processes)
        if os.getppid() != worker:  # the worker died before the death signal was armed again
            os._exit(1)
        if report["isolation"]["filesystem"] == "private":
            workdir = report["isolation"].pop("workdir")
        isolation.enter_workdir(workdir, env)
        if job.sanitize:
            _exec_sanitized(job_data, workdir, env, wfd, report)  # never returns
        memory = job.memory_mb if job.mode == "interpret" else None
        isolation.apply_limits(memory, job.timeout_s, job.output_limit_bytes)
        me = os.getpid()
        result = run_checks(job, workdir).to_json()
        if os.getpid() != me:  # a process the check forked came back here: it never answers
            os._exit(0)
        result["network_cut"] = report.pop("network_cut")
        result.setdefault("extra", {})["isolation"] = report["isolation"]
        payload = json.dumps(result)
    except BaseException:  # noqa: BLE001 - a harness failure is data, not a dead worker
        payload = json.dumps({"status": "error", "error": traceback.format_exc()[-4000:]})
        code = 1
    try:
        data = (
            payload.encode() + b"\n"
        )  # the newline ends the message: stragglers may hold the pipe
        view = memoryview(data)
        while view:
            view = view[os.write(wfd, view) :]
    finally:  # whatever happens (a dead worker: broken pipe), never return into the worker's loop
        os._exit(code)


def _send_progress(wfd: int) -> None:
    """In the child: each progress report of the checks goes to the worker through ``wfd``
    (a ``{"progress": ...}`` line), ahead of the result."""
    from mutant_gate.engine.harness import runner

    me = os.getpid()

    def report_progress(data: dict) -> None:
        if os.getpid() == me:  # never from a process the check forked
            line = json.dumps({"progress": data}).encode()[:3000] + b"\n"
            os.write(wfd, line)  # one write under PIPE_BUF: never interleaved

    runner.PROGRESS = report_progress


def _exec_sanitized(job_data: dict, workdir: str, env: dict, wfd: int, report: dict) -> None:
    """Replace this child with compute-sanitizer running the job (see harness/sanitized.py)."""
    import shutil as _shutil

    tool = _shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    job_path = os.path.join(workdir, ".mutant-gate-job.json")
    with open(job_path, "w", encoding="utf-8") as fh:
        json.dump(job_data, fh)
    os.set_inheritable(wfd, True)
    # Small over-reads hide inside the caching allocator's blocks: turn it off.
    env = {**env, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    argv = [
        tool, "--tool", "memcheck", "--error-exitcode", str(SANITIZER_ERROR_EXIT),
        "--print-limit", "20", sys.executable, "-m", "mutant_gate.engine.harness.sanitized",
        job_path, str(wfd), json.dumps(report),
    ]  # fmt: skip
    os.execve(tool, argv, env)


def _abandon(pid: int, base: str) -> None:
    """The tool is gone: end job ``pid``, its process group and everything of its uid,
    remove its directory, and raise ``ParentGone``."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    _sweep(_sandbox_uid())
    shutil.rmtree(base, ignore_errors=True)
    raise ParentGone


def run_job(job_data: dict, parent_fd: int | None = None, on_progress=None) -> dict:
    """Fork a child for one job and turn whatever happens into a result dict.

    With ``parent_fd`` (the worker's stdin, whose other end the tool holds), the job
    is abandoned and ``ParentGone`` raised as soon as that pipe hangs up: a tool
    killed mid-job leaves nothing running. With warm runners on (``--warm``), a job
    that may share a process goes to the worker's runner instead. ``on_progress``:
    called with each progress report of the job's checks as it comes (forked jobs)."""
    if _WARM and on_progress is None and warm_eligible(job_data):
        return run_warm(job_data, parent_fd)
    base = tempfile.mkdtemp(prefix="mg-job-")
    workdir = os.path.join(base, "work")
    os.mkdir(workdir)
    log_path = os.path.join(base, "output.log")
    start = time.monotonic()
    pid, rfd = _fork_job(job_data, workdir, log_path, follow=on_progress is not None)
    cases = CaseLog()
    deadline = start + wall_limit_s(job_data)  # the backstop: RLIMIT_CPU is the limit
    chunks, size, timed_out = _read_answer(rfd, parent_fd, pid, base, deadline, on_progress, cases)
    os.close(rfd)
    status = cpu_s = None
    if job_data.get("sanitize"):
        status, cpu_s = _wait_for_memcheck(pid, parent_fd, base, deadline)
    status, cpu_s = _end_job(pid, status, cpu_s)
    _sweep(_sandbox_uid())
    duration = time.monotonic() - start
    output = _read_tail(log_path)
    # memcheck's first error is at the head of its report (the tail may hold only "N
    # errors were not printed"): read it before the job's directory goes.
    head = _read_head(log_path) if job_data.get("sanitize") else ""
    shutil.rmtree(base, ignore_errors=True)
    if size > RESULT_LIMIT and not timed_out:
        return _too_big(size, output, duration)
    answer = b"".join(chunks)
    result = _result(job_data, timed_out, status, answer, output, head, duration, cpu_s or 0.0)
    if timed_out and cases.seen:  # what ran before time ran out: the evidence for a timeout
        result["extra"] = {**result.get("extra", {}), "cases": cases.to_json()}
    return result


def _fork_job(job_data: dict, workdir: str, log_path: str, follow: bool) -> tuple[int, int]:
    """Forks the job's child (``_child``) in a process group of its own: (its pid, the
    read end of the pipe it answers through)."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        _child(job_data, workdir, log_path, wfd, follow=follow)
    os.close(wfd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    return pid, rfd


def _wait_for_memcheck(
    pid: int, parent_fd: int | None, base: str, deadline: float
) -> tuple[int | None, float | None]:
    """A sanitized job: memcheck reports (and sets the exit code) after the job wrote its
    result, so wait for the child until ``deadline``: (its wait status, CPU seconds), or
    (None, None) when it has not ended by then."""
    status = cpu_s = None
    while status is None and time.monotonic() < deadline:
        if _hung_up(parent_fd):
            _abandon(pid, base)
        done, code, used = os.wait4(pid, os.WNOHANG)
        status, cpu_s = (code, used.ru_utime + used.ru_stime) if done else (None, None)
        if status is None:
            time.sleep(0.05)
    return status, cpu_s


def _end_job(pid: int, status: int | None, cpu_s: float | None) -> tuple[int, float | None]:
    """Kills job ``pid``'s process group and, unless it was reaped already (``status``),
    waits for it: (its wait status, its CPU seconds)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if status is None:  # its CPU seconds and those of the children it waited for
        _, status, used = os.wait4(pid, 0)
        cpu_s = used.ru_utime + used.ru_stime
    return status, cpu_s


def _read_answer(
    rfd: int,
    parent_fd: int | None,
    pid: int,
    base: str,
    deadline: float,
    on_progress,
    cases: CaseLog,
) -> tuple[list[bytes], int, bool]:
    """Job ``pid``'s answer from pipe ``rfd``, until its newline, the pipe's end or
    ``deadline``: (what is kept of it, its size, whether time ran out). Progress lines go
    to ``cases`` and ``on_progress`` as they come; ``parent_fd`` hanging up abandons the
    job (``_abandon``: ``ParentGone``)."""
    chunks: list[bytes] = []
    size = 0
    timed_out = False
    poller = select.poll()
    poller.register(rfd, select.POLLIN)
    if parent_fd is not None:
        poller.register(parent_fd, 0)  # only its hang-up is reported
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        events = dict(poller.poll(max(1, int(left * 1000))))
        if parent_fd is not None and events.get(parent_fd):
            os.close(rfd)
            _abandon(pid, base)
        if rfd not in events:
            continue
        chunk = os.read(rfd, 65536)
        if not chunk:
            break
        if on_progress is not None:  # progress lines first, then the result's
            pending = _take_progress(b"".join(chunks) + chunk, cases, on_progress)
            chunks, size = ([pending[:RESULT_LIMIT]] if pending else []), len(pending)
            if pending.endswith(b"\n"):
                break
            continue
        size += len(chunk)
        if size <= RESULT_LIMIT:
            chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    return chunks, size, timed_out


def _take_progress(pending: bytes, cases: CaseLog, on_progress) -> bytes:
    """Hands each whole progress line at the head of ``pending`` to ``cases`` and
    ``on_progress``; what is left of it."""
    while pending.startswith(b'{"progress"') and b"\n" in pending:
        line, _, pending = pending.partition(b"\n")
        try:
            report = json.loads(line)["progress"]
        except ValueError:
            continue
        cases.see(report)
        on_progress(report)
    return pending


class CaseLog:
    """A followed job's test cases from its progress reports: each case through (name,
    status, seconds) and the one running now. A job that times out keeps it in its
    result (``extra["cases"]``), so the original's timeout can name its slow cases."""

    def __init__(self) -> None:
        self.seen = False
        self.finished: list[dict] = []
        self.running = ""
        self.collected = 0

    def see(self, report: dict) -> None:
        self.collected += int(report.get("collected") or 0)
        case = report.get("case")
        if not case:
            return
        self.seen = True
        if report.get("status") == "running":
            self.running = case
            return
        self.finished.append(
            {"case": case, "status": report.get("status"), "duration_s": report.get("duration_s")}
        )
        if self.running == case:
            self.running = ""

    def to_json(self) -> dict:
        return {"collected": self.collected, "finished": self.finished, "running": self.running}


def main() -> None:
    # No parent-death signal here: it would follow the tool's thread that
    # started us, not the tool. The worker ends when stdin hangs up instead:
    # between jobs at EOF, during a job through run_job's watch on it.
    from mutant_gate.engine.harness.isolation import become_subreaper

    global _WARM
    become_subreaper()
    args = sys.argv[1:]
    _WARM = "--warm" in args
    if "--triton-cache" in args:
        warm._SHARED_CACHE = args[args.index("--triton-cache") + 1]
    proto = _protocol_stream()
    try:
        versions = _warm_imports()
    except BaseException:  # noqa: BLE001
        proto.write(json.dumps({"ready": False, "error": traceback.format_exc()[-4000:]}) + "\n")
        return
    # Every job's directory lives in this worker's own scratch directory: the pool
    # removes it when it kills the worker, so a worker killed mid-job leaves nothing.
    scratch = tempfile.mkdtemp(prefix="mg-worker-")
    tempfile.tempdir = scratch
    hello = {"ready": True, "versions": versions, "pid": os.getpid(), "scratch": scratch}
    if _WARM:  # the runner's context is made while the other workers start too
        runner = _runner(None)
        hello["runner"] = runner.get("error") if isinstance(runner, dict) else runner.hello
    proto.write(json.dumps(hello) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)

        def forward(data: dict) -> None:
            proto.write(json.dumps({"progress": data}) + "\n")

        try:
            follow = forward if request.get("progress") else None
            result = run_job(request["job"], parent_fd=sys.stdin.fileno(), on_progress=follow)
        except ParentGone:  # nobody to answer: clean up and go now (no slow interpreter exit)
            shutil.rmtree(scratch, ignore_errors=True)
            os._exit(0)
        except BaseException:  # noqa: BLE001
            result = {"status": "error", "error": traceback.format_exc()[-4000:]}
        proto.write(json.dumps({"result": result}) + "\n")
    shutil.rmtree(scratch, ignore_errors=True)
    proto.flush()
    os._exit(0)  # the tool is done with us: skip torch's slow interpreter teardown


def one_shot(job_path: str) -> None:
    """Run the one job in ``job_path`` and print ``{"result": ..., "versions": ...}``.

    The entry point of remote sandboxes (``python -m ...worker --one-shot
    job.json``): the same imports, fork, isolation and harness as a warm
    worker, for exactly one job, with the result as the last stdout line.
    """
    from mutant_gate.engine.harness.isolation import become_subreaper

    become_subreaper()
    proto = _protocol_stream()
    versions: dict = {}
    try:
        versions = _warm_imports()
        with open(job_path, encoding="utf-8") as fh:
            result = run_job(json.load(fh))
    except BaseException:  # noqa: BLE001 - a harness failure is data
        result = {"status": "error", "error": traceback.format_exc()[-4000:]}
    proto.write(json.dumps({"result": result, "versions": versions}) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one-shot"] and len(sys.argv) == 3:
        one_shot(sys.argv[2])
    else:
        main()
