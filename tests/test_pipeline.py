"""Whole runs through the real command line, the real pool and the real cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import diskcache
import pytest

from .conftest import EXAMPLES, TERMINAL_SIGINT, run_cli
from .test_report_schema import validate

pytestmark = pytest.mark.slow


def read_report(path) -> dict:
    return json.loads(path.read_text())


def verdicts(report: dict) -> dict[str, tuple[str, str | None]]:
    return {m["id"]: (m["verdict"], m["by"]) for m in report["mutants"]}


def test_run_vector_add_report_and_cache(tmp_path):
    report_path = tmp_path / "r.json"
    proc = run_cli(
        "run", str(EXAMPLES / "vector_add.py"), "--json", str(report_path), "-j", "2", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    report = read_report(report_path)
    assert report["schema_version"] == 3
    validate(report)  # docs/reference/report.schema.json
    assert report["kernel"]["path"].endswith("vector_add.py")
    assert set(report["toolchain"]) >= {"python", "torch", "triton"}
    mutants = report["mutants"]
    assert len(mutants) >= 8
    for m in mutants:
        assert m["verdict"] in {"killed", "survived", "error", "not_compilable"}
        assert m["diff"].startswith("--- a/vector_add.py")
        assert m["cached"] is False
        assert (m["by"] is not None) == (m["verdict"] == "killed")
        if m["verdict"] == "not_compilable":  # e.g. pid / BLOCK_SIZE: a float offset
            assert m["reason"].startswith("does not compile: "), m["reason"]
    by = {m["by"] for m in mutants if m["verdict"] == "killed"}
    assert "own-check" in by
    # A dropped mask on sizes that are not a block multiple is caught by the bounds check.
    dropped = [m for m in mutants if m["operator"] == "mask-drop"]
    assert dropped and all(m["by"] == "bounds" for m in dropped), dropped
    assert "past its end" in dropped[0]["reason"]
    score = report["score"]
    assert score["total"] == len(mutants)
    assert score["killed"] == sum(m["verdict"] == "killed" for m in mutants)
    assert "your tests:" in proc.stdout

    # Second run: everything from the cache, same verdicts.
    again = tmp_path / "r2.json"
    proc2 = run_cli(
        "run", str(EXAMPLES / "vector_add.py"), "--json", str(again), "-j", "2", cwd=tmp_path
    )
    assert proc2.returncode == 0, proc2.stderr
    report2 = read_report(again)
    assert all(m["cached"] for m in report2["mutants"])
    assert verdicts(report2) == verdicts(report)

    # --no-cache runs everything again and agrees.
    fresh = tmp_path / "r3.json"
    proc3 = run_cli(
        "run", str(EXAMPLES / "vector_add.py"), "--json", str(fresh), "--no-cache", cwd=tmp_path
    )
    assert proc3.returncode == 0, proc3.stderr
    assert not any(m["cached"] for m in read_report(fresh)["mutants"])
    assert verdicts(read_report(fresh)) == verdicts(report)


def test_fail_under_gates(tmp_path):
    """softmax's two program-id-swap mutants: the own check kills one; the other
    (``tl.num_programs(0) -> tl.num_programs(1)``: a row step of 1, each program walks
    every row from its own on, the same values) survives with no writer, so the score
    is 50% by construction, not by what a run printed."""
    args = ["run", str(EXAMPLES / "softmax.py"), "--operators", "program-id-swap"]
    args += ["--writer", "none", "-q", "--cache-dir", "c"]
    low = run_cli(*args, "--fail-under", "50", cwd=tmp_path)
    assert low.returncode == 0, low.stdout + low.stderr
    assert "your tests' adjusted score 50.0% meets --fail-under 50%" in " ".join(low.stdout.split())
    high = run_cli(*args, "--fail-under", "60", cwd=tmp_path)
    assert high.returncode == 1, high.stdout + high.stderr
    said = " ".join(high.stdout.split())
    assert "your tests' adjusted score 50.0% is under --fail-under 60% by 10.0 points" in said


def test_operators_selection_limits_mutants(tmp_path):
    path = tmp_path / "r.json"
    proc = run_cli(
        "run",
        str(EXAMPLES / "vector_add.py"),
        "--operators",
        "masks",
        "--json",
        str(path),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert {m["family"] for m in read_report(path)["mutants"]} == {"masks"}


HANG_OR_CRASH = """
import ctypes
import time

import torch
import triton
import triton.language as tl


@triton.jit
def ramp_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32) * 2.0 - 1.0, mask=offs < n)


