"""A job's process, seen from the sandbox worker (``worker.py``): a forked child and the warm
runner (``warm.py``) alike. Hardening it (a private filesystem, an unprivileged uid), the tool
hanging up while it runs (``ParentGone``), its log, and what it left (its answer, at most
``RESULT_LIMIT`` bytes, its exit status, its output; under --sanitize memcheck's report)
turned into a result.

Runs in the worker; imports only the stdlib (and ``mutant_gate.engine.job`` where used).
"""

from __future__ import annotations

import json
import os
import re
import select
import signal

RESULT_LIMIT = 1 << 20


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


class ParentGone(Exception):
    """The tool that started this worker is gone (its end of our stdin closed)."""


def _hung_up(fd: int | None) -> bool:
    """Whether the other end of pipe ``fd`` is closed (without reading from it)."""
    if fd is None:
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLHUP and POLLERR are always reported
    return any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in poller.poll(0))


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
    found = [
        _memcheck_entry(match.group(1).strip(), lines[i + 1 : i + 8])
        for i, line in enumerate(lines)
        if (match := _MEMCHECK_KIND.match(line)) is not None
    ]
    access = [f for f in found if f.startswith(_MEMCHECK_ACCESS)]
    return (access or found or [None])[0]


def _memcheck_entry(kind: str, follows: list[str]) -> str:
    """One memcheck error in one line: its kind, then the lines that follow it up to the
    next error (where, which thread, the address)."""
    parts, address = [kind], ""
    for body in _memcheck_bodies(follows):
        if body.startswith(("at ", "by thread")):
            parts.append(body.split(" in /", 1)[0])
        elif body.startswith("Address") or "out of bounds" in body:
            address = body
    return " ".join(parts) + (f": {address}" if address else "")


def _memcheck_bodies(follows: list[str]) -> list[str]:
    """The words of the lines of ``follows`` that belong to the error above them: up to
    a line not of memcheck's, an empty one, or the next error."""
    bodies = []
    for follow in follows:
        body = follow.lstrip("= ").strip()
        if not follow.startswith("=") or not body or _MEMCHECK_KIND.match(follow):
            break
        bodies.append(body)
    return bodies


#: memcheck's exit code when it found errors (chosen to be unlike any check's).
SANITIZER_ERROR_EXIT = 86


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


def wall_limit_s(job_data: dict) -> float:
    """The job's wall-clock backstop (``Job.wall_limit_s``): its limit is CPU seconds."""
    from mutant_gate.engine.job import WALL_BASE_S, WALL_FACTOR

    return float(job_data["timeout_s"]) * WALL_FACTOR + WALL_BASE_S


def _over_cpu(job_data: dict, status: int | None, cpu_s: float) -> bool:
    """The process ended by its CPU-time limit: SIGXCPU at the soft limit, or SIGKILL at
    the hard one (a process that ignored SIGXCPU) with its CPU seconds past the limit."""
    if status is None or not os.WIFSIGNALED(status):
        return False
    sig = os.WTERMSIG(status)
    return sig in (signal.SIGXCPU, signal.SIGPROF) or (
        sig == signal.SIGKILL and cpu_s >= float(job_data["timeout_s"])
    )


def process_cpu_s(pid: int) -> float | None:
    """The CPU seconds of process ``pid`` and of the children it waited for (a zombie's
    too: read before it is reaped), or None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _timed_out(job_data: dict, by: str, cpu_s: float, duration: float, output: str) -> dict:
    """A job stopped by its CPU-time limit (``by`` "cpu") or by the wall clock's backstop
    ("wall"), each said with its figures."""
    from mutant_gate.engine.job import WALL_BASE_S, WALL_FACTOR

    limit = float(job_data["timeout_s"])
    wall = wall_limit_s(job_data)
    if by == "cpu":
        said = f"timed out: {cpu_s:.1f} CPU s against a limit of {limit:g} CPU s"
    else:
        said = (
            f"timed out by the wall-clock backstop: {duration:.1f} s of wall clock, the "
            f"backstop {wall:g} s ({WALL_FACTOR:g} x the CPU limit of {limit:g} s + "
            f"{WALL_BASE_S:g}), with only {cpu_s:.1f} CPU s used"
        )
    record = {"by": by, "cpu_s": round(cpu_s, 3), "limit_s": limit, "wall_s": round(duration, 3)}
    return {
        "status": "timeout",
        "error": f"{said}\n{output}".strip(),
        "duration_s": duration,
        "cpu_s": cpu_s,
        "extra": {"timed_out": {**record, "wall_limit_s": wall}},
    }


def _result(
    job_data: dict,
    timed_out: bool,
    status: int | None,
    answer: bytes,
    output: str,
    head: str,
    duration: float,
    cpu_s: float = 0.0,
) -> dict:
    """What a job's process left (its answer, its exit status, its output) as a result;
    ``cpu_s``: the CPU seconds its processes used (``JobResult.cpu_s``)."""
    result = _left(job_data, timed_out, status, answer, output, head, duration, cpu_s)
    result["cpu_s"] = round(cpu_s, 4)
    return result


def _left(
    job_data: dict,
    timed_out: bool,
    status: int | None,
    answer: bytes,
    output: str,
    head: str,
    duration: float,
    cpu_s: float,
) -> dict:
    if timed_out:
        return _timed_out(job_data, "wall", cpu_s, duration, output)
    if job_data.get("sanitize"):
        found = _memcheck_found(status, output, head, duration)
        if found is not None:
            return found
    if answer:
        result = _answered(answer, output, duration)
        if result is not None:
            return result
    if _over_cpu(job_data, status, cpu_s):  # it never answered: its CPU limit ended it
        return _timed_out(job_data, "cpu", cpu_s, duration, output)
    return _unanswered(job_data, status or 0, output, duration)


def _unanswered(job_data: dict, status: int, output: str, duration: float) -> dict:
    """A job whose process ended without an answer, within its limits: a signal's end,
    else a crash with its exit code (-1 where it did not exit)."""
    if os.WIFSIGNALED(status):
        return _signalled(job_data, os.WTERMSIG(status), output, duration)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return {
        "status": "crash",
        "error": f"process exited with code {code} before reporting a result\n{output}".strip(),
        "duration_s": duration,
    }


def _memcheck_found(status: int | None, output: str, head: str, duration: float) -> dict | None:
    """A job run under compute-sanitizer that found errors: a bounds result naming the
    first (an access of the kernel's own first); None where it found none."""
    summary = re.search(r"ERROR SUMMARY: (\d+) error", output)
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    if exit_code != SANITIZER_ERROR_EXIT and not (summary and int(summary.group(1)) > 0):
        return None
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


def _answered(answer: bytes, output: str, duration: float) -> dict | None:
    """The job's own answer with its duration (an error's with the process's output);
    None where the answer is not JSON."""
    try:
        result = json.loads(answer)
    except ValueError:
        return None
    result["duration_s"] = duration
    if result.get("status") == "error" and output:
        result["error"] = f"{result.get('error', '')}\n--- output ---\n{output}"
    return result


def _signalled(job_data: dict, sig: int, output: str, duration: float) -> dict:
    """A job its signal ended: over its output limit (SIGXFSZ), else killed by it."""
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
    why = {
        signal.SIGXFSZ: f"output exceeded {job_data['output_limit_bytes']} bytes",
    }.get(sig, f"killed by {name}")
    return {
        "status": "crash",
        "signal": sig,
        "error": f"{why}\n{output}".strip(),
        "duration_s": duration,
    }
