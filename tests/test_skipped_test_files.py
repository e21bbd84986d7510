"""A test file that skips itself whole while pytest collects it (``pytest.skip(...,
allow_module_level=True)``: a GPU-only file on a CPU, a missing optional package) is a skip,
as ``pytest PATH`` shows it, not an original that failed with "no tests ran"."""

from __future__ import annotations

import json

import pytest

from .conftest import run_cli
from .test_library_run import QUICK, copy_lib


@pytest.mark.slow
def test_a_file_skipped_while_collecting_leaves_the_suite_running(tmp_path):
    root = copy_lib(tmp_path)
    (root / "tests" / "test_gpu_only.py").write_text(
        "import pytest\n\npytest.skip('needs a GPU', allow_module_level=True)\n\n\n"
        "def test_never():\n    assert False\n"
    )
    proc = run_cli(
        "run", "src/kernel_lib/ops/scale.py", "--tests", "tests", *QUICK,
        "--operators", "mask-drop", "--json", "r.json", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    assert report["score"]["killed"] >= 1, report["score"]
    assert not any("no tests ran" in str(m.get("reason")) for m in report["mutants"])
