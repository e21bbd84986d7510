"""Written tests are the user's files: on disk by default, counted right, and run under
plain pytest (no mutant-gate command) green on the original and red on the mutants the
run says they kill, for a tutorial-style file that runs code at import and a project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mutant_gate.engine.mutate import generate_mutants
from mutant_gate.engine.writers.on_disk import MARK, on_disk, prologue
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"


def plain_pytest(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``TRITON_INTERPRET=1 python -m pytest ...``, as the run's line says to run them."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def written_kills(report: dict) -> dict[str, list[str]]:
    """file -> the mutants its tests kill, for the tests mutant-gate wrote."""
    kills: dict[str, list[str]] = {}
    for test in report["tests"]:
        if test["origin"] != "given" and test["kills"]:
            kills.setdefault(test["file"], []).extend(test["kills"])
    return kills


def red_on_mutants(kernel: Path, kills: dict[str, list[str]], folder: Path, cwd: Path) -> int:
    """Each written file against each mutant it kills (the kernel file replaced by the
    mutant's source): pytest must fail. Returns how many pairs ran."""
    original = kernel.read_text()
    by_id = {m.id: m for m in generate_mutants(original, str(kernel))}
    pairs = 0
    try:
        for name, ids in kills.items():
            for mutant_id in ids:
                kernel.write_text(by_id[mutant_id].source)
                out = plain_pytest(str(folder / name), cwd=cwd)
                assert out.returncode == 1, (name, mutant_id, out.stdout[-2000:])
                pairs += 1
    finally:
        kernel.write_text(original)
    return pairs


def test_the_prologue_goes_before_the_kernel_import_and_only_once(tmp_path):
    from mutant_gate.engine.kernel_file import TestFile, load_kernel_file

    kernel_path = tmp_path / "t01.py"
    shutil.copy(DATA / "tutorial_vector_add.py", kernel_path)
    kernel = load_kernel_file(str(kernel_path))
    source = '"""doc"""\n\nimport json\n\nimport torch\n\nfrom t01 import add\n\n\ndef test_x():\n    pass\n'
    name = "test_t01_mg_probe_x.py"
    test = TestFile(str(tmp_path / name), name, source, origin="probe")
    folder = tmp_path / "mutant-gate-tests"
    text = on_disk(test, kernel, str(folder))
    head, tail = text.split(MARK)
    assert "import torch" in head and "from t01 import add" not in head
    assert tail.index("load_kernel(__file__") < tail.index("from t01 import add")
    assert '"../t01.py"' in tail  # the kernel's path from the folder
    written = TestFile(test.path, test.name, text, origin="probe")
    assert on_disk(written, kernel, str(folder)) == text  # a second write adds nothing
    assert "checks=True" in prologue(
        TestFile("t.py", "t.py", source, origin="llm"), kernel, str(folder)
    )


@pytest.mark.slow
def test_tutorial_01s_written_test_runs_under_plain_pytest(tmp_path):
    """Tutorial 01 runs its check (prints only, no assert) and a benchmark at import: its
    written test still collects and passes outside the tool, and fails on the mutants."""
    kernel = tmp_path / "t01.py"
    shutil.copy(DATA / "tutorial_vector_add.py", kernel)
    args = ("run", str(kernel), "--cache-dir", str(tmp_path / "c"), "--json", "r.json")
    out = run_cli(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    folder = tmp_path / "mutant-gate-tests"
    report = json.loads((tmp_path / "r.json").read_text())
    kills = written_kills(report)
    assert kills, report["tests"]
    files = sorted(p.name for p in folder.iterdir())
    assert files == sorted([*kills, *(Path(f).stem + ".json" for f in kills)])
    said = " ".join(out.stdout.split())
    n = len(kills)
    one = n == 1
    assert (
        f"{n} test{'' if one else 's'} ({n} file{'' if one else 's'}, {n} data "
        f"file{'' if one else 's'}) written to mutant-gate-tests/; run {'it' if one else 'them'} "
        "with: TRITON_INTERPRET=1 python -m pytest mutant-gate-tests/"
    ) in said
    green = plain_pytest("mutant-gate-tests/", cwd=tmp_path)
    assert green.returncode == 0, green.stdout + green.stderr
    assert f"{n} passed" in green.stdout
    assert red_on_mutants(kernel, kills, folder, tmp_path) == sum(map(len, kills.values()))


@pytest.mark.slow
def test_a_projects_written_tests_run_from_its_root(tmp_path):
    project = tmp_path / "kernel_lib"
    shutil.copytree(ROOT / "examples" / "kernel_lib", project)
    kernel = project / "src" / "kernel_lib" / "ops" / "softmax.py"
    out = run_cli(
        "run",
        str(kernel.relative_to(project)),
        "--tests",
        "tests/test_layers.py",
        "--cache-dir",
        str(tmp_path / "c"),
        "--json",
        "r.json",
        cwd=project,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads((project / "r.json").read_text())
    kills = written_kills(report)
    assert kills, report["tests"]
    folder = project / "mutant-gate-tests"
    green = plain_pytest("mutant-gate-tests/", cwd=project)
    assert green.returncode == 0, green.stdout + green.stderr
    # the first mutant of each file: enough to see each file red on what it kills
    firsts = {name: ids[:1] for name, ids in kills.items()}
    assert red_on_mutants(kernel, firsts, folder, project) == len(firsts)


@pytest.mark.slow
def test_no_write_tests_writes_none(tmp_path):
    kernel = tmp_path / "t01.py"
    shutil.copy(DATA / "tutorial_vector_add.py", kernel)
    args = ("run", str(kernel), "--cache-dir", str(tmp_path / "c"), "--no-write-tests")
    out = run_cli(*args, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (tmp_path / "mutant-gate-tests").exists()
    assert "written to" not in out.stdout
