"""A warm sandbox worker: imports torch/triton once, then forks a child per job.

Started by ``LocalSandbox`` as ``python -m mutant_gate.engine.harness.worker``
with an already scrubbed environment. Protocol on stdin/stdout, one JSON object
per line: the worker first says ``{"ready": ...}``, then answers each
``{"job": ...}`` with ``{"result": ...}``. A child that crashes or hangs
becomes a result; the worker itself lives on.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback

RESULT_LIMIT = 1 << 20


def _protocol_stream():
    """Keep the real stdout for the protocol; stray prints go to stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    return proto


def _warm_imports() -> dict:
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch
    import triton

    from mutant_gate.engine.harness import compiler, runner

    # Modules that ordinary checks load lazily, at great cost, on first use:
    # torch.testing.assert_close pulls in torch.distributed.tensor (sympy...),
    # numpy 2 loads numpy.random on first touch.
    for name in ("torch.distributed.tensor", "torch.testing._comparison", "numpy.random"):
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

    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": sys.version.split()[0],
    }


def _read_tail(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return ("..." if size > limit else "") + text.strip()


def _read_head(path: str, limit: int = 16000) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


_MEMCHECK_KIND = re.compile(
    r"^=+\s+((?:Invalid|Out-of-range|Misaligned|Program hit|Malloc|Cuda API)\b.*)$"
)
#: Errors of the kernel's own accesses; the others (``Program hit cudaError...`` on a
#: later API call) are their consequences.
_MEMCHECK_ACCESS = ("Invalid", "Out-of-range", "Misaligned")


def first_memcheck_error(text: str) -> str | None:
    """memcheck's first error in one line: kind, kernel, thread/block, address.

    ``========= Invalid __global__ write of size 4 bytes`` /
    ``=========     at add_kernel+0x1b0`` / ``=========     by thread (1,0,0) in block (3,0,0)``
    / ``=========     Address 0x7f3c00000400 is out of bounds`` ->
    ``Invalid __global__ write of size 4 bytes at add_kernel+0x1b0 by thread (1,0,0) in
    block (3,0,0): Address 0x7f3c00000400 is out of bounds``. An error of the kernel's own
    accesses comes before the API errors that follow from it."""
    lines = [ln.rstrip() for ln in text.splitlines()]
    found = []
    for i, line in enumerate(lines):
        match = _MEMCHECK_KIND.match(line)
        if match is None:
            continue
        parts, address = [match.group(1).strip()], ""
        for follow in lines[i + 1 : i + 8]:
            body = follow.lstrip("= ").strip()
            if not follow.startswith("=") or not body or _MEMCHECK_KIND.match(follow):
                break
            if body.startswith(("at ", "by thread")):
                parts.append(body.split(" in /", 1)[0])
            elif body.startswith("Address") or "out of bounds" in body:
                address = body
        found.append(" ".join(parts) + (f": {address}" if address else ""))
    access = [f for f in found if f.startswith(_MEMCHECK_ACCESS)]
    return (access or found or [None])[0]


def _child(job_data: dict, workdir: str, log_path: str, wfd: int, follow: bool = False) -> None:
    """Runs in the forked child; never returns. ``follow``: progress lines go to the
    worker (``{"progress": ...}``) ahead of the result."""
    code = 0
    try:
        from mutant_gate.engine.harness import runner
        from mutant_gate.engine.harness.runner import run_checks

        if follow:
            me = os.getpid()

            def report_progress(data: dict) -> None:
                if os.getpid() == me:  # never from a process the check forked
                    line = json.dumps({"progress": data}).encode()[:3000] + b"\n"
                    os.write(wfd, line)  # one write under PIPE_BUF: never interleaved

            runner.PROGRESS = report_progress
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


#: memcheck's exit code when it found errors (chosen to be unlike any check's).
SANITIZER_ERROR_EXIT = 86


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


def _harden(
    isolation, keep: tuple[str, ...], max_processes: int, shared: tuple[str, ...] = ()
) -> dict:
    """As root: private scratch dirs and home (``keep``: project directories that stay
    visible, through a writable view of the job's own: ``isolation.project_views``;
    ``shared``: the warm runners' Triton cache, writable by their group), then an
    unprivileged uid of this worker's own."""
    state = {"filesystem": "shared", "user": "unchanged"}
    if os.geteuid() != 0:
        return state
    try:
        state["workdir"] = isolation.private_filesystem(
            os.path.expanduser("~root"), project=keep, shared=shared
        )
        state["filesystem"] = "private"
    except OSError as exc:
        state["filesystem_error"] = str(exc)
        return state
    uid = isolation.sandbox_uid(os.getppid())
    if keep:
        state["project_view"] = isolation.project_views(keep, uid)
    os.chown(state["workdir"], uid, uid)
    try:
        isolation.name_user(uid)
    except OSError as exc:  # the job still runs; a library asking its name may not
        state["user_name_error"] = str(exc)
    groups = (isolation.SHARED_CACHE_GID,) if shared else ()
    isolation.drop_privileges(uid, nproc=max_processes, groups=groups)
    state["user"] = f"uid {uid}"
    return state


def _sandbox_uid() -> int | None:
    """The unprivileged uid this worker's children run as (None when not root)."""
    from mutant_gate.engine.harness.isolation import sandbox_uid

    return sandbox_uid(os.getpid()) if os.geteuid() == 0 else None


def _sweep(uid: int | None) -> None:
    """Kill every process left by the job (even those that left its process group).

    The job's uid is this worker's alone, so every process of that uid is the
    job's, but for the warm runner waiting for its next job; orphans are reparented
    to the worker (a child subreaper) and reaped.
    """
    if uid is None:
        return
    from mutant_gate.engine.harness.isolation import kill_uid

    spare = frozenset([_RUNNER.pid]) if _RUNNER is not None else frozenset()
    kill_uid(uid, wait_s=5.0, reap=_reap, spare=spare)


#: Exit statuses of children reaped by ``_reap`` (a runner that died between jobs).
_REAPED: dict[int, int] = {}


def _reap() -> None:
    while True:
        try:
            reaped, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            return
        _REAPED[reaped] = status


def _wait(pid: int, flags: int = 0) -> tuple[int, int]:
    """``os.waitpid`` for ``pid``, also when ``_reap`` already reaped it."""
    try:
        return os.waitpid(pid, flags)
    except ChildProcessError:
        return pid, _REAPED.pop(pid, 0)


class ParentGone(Exception):
    """The tool that started this worker is gone (its end of our stdin closed)."""


def _hung_up(fd: int | None) -> bool:
    """Whether the other end of pipe ``fd`` is closed (without reading from it)."""
    if fd is None:
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLHUP and POLLERR are always reported
    return any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in poller.poll(0))


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


