"""A stopped run leaves nothing running: whatever ends the command (SIGKILL, SIGTERM,
SIGHUP, the explorer's quit), its workers, their jobs and whatever the jobs started
are gone within a second or two, and SIGTERM/SIGHUP end it as Ctrl-C does.

The kernel's check hangs for one mutant only (the store's mask dropped), so the run
is stopped while that job runs and after the others finished and were cached.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mutant_gate.engine.harness.isolation import processes_of, sandbox_uid

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
]

HANGS_ON_ONE_MUTANT = textwrap.dedent("""\
    import ctypes
    import time

    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


    def add(x, y):
        out = torch.empty_like(x)
        add_kernel[(triton.cdiv(x.numel(), 64),)](x, y, out, x.numel(), BLOCK=64)
        return out


    if __name__ == "__main__":
        if "tl.store(out_ptr + offs, x + y)" + chr(10) in open(__file__).read():
            # This mutant's check hangs, under a name the test finds it by (PR_SET_NAME):
            # the run is stopped while it runs.
            ctypes.CDLL(None).prctl(15, b"mg-hanging", 0, 0, 0)
            time.sleep(600)
        x, y = torch.rand(100), torch.rand(100)
        assert torch.allclose(add(x, y), x + y)
""")


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every process."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            table[int(entry)] = (int(fields[1]), fields[0].decode())
    return table


def descendants(root: int) -> dict[int, int]:
    """pid -> depth below ``root`` (1: a worker, 2: a job) of its live descendants."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, state) in table.items():
        if state not in ("Z", "X"):
            children.setdefault(ppid, []).append(pid)
    found, todo = {}, [(root, 0)]
    while todo:
        pid, depth = todo.pop()
        for child in children.get(pid, []):
            found[child] = depth + 1
            todo.append((child, depth + 1))
    return found


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def alive(pids) -> list[int]:
    table = _table()
    return [p for p in pids if p in table and table[p][1] not in ("Z", "X")]


class Watched:
    """What a running command has started, remembered as it goes."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: set[int] = set()
        self.workers: set[int] = set()

    def poll(self) -> dict[int, int]:
        now = descendants(self.root)
        self.seen |= set(now)
        self.workers |= {p for p, depth in now.items() if depth == 1}
        return now

    def wait_for_the_hanging_job(self, timeout: float = 180.0) -> int:
        """The pid of the hanging mutant's check (it names itself ``mg-hanging``).

        Found by name, not by how long a job has run: on a loaded machine any job can
        run for seconds, and stopping during an earlier one leaves less to resume."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for pid, depth in self.poll().items():
                if depth >= 2 and comm(pid) == "mg-hanging":
                    return pid
            time.sleep(0.05)
        raise AssertionError("the hanging mutant's check never started")

    def left_behind(self, within: float = 2.0) -> list[str]:
        """What is still running ``within`` seconds from now (none as soon as possible)."""
        deadline = time.monotonic() + within
        while True:
            left = alive(self.seen)
            if os.geteuid() == 0:  # every process of a worker's sandbox uid is its job's
                left += [p for w in self.workers for p in processes_of(sandbox_uid(w))]
            if not left or time.monotonic() >= deadline:
                return [_describe(p) for p in sorted(set(left))]
            time.sleep(0.05)


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            line = fh.read().replace(bytes(1), b" ").decode()
        return f"{pid}: {line[:120]}"
    except OSError:
        return f"{pid}: gone"


def start_run(tmp_path: Path) -> subprocess.Popen:
    (tmp_path / "hangs.py").write_text(HANGS_ON_ONE_MUTANT)
    return subprocess.Popen(
        [sys.executable, "-m", "mutant_gate.cli", "run", "hangs.py", "-j", "1", "--writer",
         "none", "--cache-dir", "cache", "-q"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_sigkill_to_the_command_during_a_job_leaves_no_process(tmp_path):
    proc = start_run(tmp_path)
    watched = Watched(proc.pid)
    try:
        watched.wait_for_the_hanging_job()
        proc.kill()
        assert watched.left_behind() == []
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_like_ctrl_c_and_the_next_run_resumes(tmp_path, sig):
    proc = start_run(tmp_path)
    watched = Watched(proc.pid)
    try:
        watched.wait_for_the_hanging_job()
        proc.send_signal(sig)
        left = watched.left_behind()  # counted from the signal, not from the command's end
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert left == []
    assert proc.returncode == 128 + sig, err
    assert f"stopped by {sig.name}; finished results are cached" in err
    if sig != signal.SIGTERM:
        return
    # The next run serves what finished from the cache (the hanging mutant now times out).
    again = subprocess.run(
        [sys.executable, "-m", "mutant_gate.cli", "run", "hangs.py", "-j", "1", "--writer",
         "none", "--cache-dir", "cache", "-q", "--json", "r.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    rows = json.loads((tmp_path / "r.json").read_text())["mutants"]
    assert sum(1 for m in rows if m["cached"]) >= 3, again.stdout + again.stderr
    assert '"timeout"' in (tmp_path / "r.json").read_text()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_quitting_the_explorer_during_a_job_leaves_no_process(tmp_path, anyio_backend):
    from mutant_gate.engine.settings import RunSettings, WriterSettings
    from mutant_gate.tui.app import create_app

    (tmp_path / "hangs.py").write_text(HANGS_ON_ONE_MUTANT)
    settings = RunSettings(
        kernel_path=str(tmp_path / "hangs.py"),
        cache_dir=str(tmp_path / "cache"),
        writers=WriterSettings(writer="none"),
        workers=1,
    )
    app = create_app(settings=settings)
    async with app.run_test(size=(140, 40)) as pilot:
        # This process has other workers (the session's pool): watch the explorer's only.
        deadline = time.monotonic() + 180
        watched, job = Watched(os.getpid()), None
        while job is None and time.monotonic() < deadline:
            sandbox = app.bridge.sandbox
            ours = {w.proc.pid for w in getattr(sandbox, "_all", [])}
            for worker in ours:
                watched.workers.add(worker)
                watched.seen.add(worker)
                below = descendants(worker)
                watched.seen |= set(below)
                job = next((p for p in below if comm(p) == "mg-hanging"), job)
            await pilot.pause(0.05)
        assert job is not None, "the hanging mutant's check never started"
        await pilot.press("q")
        await pilot.pause()
        assert watched.left_behind() == []