def ramp(n):
    out = torch.empty(n)
    ramp_kernel[(triton.cdiv(n, 16),)](out, n, BLOCK=16)
    return out


if __name__ == "__main__":
    out = ramp(40)
    expected = torch.arange(40).float() * 2.0 - 1.0
    # A check with side effects: a sum too small hangs, too large segfaults.
    if out.sum() < expected.sum():
        while True:
            time.sleep(0.05)
    if out.sum() > expected.sum():
        ctypes.string_at(0)
    torch.testing.assert_close(out, expected)
"""


def test_hanging_mutant_times_out_and_segfaulting_mutant_crashes(tmp_path):
    kernel = tmp_path / "ramp.py"
    kernel.write_text(HANG_OR_CRASH)
    path = tmp_path / "r.json"
    proc = run_cli(
        "run",
        str(kernel),
        "--json",
        str(path),
        "--timeout-base",
        "2",
        "--operators",
        "arith",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    rows = {(m["operator"], m["after"]): m for m in read_report(path)["mutants"]}
    hang = rows[("mul-div", "offs.to(tl.float32) / 2.0")]  # smaller sum: the check hangs
    assert (hang["verdict"], hang["by"]) == ("killed", "timeout"), hang
    # It sleeps: its CPU limit never fires, the wall clock's backstop does, named as such.
    assert "timed out by the wall-clock backstop" in hang["reason"], hang["reason"]
    assert "the limit: the original's" in hang["reason"]  # how the limit was set
    assert hang["cpu_s"] < 1.0  # what its CPU limit counted: almost nothing
    crash = rows[("add-sub", "offs.to(tl.float32) * 2.0 + 1.0")]  # larger sum: the check segfaults
    assert (crash["verdict"], crash["by"]) == ("killed", "crash"), crash
    assert "SIGSEGV" in crash["reason"]
    # The run went on past both: every mutant has a verdict.
    assert all(m["verdict"] != "pending" for m in rows.values())


JUST_OVER = """
import time

import torch
import triton
import triton.language as tl


@triton.jit
def ramp_kernel(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32) * 2.0 - 1.0, mask=offs < n)


def ramp(n):
    out = torch.empty(n)
    ramp_kernel[(triton.cdiv(n, 16),)](out, n, BLOCK=16)
    return out


if __name__ == "__main__":
    out = ramp(40)
    # The original spends 8 CPU s here (and its first launch's few tenths), a wrong
    # result 10.4: past a mutant's limit (the original's CPU s x 1 + 0.5) and under the
    # rerun's 1.25 times that limit.
    wrong = not torch.equal(out, torch.arange(40).float() * 2.0 - 1.0)
    end = time.process_time() + 8.0 + 2.4 * wrong
    while time.process_time() < end:
        pass
"""


def test_a_mutant_just_over_its_cpu_limit_runs_again_and_is_flaky(tmp_path):
    kernel = tmp_path / "ramp.py"
    kernel.write_text(JUST_OVER)
    path = tmp_path / "r.json"
    proc = run_cli("run", str(kernel), "--json", str(path), "--timeout-factor", "1",
                   "--timeout-base", "0.5", "--operators", "add-sub", "-j", "2",
                   "--writer", "none",
                   cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = read_report(path)
    flaky = [m for m in report["mutants"] if m["verdict"] == "flaky"]
    assert flaky, [(m["verdict"], m["reason"]) for m in report["mutants"]]
    row = flaky[0]
    # Both runs, each with its figures, in either order: stopped just over the limit,
    # then passed with 1.25 times it; or passed within the margin under it, then stopped.
    runs = {r["verdict"]: r for r in row["flaky"]}
    assert sorted(runs) == ["killed", "survived"], row["flaky"]
    stopped, passed = runs["killed"], runs["survived"]
    assert stopped["status"] == "timeout"
    assert stopped["cpu_s"] >= 0.95 * stopped["limit_s"], row["flaky"]  # /proc: to a tick
    assert passed["limit_s"] / 1.25 <= passed["cpu_s"] < passed["limit_s"], row["flaky"]
    assert "two runs disagree near the CPU limit" in row["reason"], row["reason"]
    assert "the limit: the original's" in row["reason"]
    # out of the score, and said as such in every face's words
    assert {"id": row["id"], "verdict": "flaky"} in report["score"]["excluded"]
    assert "flaky" in proc.stdout


OUT_OF_MEMORY = """
import torch
import triton
import triton.language as tl


