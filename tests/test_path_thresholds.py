"""Per-path thresholds: ``[tool.mutant-gate.fail-under-paths]`` maps globs to percents;
a module under the first glob its path matches fails the gate with one line naming it.
``--fail-under`` gates the library's score."""

from __future__ import annotations

import json
import os

import pytest

from mutant_gate.engine.library import under_thresholds

from .conftest import run_cli
from .test_library_run import QUICK, copy_lib


def _file(path: str, score: float | None, status: str = "judged", reason: str = "") -> dict:
    return {"path": path, "score": score, "status": status, "reason": reason}


def test_the_first_matching_glob_decides(tmp_path):
    base = str(tmp_path)
    ops = os.path.join(base, "src", "ops")
    report = {
        "files": [
            _file(os.path.join(ops, "softmax.py"), 85.0),
            _file(os.path.join(ops, "scale.py"), 85.0),
            _file(os.path.join(ops, "norm.py"), None, "left_out", "its run failed"),
            _file(os.path.join(base, "src", "other.py"), 10.0),
        ]
    }
    thresholds = [(os.path.join(ops, "softmax.py"), 90.0), (os.path.join(ops, "*"), 80.0)]
    lines = under_thresholds(report, thresholds)
    assert len(lines) == 2, lines
    assert "softmax.py: 85.0%, under its threshold 90%" in lines[0]
    assert "norm.py: left out (its run failed), under its threshold 80%" in lines[1]
    assert under_thresholds(report, []) == []
    # one kernel file's report: its path and adjusted score
    single = {"kernel": {"path": os.path.join(ops, "scale.py")}, "score": {"adjusted": 75.0}}
    assert len(under_thresholds(single, thresholds)) == 1


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('"src/*" = 120', "'src/*': 120 is not between 0 and 100"),
        ('"src/*" = -1', "'src/*': -1 is not between 0 and 100"),
        ('"src/*" = "high"', "'src/*': expected a percent (a number), got 'high'"),
        ('"src/*" = true', "'src/*': expected a percent (a number), got True"),
    ],
)
def test_a_bad_threshold_is_one_line(tmp_path, table, said):
    root = copy_lib(tmp_path)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text() + f"\n[tool.mutant-gate.fail-under-paths]\n{table}\n"
    )
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", *QUICK, cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "[tool.mutant-gate.fail-under-paths]" in lines[0], proc.stderr
    assert said in lines[0], proc.stderr


def test_thresholds_must_be_a_table(tmp_path):
    root = copy_lib(tmp_path)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n[tool.mutant-gate]\nfail-under-paths = 80\n")
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", *QUICK, cwd=root)
    assert proc.returncode == 2
    assert "expected a table of GLOB = PERCENT, got 80" in proc.stderr


@pytest.mark.slow
def test_a_module_under_its_threshold_fails_the_gate(tmp_path):
    """The library's score passes --fail-under; the rms norm's (4 survivors of 26) is
    under its path's 100: exit 1, one line naming it; the other modules' glob passes."""
    root = copy_lib(tmp_path)
    pyproject = root / "pyproject.toml"
    table = (
        "\n[tool.mutant-gate.fail-under-paths]\n"
        '"src/kernel_lib/ops/rms_norm.py" = 100\n'
        '"src/kernel_lib/ops/*" = 10\n'
    )
    pyproject.write_text(pyproject.read_text() + table)
    args = ("run", "src/kernel_lib/ops/rms_norm.py", "src/kernel_lib/ops/scale.py",
            "--tests", "tests", *QUICK, "--json", "lib.json")  # fmt: skip
    proc = run_cli(*args, "--fail-under", "10", cwd=root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((root / "lib.json").read_text())
    rms = next(f for f in report["files"] if f["path"].endswith("rms_norm.py"))
    assert rms["score"] < 100
    under = [line for line in proc.stdout.splitlines() if "under its threshold" in line]
    assert len(under) == 1, proc.stdout
    assert under[0].startswith("src/kernel_lib/ops/rms_norm.py: ")
    assert "fail-under-paths src/kernel_lib/ops/rms_norm.py" in under[0]
    # --fail-under gates the library's score (served from the cache now)
    proc = run_cli(*args, "--fail-under", "99", "--no-config", cwd=root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "under its threshold" not in proc.stdout
    assert report["score"]["adjusted"] < 99
    proc = run_cli(*args, "--fail-under", "10", "--no-config", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