def run_job(job_data: dict, parent_fd: int | None = None, on_progress=None) -> dict:  # noqa: C901 - listed in tests/test_complexity.py
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
    timeout = float(job_data["timeout_s"])
    rfd, wfd = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        _child(job_data, workdir, log_path, wfd, follow=on_progress is not None)
    os.close(wfd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    chunks: list[bytes] = []
    size = 0
    timed_out = False
    cases = CaseLog()
    deadline = start + timeout
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
            pending = b"".join(chunks) + chunk
            while pending.startswith(b'{"progress"') and b"\n" in pending:
                line, _, pending = pending.partition(b"\n")
                try:
                    report = json.loads(line)["progress"]
                except ValueError:
                    continue
                cases.see(report)
                on_progress(report)
            chunks, size = ([pending[:RESULT_LIMIT]] if pending else []), len(pending)
            if pending.endswith(b"\n"):
                break
            continue
        size += len(chunk)
        if size <= RESULT_LIMIT:
            chunks.append(chunk)
        if chunk.endswith(b"\n"):
            break
    os.close(rfd)
    status = None
    if job_data.get("sanitize"):
        # memcheck reports (and sets the exit code) after the job wrote its result.
        while status is None and time.monotonic() < deadline:
            if _hung_up(parent_fd):
                _abandon(pid, base)
            done, code = os.waitpid(pid, os.WNOHANG)
            status = code if done else None
            if status is None:
                time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if status is None:
        _, status = os.waitpid(pid, 0)
    _sweep(_sandbox_uid())
    duration = time.monotonic() - start
    output = _read_tail(log_path)
    # memcheck's first error is at the head of its report (the tail may hold only "N
    # errors were not printed"): read it before the job's directory goes.
    head = _read_head(log_path) if job_data.get("sanitize") else ""
    shutil.rmtree(base, ignore_errors=True)
    if size > RESULT_LIMIT and not timed_out:
        return _too_big(size, output, duration)
    result = _result(job_data, timed_out, status, b"".join(chunks), output, head, duration)
    if timed_out and cases.seen:  # what ran before time ran out: the evidence for a timeout
        result["extra"] = {**result.get("extra", {}), "cases": cases.to_json()}
    return result


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


def _too_big(size: int, output: str, duration: float) -> dict:
    """A job whose answer passed ``RESULT_LIMIT``: the harness's fault, not the code's.
    Never a crash (a crash blames whichever side of a probe printed its marker last)."""
    from mutant_gate.engine.job import TOO_BIG_WORDS

    return {
        "status": "error",
        "error": f"the job's answer ({size} bytes and more) is over the {RESULT_LIMIT} "
        f"{TOO_BIG_WORDS}\n{output}".strip(),
        "duration_s": duration,
    }


def _result(
    job_data: dict,
    timed_out: bool,
    status: int | None,
    answer: bytes,
    output: str,
    head: str,
    duration: float,
) -> dict:
    """What a job's process left (its answer, its exit status, its output) as a result."""
    timeout = float(job_data["timeout_s"])
    if timed_out:
        return {
            "status": "timeout",
            "error": f"timed out after {timeout:.1f} s\n{output}".strip(),
            "duration_s": duration,
        }
    summary = re.search(r"ERROR SUMMARY: (\d+) error", output) if job_data.get("sanitize") else None
    if job_data.get("sanitize"):
        exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        if exit_code == SANITIZER_ERROR_EXIT or (summary and int(summary.group(1)) > 0):
            first = first_memcheck_error(head) or first_memcheck_error(output)
            count = int(summary.group(1)) if summary else 1
            message = f"compute-sanitizer memcheck: {count} errors; first: {first or output[-300:]}"
            return {
                "status": "bounds",
                "error": message,
                "bounds": {"message": message},
                "duration_s": duration,
                "extra": {"sanitizer": {"errors": count, "caching_allocator": "off"}},
            }
    if answer:
        try:
            result = json.loads(answer)
            result["duration_s"] = duration
            if result.get("status") == "error" and output:
                result["error"] = f"{result.get('error', '')}\n--- output ---\n{output}"
            return result
        except ValueError:
            pass
    status = status or 0
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        why = {
            signal.SIGXFSZ: f"output exceeded {job_data['output_limit_bytes']} bytes",
            signal.SIGXCPU: "CPU time limit exceeded",
        }.get(sig, f"killed by {name}")
        return {
            "status": "crash",
            "signal": sig,
            "error": f"{why}\n{output}".strip(),
            "duration_s": duration,
        }
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return {
        "status": "crash",
        "error": f"process exited with code {code} before reporting a result\n{output}".strip(),
        "duration_s": duration,
    }


# -- the warm runner: one process, many jobs ----------------------------------------------
#
# In compiled mode a forked child per job pays a new CUDA context, Triton's driver
# utilities built with gcc and every launcher compiled again in a fresh cache: more than
# the job itself. A CUDA context does not survive fork, so the worker (which never
# touches CUDA) forks one runner instead. The runner hardens itself once, as a job's
# child does (no network, private filesystem, the worker's unprivileged uid, no keys in
# its environment), makes its context, and runs job after job in its own process, each
# in a fresh directory, with Triton's cache (keyed by source hash) kept between them.
# Only jobs of the file's own code run there: the kernel file's own check, and the
# probe's compares (the file's definitions, original and mutants, called on inputs the
# tool wrote; they patch nothing). Generated or project tests, the other harness
# requests (oracle, probe capture, traces, compiles: they change the process for the
# one job), --sanitize and null runs get a child of their own, so nothing a test does
# to the process reaches another job. The runner is ended,
# and a fresh one forked, after a timeout, a crash, a CUDA error, memory the job left
# allocated on the device, or RUNNER_MAX_JOBS jobs.

#: Jobs one runner serves before a fresh one replaces it.
RUNNER_MAX_JOBS = 1000
#: Device memory a job may leave allocated before its runner is replaced.
RUNNER_LEAK_BYTES = 64 << 20
RUNNER_START_S = 120.0

#: Set by ``main`` from ``--warm``: which jobs a runner serves (see ``warm_eligible``).
_WARM = False
#: The Triton cache the pool's warm runners share (``--triton-cache DIR``), or None.
_SHARED_CACHE: str | None = None
_RUNNER: _Runner | None = None


#: Harness entries a warm runner may serve: they load the job's files and call them,
#: and leave the process as they found it.
WARM_HARNESS = frozenset({"probe:compare"})
#: ... and in the interpreter only (a CUDA context does not survive a fork): the
#: diff-oracle, whose two variants run (traced, patched) in forked grandchildren that
#: exit when done; the runner itself only reads their streams.
WARM_HARNESS_INTERPRETED = frozenset({"oracle:run"})


def warm_eligible(job_data: dict) -> bool:
    """A job a warm runner may serve: the user's own code only (the own check, its
    ``test_*`` functions, ``--tests`` files, a project's tests: ``Check.trusted``; no
    test a writer generated, and no harness request but ``WARM_HARNESS``: the others
    turn the interpreter off, patch launches or trace, for the one process they run
    in), no sanitizer, no null run."""
    return (
        not job_data.get("sanitize")
        and not job_data.get("null_launches")
        and (all(_trusted(c) for c in job_data["checks"]) or _warm_harness(job_data))
    )


def _trusted(check: dict) -> bool:
    return check["kind"] == "main" or (check["kind"] == "pytest" and bool(check.get("trusted")))


def _project_paths(job_data: dict) -> tuple[str, ...]:
    """The project directories a job needs visible (through a writable view) in its sandbox."""
    project = job_data.get("project") or {}
    return tuple(project[k] for k in ("root", "import_root") if k in project)


def _warm_harness(job_data: dict) -> bool:
    """One harness check whose request (a file of the job) names a ``WARM_HARNESS`` entry."""
    if len(job_data["checks"]) != 1 or job_data["checks"][0]["kind"] != "harness":
        return False
    files = {name: text for name, text in job_data["files"]}
    try:
        request = json.loads(files[job_data["checks"][0]["path"]])
    except (KeyError, TypeError, ValueError):
        return False
    if not isinstance(request, dict):
        return False
    entry = request.get("entry")
    interpreted = job_data.get("mode") == "interpret"
    return entry in WARM_HARNESS or (interpreted and entry in WARM_HARNESS_INTERPRETED)


class _Runner:
    """The worker's side of a warm runner: the process, its two pipes and its log."""

    def __init__(self, number: int, keep: tuple[str, ...] = ()) -> None:
        self.log_path = os.path.join(tempfile.gettempdir(), f"runner-{number}.log")
        #: project directories the runner shows, each job through a fresh writable view
        self.keep = keep
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(job_w)
            os.close(res_r)
            _runner_main(job_r, res_w, self.log_path, keep)  # never returns
        os.close(job_r)
        os.close(res_w)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        self.pid, self.jobs, self.answers = pid, job_w, res_r
        self.pending = b""
        self.hello: dict | None = None
        self.too_big = 0  # the size of an answer that passed RESULT_LIMIT (then ended)
        self.served = 0  # jobs sent to it: each after the first gets a fresh project view

    def read_line(self, deadline: float, parent_fd: int | None) -> bytes | None:
        """The runner's next line; b"" when it died, None at the deadline. Raises
        ``ParentGone`` when the tool hangs up meanwhile."""
        poller = select.poll()
        poller.register(self.answers, select.POLLIN)
        if parent_fd is not None:
            poller.register(parent_fd, 0)
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            events = dict(poller.poll(max(1, int(left * 1000))))
            if parent_fd is not None and events.get(parent_fd):
                self.end()
                raise ParentGone
            if self.answers not in events:
                continue
            chunk = os.read(self.answers, 65536)
            if not chunk:
                return b""
            self.pending += chunk
            if len(self.pending) > RESULT_LIMIT:
                self.too_big = len(self.pending)
                return b""
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def end(self) -> int | None:
        """Kill the runner and whatever it started; its exit status."""
        global _RUNNER
        for fd in (self.jobs, self.answers):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        _, status = _wait(self.pid)
        if _RUNNER is self:
            _RUNNER = None
        _sweep(_sandbox_uid())
        return status


_RUNNERS_STARTED = 0


def _runner(parent_fd: int | None, keep: tuple[str, ...] = ()) -> _Runner | dict:
    """The worker's runner, forked (and waited for) if there is none: or an error result.
    A project job whose directories (``keep``) the runner's filesystem does not show
    gets a new runner that shows them (a pool serves one project: this happens once)."""
    global _RUNNER, _RUNNERS_STARTED
    if _RUNNER is not None and set(keep) <= set(_RUNNER.keep):
        return _RUNNER
    if _RUNNER is not None:
        _RUNNER.end()
    _RUNNERS_STARTED += 1
    runner = _Runner(_RUNNERS_STARTED, keep)
    line = runner.read_line(time.monotonic() + RUNNER_START_S, parent_fd)
    try:
        hello = json.loads(line) if line else {}
    except ValueError:
        hello = {}
    if not hello.get("ready"):
        runner.end()
        why = hello.get("error") or _read_tail(runner.log_path) or "no answer"
        return {"status": "error", "error": f"the warm runner did not start: {why}"}
    runner.hello = hello
    _RUNNER = runner
    return runner


def run_warm(job_data: dict, parent_fd: int | None = None) -> dict:
    """Run one job in the worker's warm runner (forked first if there is none), over a
    fresh view of the project (``_fresh_view``)."""
    runner = _runner(parent_fd, _project_paths(job_data))
    if not isinstance(runner, dict) and _fresh_view(runner):
        runner.end()
        runner = _runner(parent_fd, _project_paths(job_data))
    if isinstance(runner, dict):
        return runner
    runner.served += 1
    start = time.monotonic()
    deadline = start + float(job_data["timeout_s"])
    try:
        data = json.dumps({"job": job_data}).encode() + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(runner.jobs, view) :]
        line = runner.read_line(deadline, parent_fd)
    except OSError:  # the runner died before it read the job
        line = b""
    duration = time.monotonic() - start
    if not line:  # a timeout (None), an answer too big, or the runner's death (b"")
        output = _read_tail(runner.log_path)
        status = runner.end()
        if runner.too_big:
            result = _too_big(runner.too_big, output, duration)
            result["extra"] = {"runner": {"pid": None, "retired": "its answer was too big"}}
            return result
        result = _result(job_data, line is None, status, b"", output, "", duration)
        why = "the job timed out" if line is None else "the runner died"
        result.setdefault("extra", {})["runner"] = {"pid": None, "retired": why}
        return result
    answer = json.loads(line)
    retire = answer.pop("retire", None)
    output = _read_tail(runner.log_path)
    if retire:
        runner.end()
    else:
        _sweep(_sandbox_uid())  # whatever the job started, but for the runner itself
    answer.setdefault("extra", {}).setdefault("runner", {})["retired"] = retire
    if retire:
        answer["extra"]["runner"]["pid"] = None  # the pid that now runs: none until the next job
        answer["extra"]["runner"]["served_by"] = runner.pid
    return _result(job_data, False, None, json.dumps(answer).encode(), output, "", duration)


