"""A kernel module inside a package, judged by the project's own pytest suite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mutant_gate.engine.project import jit_callers, module_path

from .conftest import EXAMPLES, run_cli

LIB = EXAMPLES / "kernel_lib"
MODULE = LIB / "src" / "kernel_lib" / "ops" / "rms_norm.py"


def test_module_path_follows_the_package():
    assert module_path(str(MODULE)) == (str(LIB / "src"), "kernel_lib.ops.rms_norm")
    assert module_path(str(EXAMPLES / "vector_add.py")) is None


def test_helpers_are_reached_through_their_callers():
    source = MODULE.read_text()
    assert jit_callers(source, "_mean_square") == {"_mean_square", "rms_norm_kernel"}
    assert jit_callers(source, "rms_norm_kernel") == {"rms_norm_kernel"}


@pytest.mark.slow
def test_a_test_file_whose_cases_launch_no_kernel_of_the_module_is_bad_input(tmp_path):
    """Judged by the original's run: test_scale.py's cases launch the scale kernel,
    never rms_norm's, so they can never kill an rms_norm mutant."""
    root = copy_lib(tmp_path)
    proc = run_cli(
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_scale.py",
        "--writer",
        "none",
        "--no-cache",
        cwd=root,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "launches a kernel of kernel_lib.ops.rms_norm" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_test_importing_the_kernel_through_re_exports_is_accepted(tmp_path):
    """``from kernel_lib.ops import rms_norm_op`` (a package re-export) reaches the
    mutant at its import path: the test runs and kills, with no direct import line."""
    root = copy_lib(tmp_path)
    init = root / "src" / "kernel_lib" / "ops" / "__init__.py"
    init.write_text(init.read_text() + "from .rms_norm import rms_norm as rms_norm_op\n")
    test = root / "tests" / "test_reexport.py"
    source = (root / "tests" / "test_rms_norm.py").read_text()
    reexport = "from kernel_lib.ops import rms_norm_op as rms_norm"
    test.write_text(source.replace("from kernel_lib.ops.rms_norm import rms_norm", reexport))
    assert "kernel_lib.ops.rms_norm" not in test.read_text()
    proc = run_cli(
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_reexport.py",
        "--writer",
        "none",
        "--operators",
        "mask-drop",
        "--no-cache",
        "--json",
        "r.json",
        cwd=root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads((root / "r.json").read_text())["mutants"]
    assert rows and any(r["verdict"] == "killed" for r in rows), rows


def copy_lib(tmp_path: Path) -> Path:
    root = tmp_path / "kernel_lib"
    shutil.copytree(LIB, root)
    return root


@pytest.mark.slow
def test_selection_runs_fewer_cases_with_the_same_verdicts(tmp_path):
    root = copy_lib(tmp_path)
    base = [
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_rms_norm.py",
        "--writer",
        "none",
        "--operators",
        "masks,arith",
        "--no-cache",
    ]
    selected = run_cli(*base, "--json", str(tmp_path / "sel.json"), cwd=root)
    assert selected.returncode == 0, selected.stderr
    full = run_cli(*base, "--no-select", "--json", str(tmp_path / "full.json"), cwd=root)
    assert full.returncode == 0, full.stderr
    a = json.loads((tmp_path / "sel.json").read_text())
    b = json.loads((tmp_path / "full.json").read_text())
    selection = a["selection"]
    suite = selection["suite_cases"]
    assert suite == 5  # 4 parametrised cases + the registry test, counted per case
    print(
        f"cases run: selected {selection['cases_run']}, full suite {suite * selection['mutants']}"
    )
    assert selection["cases_run"] < suite * selection["mutants"]
    said = " ".join(selected.stdout.split())
    assert f"test selection: {selection['cases_run']} test cases for {selection['mutants']}" in said
    assert f"the full suite: {suite} per mutant ({suite * selection['mutants']} in all)" in said

    # Same verdicts; the first failing case may differ (selection runs the fastest first).
    def kinds(report):
        return {m["id"]: (m["verdict"], (m["by"] or "").split(":")[0]) for m in report["mutants"]}

    assert kinds(a) == kinds(b)
    helper = [m for m in a["mutants"] if m["function"] == "_mean_square"]
    assert helper and all(m["tests_selected"] == 4 for m in helper)  # reached through its caller


@pytest.mark.slow
def test_failing_project_test_is_named(tmp_path):
    root = copy_lib(tmp_path)
    test = root / "tests" / "test_rms_norm.py"
    test.write_text(test.read_text().replace('{"rms_norm", "scale"}', '{"rms_norm"}'))
    proc = run_cli(
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_rms_norm.py",
        "--writer",
        "none",
        cwd=root,
    )
    assert proc.returncode == 2, proc.stderr
    assert "test_registry_has_both_ops" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_module_that_cannot_be_imported(tmp_path):
    root = copy_lib(tmp_path)
    module = root / "src" / "kernel_lib" / "ops" / "rms_norm.py"
    module.write_text("import no_such_dependency\n" + module.read_text())
    proc = run_cli(
        "run",
        "src/kernel_lib/ops/rms_norm.py",
        "--tests",
        "tests/test_rms_norm.py",
        "--writer",
        "none",
        cwd=root,
    )
    assert proc.returncode == 2, proc.stderr
    assert "cannot import kernel_lib.ops.rms_norm" in proc.stderr
    assert "no_such_dependency" in proc.stderr


@pytest.mark.slow
def test_the_baseline_reports_each_case_as_it_finishes(tmp_path, sandbox):
    """A project's suite can take minutes: its cases stream from the sandbox while the
    original runs, before the baseline is done, and add up to what it ran."""
    from mutant_gate.engine import events
    from mutant_gate.engine.pipeline import Run
    from mutant_gate.engine.settings import RunSettings, WriterSettings

    root = copy_lib(tmp_path)
    settings = RunSettings(
        kernel_path=str(root / "src/kernel_lib/ops/rms_norm.py"),
        tests=(str(root / "tests/test_rms_norm.py"),),
        operators="mask-drop",
        use_cache=False,
        writers=WriterSettings(writer="none"),
    )
    seen = []
    for event in Run(settings, sandbox, None).events():
        seen.append(event)
        if isinstance(event, events.BaselineFinished):
            break
    progress = [e for e in seen if isinstance(e, events.BaselineProgress)]
    finished = next(e for e in seen if isinstance(e, events.BaselineFinished))
    collected = [e for e in progress if not e.case]
    cases = [e for e in progress if e.case]
    assert collected and collected[0].total == len(cases) > 1, progress
    assert [e.done for e in cases] == list(range(1, len(cases) + 1))
    assert {e.status for e in cases} == {"passed"}
    assert all("test_rms_norm.py::" in e.case for e in cases)
    assert seen.index(cases[-1]) < seen.index(finished)
    ran = {o.name.split("::", 1)[1] for o in finished.result.outcomes if "::" in o.name}
    assert {e.case.split("::", 1)[1] for e in cases} == ran
