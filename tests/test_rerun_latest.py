"""``rerun latest`` means the latest run of the file the user names, or of the kernel
file the ``--tests`` import; where it has to choose, one line says which run it took;
a failing ``--tests`` file is blamed as such, not as the kernel file's own check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.rerun import imported_kernels, latest_run
from tests.conftest import EXAMPLES, run_cli

SOFTMAX_TEST = """import torch
from softmax import softmax


def test_rows():
    x = torch.randn(5, 33)
    torch.testing.assert_close(softmax(x), torch.softmax(x, dim=-1))
"""

BROKEN_TEST = """from softmax import no_such_name


def test_rows():
    pass
"""


def record(run_id: str, kernel: str, tests: list[str] | None = None) -> dict:
    report = {"run_id": run_id, "kernel": {"path": kernel}, "settings": {"tests": tests or []}}
    return {"run_id": run_id, "kernel": kernel, "report": report, "settings": report["settings"]}


def test_latest_takes_the_named_files_run_not_the_newest(tmp_path):
    a, b = str(tmp_path / "softmax.py"), str(tmp_path / "vector_add.py")
    records = [record("1", a), record("2", b)]
    took, said = latest_run(records, a, [])
    assert took["run_id"] == "1" and said == ""
    took, said = latest_run(records, None, [])
    assert took["run_id"] == "2"
    assert said.startswith("rerun latest: took run 2 of vector_add.py (the newest run;")
    with pytest.raises(BadInput, match="no finished run of .*other.py"):
        latest_run(records, str(tmp_path / "other.py"), [])
    assert latest_run([record("1", a)], None, [])[1] == ""  # one file: nothing to choose


def test_latest_follows_the_tests_to_the_kernel_file_they_import(tmp_path):
    for name in ("softmax.py", "vector_add.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    test = tmp_path / "test_sm.py"
    test.write_text(SOFTMAX_TEST)
    a, b = str(tmp_path / "softmax.py"), str(tmp_path / "vector_add.py")
    assert imported_kernels(str(test), []) == [str(Path(a).resolve())]
    took, said = latest_run([record("1", a), record("2", b)], None, [str(test)])
    assert took["run_id"] == "1"
    assert said == "rerun latest: took run 1 of softmax.py, the kernel file test_sm.py imports"
    # a test file a recorded run ran belongs to that run's kernel file
    other = tmp_path / "test_other.py"
    other.write_text("def test_nothing():\n    pass\n")
    records = [record("1", a), record("2", b, [str(other)]), record("3", a)]
    assert latest_run(records, None, [str(other)])[0]["run_id"] == "2"


@pytest.mark.slow
def test_rerun_latest_after_runs_of_two_files(tmp_path):
    for name in ("softmax.py", "vector_add.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    (tmp_path / "test_sm.py").write_text(SOFTMAX_TEST)
    (tmp_path / "test_broken.py").write_text(BROKEN_TEST)
    flags = ("--operators", "program-id-swap", "--writer", "none", "-q", "--cache-dir", "c")
    for name in ("softmax.py", "vector_add.py"):  # softmax's run has a survivor
        done = run_cli("run", name, *flags, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    cache = ("--cache-dir", "c", "--no-write-tests")

    out = run_cli("rerun", "latest", "--survivors", "--tests", "test_sm.py", *cache, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("rerun latest: took run ") and lines[0].endswith(
        " of softmax.py, the kernel file test_sm.py imports"
    ), lines[0]
    assert any(
        " mutant of " in ln and ln.endswith("softmax.py (extra tests: test_sm.py)") for ln in lines
    )

    out = run_cli("rerun", "latest", "--survivors", *cache, cwd=tmp_path)  # no file: the newest
    assert out.returncode == 0, out.stdout + out.stderr
    assert "of softmax.py (the newest run; name a kernel file to choose" in out.stdout

    out = run_cli("rerun", "latest", "vector_add.py", "--survivors", *cache, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "has no survivors: nothing to judge again" in out.stdout

    args = ("rerun", "latest", "softmax.py", "--survivors", "--tests", "test_broken.py")
    out = run_cli(*args, *cache, cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    error = out.stderr.strip()
    assert error.count("\n") == 0 and "Traceback" not in out.stderr
    assert "--tests test_broken.py failed on the original of " in error, error
    assert "own check" not in error and "no_such_name" in error