def _fresh_view(runner: _Runner) -> str:
    """Before a runner's every job after its first: a fresh writable view of the project
    in its namespace, so nothing a job wrote reaches the next; why not ("": done, or
    nothing to refresh). A runner whose view cannot be made afresh is not used again."""
    view = (runner.hello or {}).get("project_view") or ""
    if not runner.served or not runner.keep or not view.startswith(("overlay", "copy")):
        return ""
    from mutant_gate.engine.harness import isolation

    return isolation.refresh_views(runner.pid, runner.keep, isolation.sandbox_uid(os.getpid()))


def _runner_main(jobs_fd: int, answers_fd: int, log_path: str, keep: tuple[str, ...] = ()) -> None:
    """The runner (a forked child of the worker): hardens itself, then serves jobs;
    ``keep``: the project's directories, visible through a writable view."""
    code = 0
    out = os.fdopen(answers_fd, "w", buffering=1)
    try:
        from mutant_gate.engine.harness import isolation
        from mutant_gate.engine.job import Job

        os.setpgid(0, 0)
        worker = os.getppid()
        isolation.die_with_parent()
        env = isolation.scrubbed_env(dict(os.environ))
        network_cut = isolation.cut_network()
        isolation.redirect_output(log_path)
        shared = (_SHARED_CACHE,) if _SHARED_CACHE else ()
        state = _harden(isolation, keep, Job.max_processes, shared)
        if os.getppid() != worker:
            os._exit(1)
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # Runaway output ends the runner with SIGXFSZ ("output exceeded"), as in a child.
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        root = state.pop("workdir", None) or tempfile.mkdtemp(prefix="mg-runner-")
        cache = os.path.join(root, "triton-cache")
        if shared:
            # The pool's runners share one Triton cache: it is keyed by a hash of the
            # kernel's source and options, so a kernel (and its launcher, and the
            # driver utilities) is built once for them all. What they write stays
            # writable by their group.
            cache = _SHARED_CACHE
            os.umask(0o007)
        env["TRITON_CACHE_DIR"] = cache
        # The worker's scratch directory is hidden behind the private /tmp: the warm-up
        # (Triton builds its driver utilities in a temporary directory) works in root.
        os.environ.update(TRITON_CACHE_DIR=cache, TMPDIR=root, HOME=root, TRITON_HOME=root)
        tempfile.tempdir = root
        os.chdir(root)
        warmup = time.perf_counter()
        device = _warm_device()
        hello = {
            "ready": True,
            "pid": os.getpid(),
            "triton_cache": "shared" if shared else "private",
            "project_view": state.get("project_view", ""),
            "warmup_s": round(time.perf_counter() - warmup, 3),
            **device,
        }
        out.write(json.dumps(hello) + "\n")
        report = {"network_cut": network_cut, "isolation": state}
        with os.fdopen(jobs_fd, "rb") as jobs:
            for number, line in enumerate(jobs, start=1):
                answer = _serve(json.loads(line)["job"], root, env, report, number, device)
                out.write(json.dumps(answer) + "\n")
                if answer.get("retire"):
                    break
    except BaseException:  # noqa: BLE001 - the worker turns this into a result
        code = 1
        try:
            out.write(json.dumps({"ready": False, "error": traceback.format_exc()[-4000:]}) + "\n")
        except OSError:
            pass
    os._exit(code)


