"""The default output is what a kernel author reads at 80 columns: no line wider, the
table whole, the engine's anatomy (timing, the probe's spend, the sandbox, the shims)
only with ``-v``, and all of it still in the JSON report."""

from __future__ import annotations

import json
import shutil

import pytest
from rich.cells import cell_len

from tests.conftest import EXAMPLES, run_cli

ANATOMY = ("bound by checks:", "sandbox: ", "probe spend:", "shims the original needed")
FILES = ["vector_add.py", "softmax.py", "layer_norm.py", "matmul.py", "rms_norm_libdevice.py"]
FILES += ["axpy_autotune.py"]


def wide(text: str, columns: int = 80) -> list[str]:
    return [line for line in text.splitlines() if cell_len(line) > columns]


@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_no_default_line_is_wider_than_80_columns(tmp_path, name):
    shutil.copy(EXAMPLES / name, tmp_path / name)
    args = ("run", name, "--cache-dir", "c", "--json", "r.json")
    out = run_cli(*args, cwd=tmp_path, env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert wide(out.stdout) == [], out.stdout
    assert not any(line.startswith(ANATOMY) for line in out.stdout.splitlines()), out.stdout
    assert "your tests: " in out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["bound"] and report["sandbox"]["workers"]  # the anatomy stays in the JSON
    verbose = run_cli(*args, "-v", cwd=tmp_path, env={"COLUMNS": "80"})  # from the cache
    assert verbose.returncode == 0, verbose.stdout + verbose.stderr
    said = verbose.stdout.splitlines()
    assert any(line.startswith("sandbox: ") for line in said), verbose.stdout
    assert any(line.startswith("bound by checks:") for line in said), verbose.stdout


@pytest.mark.slow
def test_a_project_run_fits_80_columns_too(tmp_path):
    project = tmp_path / "kernel_lib"
    shutil.copytree(EXAMPLES / "kernel_lib", project)
    args = ("run", "src/kernel_lib/ops/softmax.py", "--tests", "tests/test_layers.py")
    out = run_cli(*args, "--cache-dir", "c", cwd=project, env={"COLUMNS": "80"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert wide(out.stdout) == [], out.stdout
