"""The sandbox worker's warm runner: one process, many jobs (``worker.py`` sends it the jobs
``warm_eligible`` allows, with ``--warm``), and the sweep after every job, which spares it.

Runs in the worker and its runner; imports only the stdlib (and, in functions, torch, triton,
``mutant_gate.engine.harness`` and ``mutant_gate.engine.job``).
"""

from __future__ import annotations

import json
import math
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback

from .job_process import (
    RESULT_LIMIT,
    ParentGone,
    _harden,
    _read_tail,
    _result,
    _too_big,
    process_cpu_s,
    wall_limit_s,
)

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

#: The Triton cache the pool's warm runners share (``--triton-cache DIR``, set by
#: ``worker.main``), or None.
_SHARED_CACHE: str | None = None
_RUNNER: _Runner | None = None


# -- the sweep after every job (it spares the runner), and the reaping ---------------------


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


# -- the warm runner -----------------------------------------------------------------------


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
    deadline = start + wall_limit_s(job_data)  # the backstop: RLIMIT_CPU is the limit
    cpu_before = process_cpu_s(runner.pid) or 0.0
    line = _send_job(runner, job_data, deadline, parent_fd)
    duration = time.monotonic() - start
    # the runner's CPU seconds while it ran the job (a dead one's too: read before reaped)
    cpu_s = max(0.0, (process_cpu_s(runner.pid) or cpu_before) - cpu_before)
    if not line:  # a timeout (None), an answer too big, or the runner's death (b"")
        return _without_answer(runner, job_data, line, duration, cpu_s)
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
    data = json.dumps(answer).encode()
    return _result(job_data, False, None, data, output, "", duration, cpu_s)


def _send_job(
    runner: _Runner, job_data: dict, deadline: float, parent_fd: int | None
) -> bytes | None:
    """Hands the job to the runner and reads its answer's line: None at the deadline,
    b"" where the runner died (before it read the job too)."""
    try:
        data = json.dumps({"job": job_data}).encode() + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(runner.jobs, view) :]
        return runner.read_line(deadline, parent_fd)
    except OSError:  # the runner died before it read the job
        return b""


def _without_answer(
    runner: _Runner, job_data: dict, line: bytes | None, duration: float, cpu_s: float
) -> dict:
    """The result of a job the runner gave no answer for (``line``: None at a timeout, b""
    when the runner died or its answer was too big); the runner is retired."""
    output = _read_tail(runner.log_path)
    status = runner.end()
    if runner.too_big:
        result = _too_big(runner.too_big, output, duration)
        result["extra"] = {"runner": {"pid": None, "retired": "its answer was too big"}}
        return result
    result = _result(job_data, line is None, status, b"", output, "", duration, cpu_s)
    why = "the job timed out" if line is None else "the runner died"
    result.setdefault("extra", {})["runner"] = {"pid": None, "retired": why}
    return result


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
        cpu = math.ceil(used.ru_utime + used.ru_stime + job.timeout_s) + 1  # a backstop
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, resource.RLIM_INFINITY))
        isolation.cpu_limit(job.timeout_s)  # the limit, to the tick (SIGPROF)
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
        isolation.cpu_limit(0)
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
        torch._C._set_deterministic_algorithms(False)  # not the wrapper: it imports inductor
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
    _free_blas_workspaces(torch)
    torch.cuda.empty_cache()
    leaked = torch.cuda.memory_allocated() - device["memory_baseline"]
    if leaked > RUNNER_LEAK_BYTES:
        return f"the job left {leaked >> 20} MiB allocated on the device"
    return None


def _free_blas_workspaces(torch) -> None:
    """Give back the workspaces cuBLAS keeps per handle and stream: torch takes them from
    its caching allocator (so they count as allocated) and holds them for the process's
    life, where ``empty_cache`` cannot free them. A job that multiplied matrices left
    64-69 MiB of them, and its runner was retired for a leak it did not make (H100,
    ``benchmarks/results/h200-2026-12-07c-whole-library``). The next matmul makes them
    again."""
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
