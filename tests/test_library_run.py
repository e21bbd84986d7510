"""A kernel library in one run: ``mutant-gate run src/kernel_lib --tests tests``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mutant_gate.engine.library_paths import find_modules, find_tests, has_jit, is_library

from .conftest import EXAMPLES, run_cli
from .test_report_schema import validate

LIB = EXAMPLES / "kernel_lib"
OPS = ("rms_norm", "scale", "softmax")
#: each op module with the test file that judges it when it runs alone
OWN_TESTS = {"rms_norm": "test_rms_norm.py", "scale": "test_scale.py", "softmax": "test_layers.py"}
QUICK = ("--writer", "none", "--no-write-tests", "--mode", "interpret")


def copy_lib(tmp_path: Path) -> Path:
    root = tmp_path / "kernel_lib"
    shutil.copytree(LIB, root, ignore=shutil.ignore_patterns(".mutant-gate", "__pycache__"))
    return root


def test_a_directory_holds_the_modules_with_jit_functions(tmp_path):
    root = copy_lib(tmp_path)
    ops = root / "src" / "kernel_lib" / "ops"
    found = find_modules([str(root / "src")])
    assert [Path(p).name for p in found] == ["rms_norm.py", "scale.py", "softmax.py"]
    assert not has_jit(str(root / "src" / "kernel_lib" / "utils.py"))
    left = find_modules([str(root / "src")], ("softmax.py", "*/ops/scale.py"))
    assert [Path(p).name for p in left] == ["rms_norm.py"]
    # a file named twice, as a file and inside a directory, is judged once
    assert len(find_modules([str(ops / "scale.py"), str(ops)])) == 3


def test_only_tritons_jit_makes_a_kernel_module(tmp_path):
    """Another library's ``@cute.jit`` or ``@numba.jit`` is not a Triton kernel (a real
    library's CuTe DSL files were reported left out, "no @triton.jit function found");
    ``triton.jit`` under an alias or imported by name is."""
    spellings = {
        "cute.py": "import cutlass.cute as cute\n@cute.jit\ndef k(x):\n    pass\n",
        "numba_op.py": "import numba\n@numba.jit(nopython=True)\ndef k(x):\n    return x\n",
        "alias.py": "import triton as tr\n@tr.jit\ndef k(x):\n    pass\n",
        "by_name.py": "from triton import jit\n@jit\ndef k(x):\n    pass\n",
        "stacked.py": "import triton\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x):\n    pass\n",
    }
    for name, text in spellings.items():
        (tmp_path / name).write_text(text)
    found = sorted(Path(p).name for p in find_modules([str(tmp_path)]))
    assert found == ["alias.py", "by_name.py", "stacked.py"]


def test_a_tests_directory_collects_what_pytest_collects(tmp_path):
    root = copy_lib(tmp_path)
    (root / "tests" / "helpers.py").write_text("X = 1\n")
    (root / "tests" / "fused_test.py").write_text("def test_x():\n    pass\n")
    found = [Path(p).name for p in find_tests([str(root / "tests")], str(root))]
    assert found == ["fused_test.py", "test_layers.py", "test_rms_norm.py", "test_scale.py"]
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + 'python_files = ["check_*.py"]\n')
    (root / "tests" / "check_more.py").write_text("def test_y():\n    pass\n")
    assert [Path(p).name for p in find_tests([str(root / "tests")], str(root))] == ["check_more.py"]


def test_one_file_with_test_files_is_not_a_library(tmp_path):
    root = copy_lib(tmp_path)
    module = str(root / "src" / "kernel_lib" / "ops" / "scale.py")
    assert not is_library([module], [str(root / "tests" / "test_scale.py")])
    assert is_library([module], [str(root / "tests")])
    assert is_library([str(root / "src")], [])
    assert is_library([module], [], shard="1/2")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("tests", "--tests", "tests"), "tests: no .py file with a @triton.jit function below it"),
        (("src", "--tests", "src"), "--tests src: collects no test file"),
        (("src/kernel_lib", "--exclude", "*.py"), "less --exclude *.py"),
        (("nowhere",), "kernel file not found: nowhere"),
        (("src", "--tests", "tests", "--html", "no/such/dir/r.html"), "--html"),
    ],
)
def test_bad_library_input_is_one_line(tmp_path, args, said):
    root = copy_lib(tmp_path)
    proc = run_cli("run", *args, *QUICK, cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], proc.stderr


def test_paths_and_exclude_come_from_the_configuration(tmp_path):
    """``paths``, ``tests`` and ``exclude`` in ``[tool.mutant-gate]``: a bare ``run``
    takes them (here, every module excluded: the line names the exclusion)."""
    root = copy_lib(tmp_path)
    pyproject = root / "pyproject.toml"
    table = '\n[tool.mutant-gate]\npaths = ["src"]\ntests = ["tests"]\nexclude = ["*.py"]\n'
    pyproject.write_text(pyproject.read_text() + table)
    proc = run_cli("run", *QUICK, cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{root / 'src'}: no .py file with a @triton.jit function" in proc.stderr
    assert "less --exclude *.py" in proc.stderr
    pyproject.write_text(pyproject.read_text().replace('paths = ["src"]', "paths = 3"))
    proc = run_cli("run", *QUICK, cwd=root)
    assert proc.returncode == 2 and "paths: expected a list of paths" in proc.stderr


def verdicts(report: dict) -> dict[str, str]:
    return {row["id"]: row["verdict"] for row in report["mutants"]}


@pytest.mark.slow
def test_a_library_run_judges_every_module_as_its_own_run_does(tmp_path):
    """One run over the library gives each op module the verdicts its own run gives (with
    its own test file); a module no case launches is not reached, one that cannot load is
    left out with its reason, and the suite's original runs once."""
    root = copy_lib(tmp_path)
    ops = root / "src" / "kernel_lib" / "ops"
    unused = (ops / "scale.py").read_text().replace("scale_kernel", "unused_kernel")
    (ops / "unused.py").write_text(unused)
    (ops / "broken.py").write_text("import triton\n\n@triton.jit\ndef k(x:\n    pass\n")
    alone: dict[str, dict] = {}
    for op in OPS:
        out = tmp_path / f"{op}.json"
        proc = run_cli(
            "run", f"src/kernel_lib/ops/{op}.py", "--tests", f"tests/{OWN_TESTS[op]}",
            *QUICK, "--no-cache", "--json", str(out), cwd=root,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        alone[op] = json.loads(out.read_text())

    proc = run_cli(
        "run", "src/kernel_lib", "--tests", "tests", *QUICK, "--json", "lib.json",
        cwd=root, env={"COLUMNS": "80"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "lib.json").read_text())
    validate(report)
    files = {Path(f["path"]).stem: f for f in report["files"]}
    assert set(files) == {*OPS, "unused", "broken"}
    for op in OPS:
        assert files[op]["status"] == "judged"
        mine = {r["id"]: r["verdict"] for r in report["mutants"] if Path(r["file"]).stem == op}
        assert mine == verdicts(alone[op]), op
        assert files[op]["mutants"] == len(alone[op]["mutants"])
        assert files[op]["killed"] == alone[op]["score"]["killed"]
        assert files[op]["score"] == alone[op]["score"]["adjusted"]
    assert files["unused"]["status"] == "not_reached"
    assert "kernel_lib.ops.unused" in files["unused"]["reason"]
    assert files["broken"]["status"] == "left_out"
    assert "not valid Python" in files["broken"]["reason"]
    for f in report["files"]:
        assert 0 <= f["started_s"] <= f["finished_s"], f
    # the modules overlap: scale's run starts in rms_norm's tail (its survivors' oracle)
    assert files["scale"]["started_s"] < files["rms_norm"]["finished_s"]
    assert report["library"]["originals_run"] == 1  # the suite ran once for every module
    assert report["library"]["originals_shared"] == 3
    judged = [f for f in report["files"] if f["status"] != "left_out"]
    assert report["score"]["total"] == sum(f["mutants"] for f in judged)
    assert report["score"]["killed"] == sum(f["killed"] for f in judged)
    table = proc.stdout.split("kernel modules", 1)[1]
    assert all(len(line) <= 80 for line in table.splitlines()), table
    order = [op for line in table.splitlines() for op in files if f"ops/{op}.py " in line]
    by_survivors = sorted(files, key=lambda op: (-files[op]["survived"], files[op]["path"]))
    assert order == by_survivors
    assert "not reached by the tests" in table and "left out" in table
    assert f"your tests: {report['score']['killed']}/{report['score']['total']} killed" in table

    # Again: every result comes from the cache, and --fail-under gates the library's score.
    proc = run_cli(
        "run", "src/kernel_lib", "--tests", "tests", *QUICK, "--json", "again.json",
        "--fail-under", "99", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    again = json.loads((root / "again.json").read_text())
    assert verdicts(again) == verdicts(report)
    assert all(row["cached"] for row in again["mutants"] if row.get("reached") is not False)
    assert again["sandbox"]["original_s"] == 0.0  # the suite's original: from the cache too
    assert "is under --fail-under 99%" in proc.stdout


@pytest.mark.slow
def test_test_files_that_collect_no_case_are_one_line(tmp_path):
    """The suite's original collects nothing: said once for the library, not per module."""
    root = copy_lib(tmp_path)
    (root / "empty").mkdir()
    (root / "empty" / "test_nothing.py").write_text("X = 1\n")
    proc = run_cli("run", "src/kernel_lib", "--tests", "empty", *QUICK, "--no-cache", cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == ["mutant-gate: error: --tests empty: pytest collects no test case"], lines


@pytest.mark.slow
def test_a_suite_whose_original_fails_is_run_once_and_every_module_says_why(tmp_path):
    """Every module's original is the same job: when it leaves no case to judge a mutant
    (here every case fails in an autouse fixture; a test file that cannot be collected is
    left out, see test_left_out_cases.py), the first module says why and the others are
    left out with the same reason, without running it again."""
    root = copy_lib(tmp_path)
    conftest = root / "tests" / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + "\n\n@pytest.fixture(autouse=True)\ndef _broken():\n"
        + "    raise RuntimeError('test_fails_on_the_original: the suite fails here')\n"
    )
    proc = run_cli("run", "src/kernel_lib", "--tests", "tests", *QUICK, cwd=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    error = proc.stderr.strip()
    assert error.count("\n") == 0 and "every kernel module was left out" in error, error
    assert "test_fails_on_the_original" in error
    left = [ln for ln in proc.stdout.splitlines() if ln.startswith("left out: ")]
    assert len(left) == len(OPS), proc.stdout
    assert "test_fails_on_the_original" in left[0]
    again = "left out: the suite's original, as for an earlier module: "
    assert all(ln.startswith(again) and "test_fails_on_the_original" in ln for ln in left[1:])
    assert proc.stdout.count("original passes") == 0
