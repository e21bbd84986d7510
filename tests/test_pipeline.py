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

from .conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.slow


def read_report(path) -> dict:
    return json.loads(path.read_text())


def verdicts(report: dict) -> dict[str, tuple[str, str | None]]:
    return {m["id"]: (m["verdict"], m["by"]) for m in report["mutants"]}


def test_run_vector_add_report_and_cache(tmp_path):
    report_path = tmp_path / "r.json"
    proc = run_cli("run", str(EXAMPLES / "vector_add.py"), "--json", str(report_path), "-j", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = read_report(report_path)
    assert report["schema_version"] == 1
    assert report["kernel"]["path"].endswith("vector_add.py")
    assert set(report["toolchain"]) >= {"python", "torch", "triton"}
    mutants = report["mutants"]
    assert len(mutants) >= 8
    for m in mutants:
        assert m["verdict"] in {"killed", "survived", "error"}
        assert m["diff"].startswith("--- a/vector_add.py")
        assert m["cached"] is False
        assert (m["by"] is not None) == (m["verdict"] == "killed")
    by = {m["by"] for m in mutants if m["verdict"] == "killed"}
    assert "own-check" in by
    # A dropped mask on sizes that are not a block multiple is caught by the bounds check.
    dropped = [m for m in mutants if m["operator"] == "mask-drop"]
    assert dropped and all(m["by"] == "bounds" for m in dropped), dropped
    assert "past its end" in dropped[0]["reason"]
    score = report["score"]
    assert score["total"] == len(mutants)
    assert score["killed"] == sum(m["verdict"] == "killed" for m in mutants)
    assert "score:" in proc.stdout

    # Second run: everything from the cache, same verdicts.
    again = tmp_path / "r2.json"
    proc2 = run_cli("run", str(EXAMPLES / "vector_add.py"), "--json", str(again), "-j", "2", cwd=tmp_path)
    assert proc2.returncode == 0, proc2.stderr
    report2 = read_report(again)
    assert all(m["cached"] for m in report2["mutants"])
    assert verdicts(report2) == verdicts(report)

    # --no-cache runs everything again and agrees.
    fresh = tmp_path / "r3.json"
    proc3 = run_cli("run", str(EXAMPLES / "vector_add.py"), "--json", str(fresh), "--no-cache", cwd=tmp_path)
    assert proc3.returncode == 0, proc3.stderr
    assert not any(m["cached"] for m in read_report(fresh)["mutants"])
    assert verdicts(read_report(fresh)) == verdicts(report)


def test_fail_under_gates(tmp_path):
    args = ["run", str(EXAMPLES / "vector_add.py"), "--operators", "masks", "-q"]
    low = run_cli(*args, "--fail-under", "0", cwd=tmp_path)
    assert low.returncode == 0, low.stderr
    high = run_cli(*args, "--fail-under", "100", "--operators", "masks,boundaries", cwd=tmp_path)
    report_killed_all = "100.0%" in high.stdout
    assert high.returncode == (0 if report_killed_all else 1), high.stdout
    if high.returncode == 1:
        assert "under --fail-under 100" in high.stdout


def test_operators_selection_limits_mutants(tmp_path):
    path = tmp_path / "r.json"
    proc = run_cli("run", str(EXAMPLES / "vector_add.py"), "--operators", "masks", "--json", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {m["family"] for m in read_report(path)["mutants"]} == {"masks"}


def test_timeout_and_crash_verdicts(tmp_path):
    """A mutant that loops forever ends as timeout; the own check names what killed the rest."""
    kernel = tmp_path / "loop.py"
    kernel.write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\n"
        "def fill_kernel(out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    for i in range(0, 1):\n"
        "        tl.store(out_ptr + offs, offs.to(tl.float32) * 2.0, mask=offs < n)\n\n\n"
        "def fill(n):\n"
        "    out = torch.empty(n)\n"
        "    fill_kernel[(triton.cdiv(n, 16),)](out, n, BLOCK=16)\n"
        "    return out\n\n\n"
        "if __name__ == '__main__':\n"
        "    import time\n"
        "    out = fill(40)\n"
        "    if out[0].item() != 0.0:\n"
        "        while True:\n"
        "            time.sleep(0.1)\n"
        "    torch.testing.assert_close(out, torch.arange(40).float() * 2)\n"
    )
    path = tmp_path / "r.json"
    proc = run_cli("run", str(kernel), "--json", str(path), "--timeout-base", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = read_report(path)
    by = {m["operator"]: m["by"] for m in report["mutants"]}
    # range(0, 1) -> range(0, 1 + 1) stores twice: same values, survives;
    # range(1, 1): nothing stored -> out[0] is garbage or 0 -> a kill of some kind.
    timeouts = [m for m in report["mutants"] if m["by"] == "timeout"]
    assert timeouts, by
    assert all("timed out after" in m["reason"] for m in timeouts)


def _count_results(cache_dir) -> int:
    with diskcache.Cache(str(cache_dir)) as cache:
        return sum(1 for k in cache.iterkeys() if str(k).startswith("job:"))


def test_sigkill_mid_run_then_resume(tmp_path):
    target = str(EXAMPLES / "softmax.py")
    cache_dir = tmp_path / "cache"
    cmd = [sys.executable, "-m", "mutant_gate.tui.cli", "run", target, "-j", "1", "-q", "--cache-dir", str(cache_dir)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if cache_dir.exists() and _count_results(cache_dir) >= 4:  # baseline + 3 mutants
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    stored = _count_results(cache_dir)
    assert stored >= 4
    report_path = tmp_path / "resumed.json"
    resumed = run_cli("run", target, "-j", "2", "--cache-dir", str(cache_dir), "--json", str(report_path),
                      cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    report = read_report(report_path)
    cached = sum(m["cached"] for m in report["mutants"])
    assert cached == stored - 1  # every finished mutant job, nothing re-run; the baseline was one entry
    assert report["complete"]
    # Same verdicts as an uninterrupted run.
    clean_path = tmp_path / "clean.json"
    clean = run_cli("run", target, "-j", "2", "--no-cache", "--json", str(clean_path), cwd=tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert verdicts(read_report(clean_path)) == verdicts(report)
