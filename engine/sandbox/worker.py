"""A warm sandbox worker: imports torch/triton once, then forks a child per job.

Started by ``LocalSandbox`` as ``python -m mutant_gate.engine.sandbox.worker``
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


def _child(job_data: dict, workdir: str, log_path: str, wfd: int) -> None:
    """Runs in the forked child; never returns."""
    code = 0
    try:
        from mutant_gate.engine.harness.runner import run_checks
        from mutant_gate.engine.sandbox import isolation
        from mutant_gate.engine.sandbox.job import Job

        os.setpgid(0, 0)
        worker = os.getppid()
        isolation.die_with_parent()
        job = Job.from_json(job_data)
        env = isolation.scrubbed_env(dict(os.environ))
        report = {"network_cut": isolation.cut_network()}
        isolation.redirect_output(log_path)
        report["isolation"] = _harden(isolation, job)
        if os.getppid() != worker:  # the worker died before the death signal was armed again
            os._exit(1)
        if report["isolation"]["filesystem"] == "private":
            workdir = report["isolation"].pop("workdir")
        isolation.enter_workdir(workdir, env)
        if job.sanitize:
            _exec_sanitized(job_data, workdir, env, wfd, report)  # never returns
        memory = job.memory_mb if job.mode == "interpret" else None
        isolation.apply_limits(memory, job.timeout_s, job.output_limit_bytes)
        result = run_checks(job, workdir).to_json()
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


def _harden(isolation, job) -> dict:
    """As root: private scratch dirs and home, then an unprivileged uid of this worker's own."""
    state = {"filesystem": "shared", "user": "unchanged"}
    if os.geteuid() != 0:
        return state
    try:
        project = job.project or {}
        keep = tuple(project[k] for k in ("root", "import_root") if k in project)
        state["workdir"] = isolation.private_filesystem(os.path.expanduser("~root"), project=keep)
        state["filesystem"] = "private"
    except OSError as exc:
        state["filesystem_error"] = str(exc)
        return state
    uid = isolation.sandbox_uid(os.getppid())
    os.chown(state["workdir"], uid, uid)
    isolation.drop_privileges(uid, nproc=job.max_processes)
    state["user"] = f"uid {uid}"
    return state


def _sandbox_uid() -> int | None:
    """The unprivileged uid this worker's children run as (None when not root)."""
    from mutant_gate.engine.sandbox.isolation import sandbox_uid

    return sandbox_uid(os.getpid()) if os.geteuid() == 0 else None


def _sweep(uid: int | None) -> None:
    """Kill every process left by the job (even those that left its process group).

    The job's uid is this worker's alone, so every process of that uid is the
    job's; orphans are reparented to the worker (a child subreaper) and reaped.
    """
    if uid is None:
        return
    from mutant_gate.engine.sandbox.isolation import kill_uid

    kill_uid(uid, wait_s=5.0, reap=_reap)


def _reap() -> None:
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            return


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


def run_job(job_data: dict, parent_fd: int | None = None) -> dict:
    """Fork a child for one job and turn whatever happens into a result dict.

    With ``parent_fd`` (the worker's stdin, whose other end the tool holds), the job
    is abandoned and ``ParentGone`` raised as soon as that pipe hangs up: a tool
    killed mid-job leaves nothing running."""
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
        _child(job_data, workdir, log_path, wfd)
    os.close(wfd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    chunks: list[bytes] = []
    size = 0
    timed_out = False
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
    if chunks:
        try:
            result = json.loads(b"".join(chunks))
            result["duration_s"] = duration
            if result.get("status") == "error" and output:
                result["error"] = f"{result.get('error', '')}\n--- output ---\n{output}"
            return result
        except ValueError:
            pass
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


def main() -> None:
    # No parent-death signal here: it would follow the tool's thread that
    # started us, not the tool. The worker ends when stdin hangs up instead:
    # between jobs at EOF, during a job through run_job's watch on it.
    from mutant_gate.engine.sandbox.isolation import become_subreaper

    become_subreaper()
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
    proto.write(json.dumps(hello) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            result = run_job(request["job"], parent_fd=sys.stdin.fileno())
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
    from mutant_gate.engine.sandbox.isolation import become_subreaper

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
