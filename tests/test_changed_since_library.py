"""``--changed-since REF`` across a library (a git repository made in tmp_path): only the
modules with a changed jit function run, their tests selected as in a full run; the
unchanged ones are said once."""

from __future__ import annotations

import json

import pytest

from mutant_gate.engine.library_paths import changed_modules, find_modules

from .conftest import run_cli
from .test_changed_since import git
from .test_library_run import QUICK, copy_lib, verdicts
from .test_report_schema import validate

SCALE = "src/kernel_lib/ops/scale.py"


def _repo(tmp_path):
    root = copy_lib(tmp_path)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "library")
    return root


def _touch_scale(root) -> None:
    path = root / SCALE
    text = path.read_text()
    assert "    mask = offs < n\n" in text
    path.write_text(text.replace("    mask = offs < n\n", "    mask = offs < n  # in bounds\n"))


def test_only_modules_with_a_changed_jit_function_count(tmp_path):
    root = _repo(tmp_path)
    modules = find_modules([str(root / "src")])
    assert changed_modules(modules, "HEAD") == ([], modules)
    _touch_scale(root)
    # a change outside every jit function (the wrapper's file docstring) is no change
    norm = root / "src/kernel_lib/ops/rms_norm.py"
    norm.write_text("# a comment\n" + norm.read_text())
    changed, unchanged = changed_modules(modules, "HEAD")
    assert [p.rsplit("/", 1)[-1] for p in changed] == ["scale.py"]
    assert len(unchanged) == 2


def test_a_bad_ref_across_a_library_is_one_line(tmp_path):
    root = _repo(tmp_path)
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", "--changed-since", "nope",
                   *QUICK, cwd=root)  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown git ref 'nope'" in lines[0], proc.stderr


@pytest.mark.slow
def test_a_library_run_judges_only_what_changed(tmp_path):
    root = _repo(tmp_path)
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", "--changed-since", "HEAD",
                   *QUICK, "--json", "none.json", cwd=root)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 modules unchanged since HEAD" in proc.stdout
    assert "nothing to judge" in proc.stdout
    nothing = json.loads((root / "none.json").read_text())
    validate(nothing)
    assert nothing["files"] == [] and len(nothing["library"]["unchanged"]) == 3

    _touch_scale(root)
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", "--changed-since", "HEAD",
                   *QUICK, "--json", "changed.json", cwd=root)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("2 modules unchanged since HEAD") == 1, proc.stdout
    report = json.loads((root / "changed.json").read_text())
    validate(report)
    assert [f["path"] for f in report["files"]] == [SCALE]
    assert report["library"]["changed_since"] == "HEAD"
    assert sorted(report["library"]["unchanged"]) == [
        "src/kernel_lib/ops/rms_norm.py",
        "src/kernel_lib/ops/softmax.py",
    ]
    # the changed module's verdicts: those of a full library run's, the whole suite beside
    proc = run_cli("run", SCALE, "--tests", "tests", *QUICK, "--json", "full.json", cwd=root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    full = json.loads((root / "full.json").read_text())
    assert verdicts(report) == verdicts(full) and report["mutants"]
