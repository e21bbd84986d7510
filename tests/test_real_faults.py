"""``benchmarks/real_faults.py`` (issue 49, part 1) on a catalog made here: a git mirror
with three fixed bugs, one the tool's operators write back exactly, one whose fix adds a
statement, one no operator reproduces; and two bugs that cannot be judged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "real_faults.py"
HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"

# (file, buggy text, fixed text): the buggy mask differs in formatting and comments too,
# which must not count as a change
BOUNDS = (
    "bounds.py",
    HEAD + "def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    '    """Copies a block."""\n'
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    mask = (offs<=n)  # the bound\n"
    "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)\n",
    HEAD + "def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    mask = offs < n\n"
    "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)\n",
)
BARRIER = (
    "barrier.py",
    HEAD + "def twice_kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.arange(0, BLOCK)\n"
    "    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)\n"
    "    y = tl.load(x_ptr + offs)\n"
    "    tl.store(x_ptr + BLOCK + offs, y)\n",
    HEAD + "def twice_kernel(x_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.arange(0, BLOCK)\n"
    "    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2)\n"
    "    tl.debug_barrier()\n"
    "    y = tl.load(x_ptr + offs)\n"
    "    tl.store(x_ptr + BLOCK + offs, y)\n",
)
ROOTS = (
    "roots.py",
    HEAD + "def root_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
    "    offs = tl.arange(0, BLOCK)\n"
    "    x = tl.load(x_ptr + offs)\n"
    "    y = tl.rsqrt(x)\n"
    "    tl.store(out_ptr + offs, y)\n",
    HEAD + "def root_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):\n"
    "    offs = tl.arange(0, BLOCK)\n"
    "    x = tl.load(x_ptr + offs)\n"
    "    y = tl.sqrt(x)\n"
    "    tl.store(out_ptr + offs, y)\n",
)


def _git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def _commit(work: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (work / name).write_text(text)
    _git(work, "add", *files)
    _git(work, "commit", "-q", "-m", message)
    return _git(work, "rev-parse", "HEAD")


def _mirror(tmp_path: Path) -> tuple[Path, list[str]]:
    """A bare mirror as ``fetch`` leaves it (``acme+kernels/repo``): all three bugs in,
    then one fix per commit. Returns the mirrors' folder and the commits, oldest first."""
    work = tmp_path / "work"
    work.mkdir()
    _git(work, "init", "-q")
    commits = [_commit(work, {f: buggy for f, buggy, _ in (BOUNDS, BARRIER, ROOTS)}, "bugs")]
    for name, _, fixed in (BOUNDS, BARRIER, ROOTS):
        commits.append(_commit(work, {name: fixed}, f"fix {name}"))
    mirrors = tmp_path / "mirrors"
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(mirrors / "acme+kernels" / "repo"))
    return mirrors, commits


def _bug(name: str, family: str, kernel: str, file: str, parent: str, fix: str) -> dict:
    return {"id": name, "repo": "acme/kernels", "family": family, "files": [file],
            "kernels": [kernel], "parent_commit": parent, "fix_commit": fix}  # fmt: skip


@pytest.fixture(scope="module")
def summary(tmp_path_factory) -> dict[str, dict]:
    tmp_path = tmp_path_factory.mktemp("real_faults")
    mirrors, c = _mirror(tmp_path)
    catalog = [
        _bug("bounds", "predicate", "copy_kernel", "bounds.py", c[0], c[1]),
        _bug("barrier", "race", "twice_kernel", "barrier.py", c[1], c[2]),
        _bug("roots", "precision", "root_kernel", "roots.py", c[2], c[3]),
        {**_bug("absent", "masks", "k", "k.py", c[0], c[1]), "repo": "nobody/absent"},
        _bug("lost", "masks", "copy_kernel", "bounds.py", c[0], "f" * 40),
    ]
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--catalog", str(tmp_path / "catalog.json"),
         "--mirrors", str(mirrors), "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "| bounds | predicate | exact (1/1 changes) | compare-lt-le |" in proc.stdout
    assert (out / "summary.md").read_text().count("\n| ") == 6  # the header and five bugs
    rows = json.loads((out / "summary.json").read_text())
    assert [row["id"] for row in rows] == [bug["id"] for bug in catalog]
    return {row["id"]: row for row in rows}


def test_a_mutant_that_writes_the_buggy_comparison_back_is_exact(summary):
    row = summary["bounds"]
    assert row["textual"] == "exact"
    assert row["operators"] == ["compare-lt-le"]
    assert row["changed"] == [
        {"kernel": "copy_kernel", "kind": "replaced", "fixed": ["mask = offs < n"],
         "buggy": ["mask = offs <= n"], "reproduced": True}
    ]  # fmt: skip
    assert {(m["kernel"], m["line"], m["change"]) for m in row["mutants"]} == {
        ("copy_kernel", 8, 0)
    }
    assert row["compared"] > len(row["mutants"])  # the kernel's other mutants were compared too
    assert row["rewrite"] == []


def test_a_fix_that_adds_a_statement_is_structural(summary):
    row = summary["barrier"]
    assert row["textual"] == "structural"
    assert row["operators"] == [] and row["mutants"] == []
    assert row["changed"] == [
        {"kernel": "twice_kernel", "kind": "structural", "fixed": ["tl.debug_barrier()"],
         "buggy": [], "reproduced": False}
    ]  # fmt: skip
    assert row["rewrite"] == ["drop `tl.debug_barrier()`"]


def test_a_replacement_no_operator_makes_is_no_with_its_rewrite(summary):
    row = summary["roots"]
    assert row["textual"] == "no"
    assert row["operators"] == []
    assert row["rewrite"] == ["`y = tl.sqrt(x)` -> `y = tl.rsqrt(x)`"]


def test_a_missing_mirror_or_commit_is_a_row_with_its_reason(summary):
    assert summary["absent"]["textual"] == "not-run"
    assert "no mirror of nobody/absent" in summary["absent"]["reason"]
    assert summary["lost"]["textual"] == "not-run"
    assert "fix_commit " + "f" * 40 + " is not in the mirror" in summary["lost"]["reason"]
