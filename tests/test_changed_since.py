"""``--changed-since REF`` on a temporary git repository: only touched jit functions."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mutant_gate.engine import pipeline
from mutant_gate.engine.changes import changed_functions
from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.settings import RunSettings

from .conftest import run_cli

KERNEL = Path(__file__).parent / "data" / "two_kernels.py"
FUNCTIONS = ["add_kernel", "scale_kernel"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    shutil.copy(KERNEL, tmp_path / "k.py")
    git(tmp_path, "add", "k.py")
    git(tmp_path, "commit", "-qm", "kernels")
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))


def changed(path: Path, ref: str = "HEAD") -> list[str]:
    return changed_functions(str(path), path.read_text(), FUNCTIONS, ref)


def load(path: Path, ref: str | None):
    _, mutants, _, changed = pipeline.load(RunSettings(str(path), changed_since=ref))
    return mutants, changed


def test_only_the_changed_function_is_mutated(repo):
    every, _ = load(repo / "k.py", None)
    assert {m.function for m in every} == set(FUNCTIONS)
    assert load(repo / "k.py", "HEAD")[0] == []  # nothing changed yet
    edit(repo / "k.py", "* factor, mask=mask)", "* factor, mask=mask)  # scaled")
    mutants, note = load(repo / "k.py", "HEAD")
    assert mutants and {m.function for m in mutants} == {"scale_kernel"}
    every, _ = load(repo / "k.py", None)  # the same mutants a full run of the edited file has
    assert [m.id for m in mutants] == [m.id for m in every if m.function == "scale_kernel"]
    assert note == {"ref": "HEAD", "functions": ["scale_kernel"], "unchanged": ["add_kernel"]}


def test_staged_changes_count_and_older_refs_work(repo):
    edit(
        repo / "k.py",
        "    x = tl.load(x_ptr + offs, mask=mask)\n",
        "    x = tl.load(x_ptr + offs, mask=mask)  # a\n",
    )
    git(repo, "commit", "-qam", "touch add_kernel")
    assert changed(repo / "k.py") == []
    assert changed(repo / "k.py", "HEAD~1") == ["add_kernel"]
    edit(repo / "k.py", "* factor, mask=mask)", "* factor, mask=mask)  # b")
    git(repo, "add", "k.py")  # staged, not committed
    assert changed(repo / "k.py") == ["scale_kernel"]
    assert changed(repo / "k.py", "HEAD~1") == FUNCTIONS


def test_decorator_and_deleted_lines_belong_to_the_function(repo):
    edit(
        repo / "k.py",
        "@triton.jit\ndef scale_kernel",
        "@triton.jit(do_not_specialize=['n'])\ndef scale_kernel",
    )
    assert changed(repo / "k.py") == ["scale_kernel"]
    git(repo, "checkout", "-q", "k.py")
    edit(repo / "k.py", "    y = tl.load(y_ptr + offs, mask=mask)\n", "")
    assert changed(repo / "k.py") == ["add_kernel"]


def test_a_file_new_to_git_is_all_changed(repo):
    shutil.copy(KERNEL, repo / "new.py")
    assert changed(repo / "new.py") == FUNCTIONS


def test_not_a_repository_and_unknown_ref_are_clear_errors(repo, tmp_path_factory):
    with pytest.raises(BadInput, match=r"unknown git ref 'no-such-branch'"):
        changed(repo / "k.py", "no-such-branch")
    with pytest.raises(BadInput, match="not a git ref"):
        changed(repo / "k.py", "--output=x")
    outside = tmp_path_factory.mktemp("plain")
    shutil.copy(KERNEL, outside / "k.py")
    with pytest.raises(BadInput, match="is not in a git repository"):
        changed(outside / "k.py")
    proc = run_cli("run", "k.py", "--changed-since", "HEAD", cwd=outside)
    assert proc.returncode == 2
    assert "is not in a git repository" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("run", "k.py", "--changed-since", "v9", cwd=repo)
    assert proc.returncode == 2 and "unknown git ref 'v9'" in proc.stderr


@pytest.mark.slow
def test_run_changed_since_end_to_end(repo):
    edit(
        repo / "k.py",
        "    x = tl.load(x_ptr + offs, mask=mask)\n",
        "    x = tl.load(x_ptr + offs, mask=mask)  # a\n",
    )
    proc = run_cli(
        "run", "k.py", "--changed-since", "HEAD", "--operators", "masks", "--writer", "none",
        "-q", "--json", "r.json", "--fail-under", "90", cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # add_kernel's dropped masks survive
    report = json.loads((repo / "r.json").read_text())
    assert {m["function"] for m in report["mutants"]} == {"add_kernel"}
    assert report["changed_since"]["functions"] == ["add_kernel"]
    assert report["settings"]["changed_since"] == "HEAD"
    assert "not mutated (unchanged): scale_kernel" in proc.stdout
    # nothing changed: nothing to score, and the gate does not fail for it
    git(repo, "commit", "-qam", "done")
    proc = run_cli(
        "run", "k.py", "--changed-since", "HEAD", "--writer", "none", "-q", "--fail-under",
        "90", cwd=repo,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 mutants" in proc.stdout and "not applied" in proc.stdout
