"""A library run writes every report format it is asked for, and its report is a run
record in the cache: ``report latest`` and ``replay`` find it as they find a file's run."""

from __future__ import annotations

import json

import pytest

from .conftest import run_cli
from .test_library_run import QUICK, copy_lib


@pytest.mark.slow
def test_a_library_run_writes_every_format_and_a_run_record(tmp_path):
    root = copy_lib(tmp_path)
    cache = str(tmp_path / "cache")
    proc = run_cli(
        "run", "src/kernel_lib", "--tests", "tests", *QUICK, "--cache-dir", cache,
        "--json", "lib.json", "--html", "lib.html", "--markdown", "lib.md",
        "--stryker", "lib.stryker.json", "--junit", "lib.xml", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "lib.json").read_text())
    stryker = json.loads((root / "lib.stryker.json").read_text())
    assert len(stryker["files"]) == 3  # every module, not one
    assert "rms_norm.py" in (root / "lib.md").read_text()
    assert (root / "lib.html").read_text().count("rms_norm.py") >= 1
    assert (root / "lib.xml").read_text().count("<testcase") == len(report["mutants"])
    proc = run_cli("report", "latest", "--format", "markdown", "--cache-dir", cache, cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == (root / "lib.md").read_text().strip()
    proc = run_cli("report", report["run_id"], "--format", "json", "--cache-dir", cache, cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["files"] == report["files"]