def _warm_device() -> dict:
    """Compiled mode: the runner's CUDA context and Triton's driver utilities, made once
    (a job then pays only its own compile and launch)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return {}
    import torch
    from triton.runtime.driver import driver

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    driver.active.utils  # noqa: B018 - builds (or loads from the cache) the driver utilities
    return {
        "device": torch.cuda.get_device_name(),
        "memory_baseline": torch.cuda.memory_allocated(),
    }


def _serve(job_data: dict, root: str, env: dict, report: dict, number: int, device: dict) -> dict:
    """Run one job in the runner's process, in a fresh directory under ``root``, and
    put the process back as it was: cwd, environment, ``sys.path``, ``sys.argv``, the
    modules loaded from the job's directory. The answer says whether to retire."""
    import resource

    from mutant_gate.engine.harness import isolation
    from mutant_gate.engine.harness.runner import run_checks
    from mutant_gate.engine.job import Job

    _reap()  # what the last job left, killed by the worker's sweep since
    workdir = os.path.join(root, f"job-{number}")
    saved = (list(sys.path), dict(os.environ), set(sys.modules), sys.argv[:], list(sys.meta_path))
    # The job's own code is loaded afresh for every job: what it loaded from its directory
    # and, in project mode, from the project (the mutant's package, the conftest, the test
    # modules); the third-party world those import stays loaded (it is why runners are warm).
    own = (workdir + os.sep, *(p.rstrip(os.sep) + os.sep for p in _project_paths(job_data)))
    sys.stdout.flush()
    sys.stderr.flush()
    os.ftruncate(1, 0)  # fd 1 and 2 share the log: this job's output starts it afresh
    os.lseek(1, 0, os.SEEK_SET)
    try:
        job = Job.from_json(job_data)
        os.mkdir(workdir, 0o700)
        isolation.enter_workdir(workdir, env)
        os.environ["TRITON_CACHE_DIR"] = env["TRITON_CACHE_DIR"]  # kept between jobs
        # Soft limits only: an unprivileged process cannot raise a hard limit again.
        used = resource.getrusage(resource.RUSAGE_SELF)
        cpu = int(used.ru_utime + used.ru_stime + job.timeout_s) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.RLIM_INFINITY))
        limit = job.output_limit_bytes
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        if job.mode == "interpret":  # a CUDA context cannot be bounded by address space
            space = isolation.address_space_after(job.memory_mb)
            resource.setrlimit(resource.RLIMIT_AS, (space, resource.RLIM_INFINITY))
        me = os.getpid()
        answer = run_checks(job, workdir).to_json()
        if os.getpid() != me:  # a process the check forked came back here: it never answers
            os._exit(0)
        if device:
            _context_lost(answer)
    except BaseException:  # noqa: BLE001 - a harness failure is data, not a dead runner
        answer = {"status": "error", "error": traceback.format_exc()[-4000:]}
    finally:
        if job_data.get("mode") == "interpret":
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)
        sys.stdout.flush()
        sys.stderr.flush()
        os.chdir(root)
        sys.path[:], sys.argv[:], sys.meta_path[:] = saved[0], saved[3], saved[4]
        os.environ.clear()
        os.environ.update(saved[1])
        for name in set(sys.modules) - saved[2]:
            origin = getattr(sys.modules.get(name), "__file__", None) or ""
            if origin.startswith(own):
                sys.modules.pop(name, None)
        _reset_torch_state()
        tempfile.tempdir = root
        shutil.rmtree(workdir, ignore_errors=True)
    answer["network_cut"] = report["network_cut"]
    extra = answer.setdefault("extra", {})
    extra["isolation"] = dict(report["isolation"])
    extra["runner"] = {"pid": os.getpid(), "job": number}
    answer["retire"] = _retire(answer, number, device)
    return answer


