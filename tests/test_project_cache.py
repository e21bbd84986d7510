"""Project mode's cache key covers what the tests read from the project (engine/job.py
``tests_digest``): a project's tests are not sent with the job, so an edited test file,
conftest or test helper must not be answered from the cache."""

from __future__ import annotations

import json

import pytest

from mutant_gate.engine.job import tests_digest as digest

from .conftest import run_cli
from .test_library_run import QUICK, copy_lib


def test_the_digest_follows_tests_helpers_and_conftests(tmp_path):
    root = copy_lib(tmp_path)
    tests = root / "tests"
    paths = (str(tests / "test_scale.py"),)
    first = digest(str(root), paths)
    assert digest(str(root), paths) == first
    (tests / "helpers.py").write_text("LIMIT = 3\n")  # a helper beside the tests
    second = digest(str(root), paths)
    assert second != first
    (tests / "conftest.py").write_text((tests / "conftest.py").read_text() + "\n# edited\n")
    assert digest(str(root), paths) not in (first, second)
    before = digest(str(root), paths)
    (root / "src" / "kernel_lib" / "utils.py").write_text("# the library's own code\n")
    assert digest(str(root), paths) == before  # the user's code, not the tests


@pytest.mark.slow
def test_an_edited_test_file_runs_again(tmp_path):
    root = copy_lib(tmp_path)
    args = ("run", "src/kernel_lib/ops/scale.py", "--tests", "tests/test_scale.py", *QUICK,
            "--operators", "mask-drop", "--cache-dir", str(tmp_path / "cache"))  # fmt: skip
    proc = run_cli(*args, "--json", "one.json", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    test = root / "tests" / "test_scale.py"
    test.write_text(test.read_text() + "\n\ndef test_added_later():\n    assert True\n")
    proc = run_cli(*args, "--json", "two.json", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = {c["case"] for c in json.loads((root / "two.json").read_text())["baseline"]["cases"]}
    assert "tests/test_scale.py::test_added_later" in cases, cases
