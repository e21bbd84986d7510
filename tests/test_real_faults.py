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


# -- part 2: execution coupling ----------------------------------------------------------

OPS = (
    "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
    "def threshold_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    mask = offs < n\n"
    "    x = tl.load(x_ptr + offs, mask=mask)\n"
    "    y = tl.where(x {op} 0.5, 0.0, x)\n"
    "    tl.store(out_ptr + offs, y, mask=mask)\n\n\n"
    "def threshold(x):\n"
    "    out = torch.empty_like(x)\n"
    "    threshold_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)\n"
    "    return out\n"
)
OLD_TEST = (
    "import torch\nfrom kern.ops import threshold\n\n\n"
    "def test_threshold():\n"
    "    torch.manual_seed(0)\n"
    "    x = torch.rand(100)\n"
    "    torch.testing.assert_close(threshold(x), torch.where(x < 0.5, 0.0, x))\n"
)
NEW_TEST = OLD_TEST + (
    "\n\ndef test_threshold_keeps_the_half():\n"
    "    x = torch.full((70,), 0.5)\n"
    "    torch.testing.assert_close(threshold(x), x)\n"
)
PYPROJECT = '[tool.pytest.ini_options]\npythonpath = ["src"]\naddopts = "--cov=src"\n'


@pytest.mark.slow
def test_execution_finds_the_survivor_the_fix_tests_kill(tmp_path):
    """A bug that shipped (``x <= 0.5`` where ``x < 0.5`` was meant; the old test's random
    inputs never hold 0.5), fixed with a test that does: the parent's tests let the
    ``compare-lt-le`` mutant of the fixed line through, the fix's test kills it. Runs for
    real: pytest and mutant-gate in Triton's interpreter."""
    work = tmp_path / "work"
    (work / "src" / "kern").mkdir(parents=True)
    (work / "tests").mkdir()
    _git(work, "init", "-q")
    files = {"pyproject.toml": PYPROJECT, "src/kern/__init__.py": "",
             "src/kern/ops.py": OPS.format(op="<="), "tests/test_ops.py": OLD_TEST}  # fmt: skip
    parent = _commit(work, files, "threshold")
    fix = _commit(
        work, {"src/kern/ops.py": OPS.format(op="<"), "tests/test_ops.py": NEW_TEST}, "fix"
    )
    mirrors = tmp_path / "mirrors"
    _git(tmp_path, "clone", "-q", "--bare", str(work), str(mirrors / "acme+kernels" / "repo"))
    bug = _bug("half", "predicate", "threshold_kernel", "src/kern/ops.py", parent, fix)
    (tmp_path / "catalog.json").write_text(json.dumps([bug]))
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--catalog", str(tmp_path / "catalog.json"),
         "--mirrors", str(mirrors), "--out", str(out), "--execution",
         "--work", str(tmp_path / "scratch"), "-j", "2", "--case-time", "20",
         "--mode", "interpret"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads((out / "summary.json").read_text())[0]
    assert row["textual"] == "exact" and row["operators"] == ["compare-lt-le"]
    ex = row["execution"]
    assert ex["status"] == "ran", ex
    assert ex["plan"]["touched_parent"] == []  # the fix only added a test
    assert ex["plan"]["touched_fix"] == ["test_threshold_keeps_the_half"]
    assert ex["plan"]["kernel_lines"] == {"src/kern/ops.py": [11]}
    assert any("--cov" in note for note in ex["setup"])  # pytest-cov is not a test extra
    sanity = ex["sanity"]
    assert sanity["could_ship"] and sanity["fix_tests_fail_buggy"]
    assert sanity["parent_tests_on_buggy"]["counts"]["passed"] == 1
    assert sanity["revealing"] == ["tests.test_ops::test_threshold_keeps_the_half"]
    assert "test_threshold_keeps_the_half" in sanity["fix_tests_on_buggy"]["first_failure"]
    assert ex["run"]["exit"] == 0 and ex["run"]["verdicts"].get("survived", 0) >= 1
    flagged = [m for m in ex["survivors_on_fix_lines"] if m["killed_by_fix_tests"]]
    assert [(m["operator"], m["line"], m["textual"]) for m in flagged] == [
        ("compare-lt-le", 11, True)
    ]
    assert flagged[0]["by"] == "test:test_threshold_keeps_the_half"
    assert ex["would_have_flagged"] == [flagged[0]["id"]]
    assert ex["coupling"] == "coupled"
    summary = (out / "summary.md").read_text()
    assert "## Execution coupling" in summary
    assert f"| half | predicate | exact | coupled (1/{len(ex['survivors_on_fix_lines'])}" in summary
    assert f"| yes / yes | `{flagged[0]['id']}` line 11 | compare-lt-le |" in summary