def _reset_torch_state() -> None:
    """Process-wide torch settings a test may change and not put back: reset after every
    warm job (seeds are set again when the next job starts)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        torch.use_deterministic_algorithms(False)
    except Exception:  # noqa: BLE001 - a reset that fails leaves the runner as it was
        pass


def _context_lost(answer: dict) -> None:
    """A kernel that faulted asynchronously leaves the context broken: the check may
    have passed without noticing, or failed on a later call with a symptom (a cuBLAS
    handle that cannot be made). Either way the job crashed on the GPU, and the CUDA
    error is its evidence."""
    import torch

    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any error here is the context's
        error = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        before = answer.get("error") or ""
        answer["status"] = "crash"
        answer["error"] = f"CUDA error after the job's checks: {error}" + (
            f"\n{before}" if before else ""
        )


def _retire(answer: dict, number: int, device: dict) -> str | None:
    """Why the runner must not serve another job after this one, or None."""
    if answer.get("status") in ("crash", "error", "timeout"):
        return f"the job ended in {answer['status']}"
    if "MemoryError" in (answer.get("error") or ""):
        return "the job ran out of memory"
    if number >= RUNNER_MAX_JOBS:
        return f"served {number} jobs"
    if not device:
        return None
    import gc

    import torch

    try:
        torch.cuda.synchronize()  # a sticky error the check swallowed surfaces here
    except Exception as exc:  # noqa: BLE001
        return f"CUDA error after the job: {str(exc).splitlines()[0]}"
    gc.collect()
    torch.cuda.empty_cache()
    leaked = torch.cuda.memory_allocated() - device["memory_baseline"]
    if leaked > RUNNER_LEAK_BYTES:
        return f"the job left {leaked >> 20} MiB allocated on the device"
    return None


def main() -> None:
    # No parent-death signal here: it would follow the tool's thread that
    # started us, not the tool. The worker ends when stdin hangs up instead:
    # between jobs at EOF, during a job through run_job's watch on it.
    from mutant_gate.engine.harness.isolation import become_subreaper

    global _WARM, _SHARED_CACHE
    become_subreaper()
    args = sys.argv[1:]
    _WARM = "--warm" in args
    if "--triton-cache" in args:
        _SHARED_CACHE = args[args.index("--triton-cache") + 1]
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