@triton.jit
def shift(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


if __name__ == "__main__":
    x = torch.arange(8, dtype=torch.float32)
    out = torch.empty_like(x)
    shift[(1,)](x, out, 8, BLOCK=8)
    if not torch.equal(out, x * 2.0):  # as a test whose GPU ran short would end
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
"""


def test_a_kill_for_want_of_gpu_memory_runs_again_alone_before_it_is_recorded(tmp_path):
    """Every wrong result here ends in torch's out-of-memory error: each such kill runs
    again alone, and killed again, its row says so (a pass then: flaky, test_steady)."""
    kernel = tmp_path / "shift.py"
    kernel.write_text(OUT_OF_MEMORY)
    path = tmp_path / "r.json"
    proc = run_cli("run", str(kernel), "--json", str(path), "--operators", "mul-div",
                   "-j", "2", "--writer", "none", "--cache-dir", str(tmp_path / "cache"),
                   cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = read_report(path)["mutants"]
    memory = [m for m in rows if "OutOfMemoryError" in (m["reason"] or "")]
    assert memory, [(m["verdict"], m["reason"]) for m in rows]
    for row in memory:
        assert row["verdict"] == "killed", row
        assert "ran out of GPU memory beside the run's other jobs; run again alone" in row["reason"]
    # each ran twice: its first result and the second's, apart in the cache
    assert _mutant_results(tmp_path / "cache") == len(rows) + len(memory)


def _mutant_results(cache_dir) -> int:
    """Stored results of mutant jobs: all but the baseline (stored first, before any
    mutant runs) and the own check's run without kernels (``extra.null_run``), which
    runs beside the mutants and may or may not have finished."""
    with diskcache.Cache(str(cache_dir)) as cache:
        results = [json.loads(cache[k]) for k in cache.iterkeys() if str(k).startswith("job:")]
    null_runs = sum(1 for r in results if "null_run" in (r.get("extra") or {}))
    return max(0, len(results) - 1 - null_runs)


def _start_run(target: str, cache_dir, cwd, jobs: str, **popen) -> subprocess.Popen:
    """A real CLI run in the background (no writer: the cache holds mutant jobs only)."""
    cmd = [sys.executable, "-m", "mutant_gate.cli", "run", target, "-j", jobs, "-q",
           "--writer", "none", "--cache-dir", str(cache_dir)]  # fmt: skip
    return subprocess.Popen(cmd, cwd=cwd, preexec_fn=TERMINAL_SIGINT, **popen)


def _wait_for_results(proc: subprocess.Popen, cache_dir, count: int = 3) -> None:
    """Until ``count`` mutant job results are stored or the run ends."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if cache_dir.exists() and _mutant_results(cache_dir) >= count:
            return
        time.sleep(0.2)


def test_sigkill_mid_run_then_resume(tmp_path):
    target = str(EXAMPLES / "softmax.py")
    cache_dir = tmp_path / "cache"
    proc = _start_run(target, cache_dir, tmp_path, "1", stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        _wait_for_results(proc, cache_dir)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    stored = _mutant_results(cache_dir)
    assert stored >= 3
    report_path = tmp_path / "resumed.json"
    resumed = run_cli(
        "run",
        target,
        "-j",
        "2",
        "--writer",
        "none",
        "--cache-dir",
        str(cache_dir),
        "--json",
        str(report_path),
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr
    report = read_report(report_path)
    cached = sum(m["cached"] for m in report["mutants"])
    assert cached == stored  # every finished mutant job, nothing re-run
    assert report["complete"]
    # Same verdicts as an uninterrupted run.
    clean_path = tmp_path / "clean.json"
    clean = run_cli(
        "run",
        target,
        "-j",
        "2",
        "--writer",
        "none",
        "--no-cache",
        "--json",
        str(clean_path),
        cwd=tmp_path,
    )
    assert clean.returncode == 0, clean.stderr
    assert verdicts(read_report(clean_path)) == verdicts(report)


def test_ctrl_c_stops_promptly_and_the_next_run_resumes(tmp_path):
    target = str(EXAMPLES / "layer_norm.py")
    cache_dir = tmp_path / "cache"
    proc = _start_run(target, cache_dir, tmp_path, "2", stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)  # fmt: skip
    _wait_for_results(proc, cache_dir)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    stored = _mutant_results(cache_dir)
    report_path = tmp_path / "resumed.json"
    resumed = run_cli(
        "run",
        target,
        "--writer",
        "none",
        "--cache-dir",
        str(cache_dir),
        "--json",
        str(report_path),
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr
    report = read_report(report_path)
    assert sum(m["cached"] for m in report["mutants"]) == stored
    assert report["complete"]
