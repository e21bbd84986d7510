"""Real bugs as the yardstick, part 2: execution coupling (issue 49).

For a catalog bug whose fix also changed tests: in a scratch tree of the library at the
fix commit, with the parent commit's versions of the test files the fix changed put back
(the files the fix added taken out),

1. sanity, with pytest alone, restricted to those test files (``-k``: the tests the fix
   touched, where it touched any): do the parent's tests pass the buggy kernels (the
   kernel files at the parent: the bug could ship), do the fix's tests fail them, and do
   the fix's tests pass the fixed kernels (else a failure says nothing about the bug);
2. ``mutant-gate run`` judges the fixed kernels with the parent's tests, mutating only the
   jit functions the fix changed (``--changed-since PARENT``);
3. the fix's test files put back, ``mutant-gate rerun RUN --survivors --tests ...``: which
   survivors the fix's tests kill;
4. the survivors on the fix's changed statements, and which of them the fix's tests kill:
   each such mutant is one the tool would have shown the maintainer before the bug shipped
   (an execution-coupled mutant).

``benchmarks/real_faults.py --execution [--bugs ID,...]`` runs it after the textual part
and writes ``execution`` into each bug's entry of ``summary.json``. On a machine without
CUDA the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``); there the sanity
runs load this module as a pytest plugin (``-p real_faults_execution``), which installs
the tool's own interpreter shims (the batched executor; GPU queries answered on the CPU,
libdevice in numpy, bfloat16 rounding) and nothing else: no bounds check, no poison. On
a GPU pytest runs as it is.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from real_faults import git

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN = "real_faults_execution"
SHIMS_ENV = "REAL_FAULTS_SHIMS"
#: directories whose files count as tests (the rest of a fix's files are code)
TEST_DIRS = {"test", "tests", "testing"}
#: the interpreter's settings for a bug where the whole parent test file is too slow for
#: this CPU: ``-k`` for the parent's tests (the fix's touched tests are added to it)
CPU_PARENT_K = {"L-ce-dxy-lowprec-rmw": "test_correctness_functional"}


# -- the pytest plugin (loaded with -p in the sanity runs) ---------------------------------


def pytest_configure(config) -> None:  # noqa: ARG001 - pytest's hook signature
    """In the interpreter, the tool's shims, as a sandbox job has them (no bounds check)."""
    if os.environ.get("TRITON_INTERPRET") == "1" and os.environ.get(SHIMS_ENV) == "1":
        from mutant_gate.engine.harness import batched, shims

        batched.install()
        shims.install()


# -- what the fix changed ------------------------------------------------------------------


def is_test_path(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return bool(TEST_DIRS & set(parts[:-1])) or name.startswith("test_") or name == "conftest.py"


def is_test_module(path: str) -> bool:
    """A file pytest collects by default (``test_*.py`` or ``*_test.py``)."""
    name = os.path.basename(path)
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def changed_files(directory: str, parent: str, fix: str) -> list[tuple[str, str]]:
    """(status letter, path) of every file the fix changed (renames as delete + add)."""
    out = git(directory, "diff", "--no-renames", "--name-status", parent, fix) or ""
    return [tuple(line.split("\t", 1)) for line in out.splitlines() if "\t" in line]


def hunks(directory: str, parent: str, fix: str, path: str) -> list[tuple[int, int, int, int]]:
    """The fix's hunks of one file: (old start, old count, new start, new count)."""
    out = git(directory, "diff", "-U0", "--no-renames", parent, fix, "--", path) or ""
    found = re.findall(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", out, re.M)
    return [(int(a), int(b or 1), int(c), int(d or 1)) for a, b, c, d in found]


def changed_lines(
    spans: Sequence[tuple[int, int, int, int]], new: bool, gap: bool = False
) -> set[int]:
    """The lines a side of the hunks changed; with ``gap``, a hunk that has no line on this
    side (code the other side added) marks the lines either side of where it was."""
    lines: set[int] = set()
    for old_start, old_count, new_start, new_count in spans:
        start, count = (new_start, new_count) if new else (old_start, old_count)
        if count:
            lines |= set(range(start, start + count))
        elif gap:
            lines |= {start, start + 1}
    return lines


def touched_tests(source: str, lines: set[int]) -> list[str]:
    """The names of the test functions (decorators included) that hold a changed line."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            if lines & set(range(first, (node.end_lineno or node.lineno) + 1)):
                names.append(node.name)
    return sorted(set(names))


def statement_lines(source: str, lines: set[int]) -> set[int]:
    """``lines`` grown to whole statements: every line of a simple statement that holds a
    changed line, the header lines of a compound one (so a mutant whose line is a
    statement's first counts when a later line of it changed)."""
    grown = set(lines)
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt):
            continue
        body = getattr(node, "body", None)
        if isinstance(body, list) and body:
            span = set(range(node.lineno, body[0].lineno))
        else:
            span = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if span & lines:
            grown |= span
    return grown


# -- the scratch tree ----------------------------------------------------------------------


def run_git(tree: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", tree, *args], capture_output=True, text=True, check=False)


def make_tree(directory: str, fix: str, dest: str) -> list[str]:
    """A clone of the mirror checked out at the fix (a git repository, so that
    ``--changed-since`` works); the notes say what the checkout could not write."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
    proc = subprocess.run(
        ["git", "clone", "-q", "--shared", "--no-checkout", directory, dest],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode:
        raise RuntimeError(f"git clone failed: {_last_line(proc.stderr)}")
    proc = run_git(dest, "-c", "advice.detachedHead=false", "checkout", "-q", fix)
    head = run_git(dest, "rev-parse", "HEAD").stdout.strip()
    if head != fix:
        raise RuntimeError(f"git checkout {fix} failed: {_last_line(proc.stderr)}")
    notes = []
    missing = run_git(dest, "ls-files", "--deleted").stdout.split()
    if missing:  # blobs the mirror lacks (a fetch leaves its largest files out)
        notes.append(f"absent from the mirror, left out of the tree: {', '.join(missing)}")
    return notes


def put(tree: str, directory: str, commit: str, paths: Sequence[str]) -> None:
    """The files as they are at ``commit``; a file the commit lacks is removed."""
    for path in paths:
        text = git(directory, "show", f"{commit}:{path}")
        target = os.path.join(tree, path)
        if text is None:
            if os.path.exists(target):
                os.remove(target)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as fh:
            fh.write(text)


def strip_coverage(tree: str) -> list[str]:
    """Without pytest-cov, take ``--cov*`` options out of the tree's pytest configuration
    (pytest refuses unknown options, and the tool passes none of its own)."""
    if importlib.util.find_spec("pytest_cov") is not None:
        return []
    notes = []
    for name in ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini"):
        path = os.path.join(tree, name)
        if not os.path.isfile(path):
            continue
        with open(path) as fh:
            text = fh.read()
        stripped = re.sub(r'^\s*"--cov[^"\n]*",?[ \t]*\n', "", text, flags=re.M)
        stripped = re.sub(r"(?<=[\s\"'])--cov[^\s\"']*", "", stripped)
        if stripped != text:
            with open(path, "w") as fh:
                fh.write(stripped)
            notes.append(f"{name}: --cov options taken out of addopts (no pytest-cov here)")
    return notes


# -- commands ------------------------------------------------------------------------------


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def error_line(text: str) -> str:
    """The line that says what went wrong: the exception pytest's ``E`` lines (or a
    traceback) name last, else the last ``E`` line, else the last line."""
    lines = [line.strip() for line in (text or "").splitlines()]
    said = [line[1:].strip() for line in lines if line.startswith("E ")]
    raised = [line for line in said or lines if _RAISED.match(line)]
    return ((raised or said)[-1] if raised or said else _last_line(text))[:300]


_RAISED = re.compile(r"^[\w.]*(Error|Exception|Interrupted)\b")


def command(argv: Sequence[str], cwd: str, env: dict, limit: float) -> tuple[int, str, float]:
    """Run one command in its own process group, stopped at ``limit`` seconds: (exit
    status, stdout and stderr together, seconds); 124 when stopped."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=limit)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = 124
    return code, out or "", round(time.monotonic() - start, 1)


def environment(mode: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH")) if p)
    if mode == "interpret":
        env["TRITON_INTERPRET"] = "1"
        env[SHIMS_ENV] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


def run_pytest(
    tree: str, files: Sequence[str], k: str | None, mode: str, case_time: float, limit: float
) -> dict:
    """One pytest run: counts by outcome, the per-test outcomes, the first failure line."""
    report = os.path.join(tree, ".real-faults-junit.xml")
    if os.path.exists(report):
        os.remove(report)
    argv = [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-o", "log_cli=false",
            "-p", "no:cacheprovider", f"--junitxml={report}"]  # fmt: skip
    if mode == "interpret":
        argv += ["-p", PLUGIN]
    if case_time and importlib.util.find_spec("pytest_timeout") is not None:
        argv += [f"--timeout={case_time:g}"]
    if k:
        argv += ["-k", k]
    code, out, seconds = command([*argv, *files], tree, environment(mode), limit)
    result = {"exit": code, "seconds": seconds, "k": k, "files": list(files)}
    tests = _junit(report) if os.path.exists(report) else {}
    result["outcomes"] = tests
    result["counts"] = {o: sum(1 for v in tests.values() if v[0] == o) for o in _OUTCOMES}
    failed = [(name, why) for name, (o, why) in tests.items() if o in ("failed", "error")]
    if failed:
        result["first_failure"] = f"{failed[0][0]}: {failed[0][1]}"
    elif code not in (0, 5) or not tests:
        result["first_failure"] = error_line(out) if code != 124 else f"stopped at {limit:g} s"
    return result


_OUTCOMES = ("passed", "failed", "error", "skipped", "timeout")


def _junit(path: str) -> dict[str, tuple[str, str]]:
    """test id -> (outcome, its message's first line) from pytest's JUnit XML; a test
    pytest-timeout stopped is ``timeout`` (left out, as the tool's --case-time leaves it)."""
    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
        outcome, why = "passed", ""
        for tag in ("failure", "error", "skipped"):
            element = case.find(tag)
            if element is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
                why = _message(element)
                break
        if outcome == "failed" and "Timeout (>" in why:
            outcome = "timeout"
        outcomes[name] = (outcome, why)
    return outcomes


def _message(element: ET.Element) -> str:
    """A failure's line: its message, or for a bare one (``collection failure``) the
    exception its text names."""
    message = (element.get("message") or "").strip().splitlines()
    if not message or message[0] in ("collection failure", "failed on setup"):
        return error_line(element.text or "")
    return message[0][:300]


def _k(names: Sequence[str]) -> str | None:
    return " or ".join(sorted(set(names))) or None


# -- one bug -------------------------------------------------------------------------------


class Skip(Exception):
    """A bug this machine cannot run: its row says why, with the error line."""


def plan(bug: dict, directory: str) -> dict:
    """What the bug's fix changed: kernel files, test files (changed, added, deleted),
    the tests it touched on each side, the fixed kernels' changed lines."""
    fix, parent = bug["fix_commit"], bug["parent_commit"]
    changed = changed_files(directory, parent, fix)
    tests = [(s, p) for s, p in changed if is_test_path(p) and p not in bug["files"]]
    if not tests:
        raise Skip("the fix changed no test file")
    touched_parent, touched_fix = [], []
    for _, path in tests:
        if not is_test_module(path):
            continue
        spans = hunks(directory, parent, fix, path)
        touched_parent += touched_tests(
            git(directory, "show", f"{parent}:{path}") or "", changed_lines(spans, new=False)
        )
        touched_fix += touched_tests(
            git(directory, "show", f"{fix}:{path}") or "", changed_lines(spans, new=True)
        )
    kernel_lines = {}
    for path in bug["files"]:
        source = git(directory, "show", f"{fix}:{path}") or ""
        lines = changed_lines(hunks(directory, parent, fix, path), new=True, gap=True)
        kernel_lines[path] = sorted(statement_lines(source, lines))
    return {
        "test_files": [p for _, p in tests],
        "added": [p for s, p in tests if s == "A"],
        "deleted": [p for s, p in tests if s == "D"],
        "touched_parent": sorted(set(touched_parent)),
        "touched_fix": sorted(set(touched_fix)),
        "kernel_lines": kernel_lines,
    }


def execute(bug: dict, directory: str, textual: dict, options) -> dict:
    """One bug's ``execution`` entry."""
    started = time.monotonic()
    entry: dict = {"mode": options.mode}
    try:
        entry.update(_execute(bug, directory, textual, options, entry))
        entry["status"] = "ran"
    except Skip as exc:
        entry.update(status="not-run", reason=str(exc))
    except RuntimeError as exc:
        entry.update(status="not-run", reason=f"the scratch tree: {exc}")
    entry["seconds"] = round(time.monotonic() - started, 1)
    return entry


def _execute(bug: dict, directory: str, textual: dict, options, entry: dict) -> dict:
    fix, parent = bug["fix_commit"], bug["parent_commit"]
    the = plan(bug, directory)
    entry["plan"] = the
    tree = os.path.join(options.work, bug["id"])
    entry["setup"] = make_tree(directory, fix, tree) + strip_coverage(tree)
    modules = [p for p in the["test_files"] if is_test_module(p)]
    parent_modules = [p for p in modules if p not in the["added"]]
    fix_modules = [p for p in modules if p not in the["deleted"]]
    parent_k = CPU_PARENT_K.get(bug["id"]) if options.mode == "interpret" else None
    k_parent = _k([*([parent_k] if parent_k else []), *the["touched_parent"]])
    k_fix = _k(the["touched_fix"])
    k_run = _k([*([parent_k] if parent_k else []), *the["touched_parent"], *the["touched_fix"]])
    run_k = k_run if (parent_k or the["touched_parent"]) else None

    def sanity(files: list[str], k: str | None) -> dict:
        return run_pytest(tree, files, k, options.mode, options.case_time, options.limit)

    # the fix's tests on the fixed kernels first: a tree that cannot import stops here
    fixed = sanity(fix_modules, k_fix)
    if not any(o == "passed" for o, _ in fixed["outcomes"].values()):
        why = fixed.get("first_failure") or "no test passed"
        skipped = [w for o, w in fixed["outcomes"].values() if o == "skipped"]
        if skipped and not fixed["counts"]["failed"] and not fixed["counts"]["error"]:
            why = f"every test skipped: {skipped[0]}"
        raise Skip(f"the fix's tests do not pass the fixed kernels here: {why}")
    put(tree, directory, parent, bug["files"])
    fix_on_buggy = sanity(fix_modules, k_fix)
    put(tree, directory, parent, the["test_files"])
    parent_on_buggy = sanity(parent_modules, k_parent)
    put(tree, directory, fix, bug["files"])  # the fixed kernels, the parent's tests
    revealing = sorted(
        name
        for name, (outcome, _) in fix_on_buggy["outcomes"].items()
        if outcome in ("failed", "error") and fixed["outcomes"].get(name, ("",))[0] == "passed"
    )
    result = {
        "sanity": {
            "fix_tests_on_fixed": _brief(fixed),
            "fix_tests_on_buggy": _brief(fix_on_buggy),
            "parent_tests_on_buggy": _brief(parent_on_buggy),
            "could_ship": parent_on_buggy["counts"]["passed"] > 0
            and not parent_on_buggy["counts"]["failed"]
            and not parent_on_buggy["counts"]["error"],
            "fix_tests_fail_buggy": bool(revealing),
            "revealing": revealing,
        }
    }
    if not parent_modules:
        raise Skip("the fix added every test file it changed: the parent had none to judge with")
    judged = judge(bug, directory, tree, parent_modules, fix_modules, run_k, the, options)
    result.update(judged)
    result.update(couple(judged, the, textual, bug))
    return result


def _brief(result: dict) -> dict:
    keep = ("counts", "first_failure", "k", "files", "seconds", "exit")
    return {key: result[key] for key in keep if key in result}


def _tool(*args: str) -> list[str]:
    return [sys.executable, "-m", "mutant_gate.cli", *args]


def judge(bug, directory, tree, parent_modules, fix_modules, k, the, options) -> dict:
    """``mutant-gate run`` with the parent's tests, then ``rerun --survivors`` with the
    fix's: the run's verdicts and which survivors the fix's tests kill."""
    out = os.path.join(options.work, f"{bug['id']}.run.json")
    cache = os.path.join(options.work, "cache")
    argv = _tool("run", *bug["files"])
    for path in parent_modules:
        argv += ["--tests", path]
    argv += ["--project-root", ".", "--changed-since", bug["parent_commit"], "--writer", "none",
             "--no-write-tests", "--json", out, "--cache-dir", cache, "-j", str(options.jobs),
             "--case-time", f"{options.case_time:g}", "--mode", options.mode, "-q"]  # fmt: skip
    if not options.checks:
        argv += ["--no-diff-oracle", "--no-tolerance"]
    if k:
        argv += ["-k", k]
    env = environment(options.mode)
    env.pop(SHIMS_ENV, None)
    if os.path.exists(out):
        os.remove(out)
    code, text, seconds = command(argv, tree, env, options.run_limit)
    if not os.path.isfile(out):
        raise Skip(f"mutant-gate run wrote no report (exit {code}): {error_line(text)}")
    with open(out) as fh:
        report = json.load(fh)
    mutants = report.get("mutants", [])
    result = {
        "run": {
            "command": "mutant-gate " + " ".join(argv[3:]),
            "exit": code,
            "seconds": seconds,
            "run_ids": run_ids(report),
            "mutants": len(mutants),
            "verdicts": _count(m["verdict"] for m in mutants),
            "left_out_cases": len(report.get("left_out_cases") or []),
        }
    }
    put(tree, directory, bug["fix_commit"], the["test_files"])
    after: dict = {}
    seconds = 0.0
    if any(m["verdict"] == "survived" for m in mutants):
        for run_id in result["run"]["run_ids"]:
            found, took = rerun(run_id, fix_modules, tree, env, options)
            after.update(found)
            seconds += took
    result["rerun"] = {"seconds": round(seconds, 1), "judged": len(after)}
    kernel = (report.get("kernel") or {}).get("path", "")
    result["survivors"] = [
        {**_mutant(m, bug["files"], kernel), "after_fix_tests": after.get(m["id"])}
        for m in mutants
        if m["verdict"] == "survived"
    ]
    return result


def run_ids(report: dict) -> list[str]:
    """The run a file run is, or each judged module's run of a library run."""
    if "library" in report:
        return [f["run_id"] for f in report.get("files", []) if f.get("run_id")]
    return [report["run_id"]]


def rerun(run_id: str, fix_modules, tree: str, env: dict, options) -> tuple[dict, float]:
    """The rerun's verdict for each survivor of one run, and its seconds."""
    out = os.path.join(options.work, f"{run_id}.rerun.json")
    argv = _tool("rerun", run_id, "--survivors", "-j", str(options.jobs), "--no-write-tests",
                 "--json", out, "--cache-dir", os.path.join(options.work, "cache"), "-q")  # fmt: skip
    for path in fix_modules:
        argv += ["--tests", path]
    code, text, seconds = command(argv, tree, env, options.run_limit)
    if not os.path.isfile(out):
        raise Skip(f"mutant-gate rerun wrote no report (exit {code}): {error_line(text)}")
    with open(out) as fh:
        report = json.load(fh)
    now = {m["id"]: {"now": m["now"], "by": m.get("by")} for m in report["rerun"]["mutants"]}
    return now, seconds


def _mutant(m: dict, files: Sequence[str], kernel: str) -> dict:
    """A survivor's row, its file said as the catalog names it."""
    keep = ("id", "operator", "family", "function", "line", "before", "after")
    where = os.path.normpath(m.get("file") or kernel)
    file = next((f for f in files if where.endswith(os.path.normpath(f))), where)
    return {"file": file, **{key: m.get(key) for key in keep}}


def _count(values) -> dict:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items()))


def couple(judged: dict, the: dict, textual: dict, bug: dict) -> dict:
    """The survivors on the fix's changed statements, which of them the fix's tests kill,
    and the outcome word."""
    lines = the["kernel_lines"]
    reproducing = {(m["operator"], m["file"], m["line"]) for m in textual.get("mutants", [])}
    ids = {m["id"] for m in textual.get("mutants", [])}
    on_lines = []
    for survivor in judged["survivors"]:
        if survivor["line"] in lines.get(survivor["file"], ()):
            after = survivor.get("after_fix_tests") or {}
            on_lines.append(
                {
                    **{k: survivor[k] for k in ("id", "operator", "file", "function", "line")},
                    "killed_by_fix_tests": after.get("now") == "killed",
                    "by": after.get("by"),
                    "textual": survivor["id"] in ids
                    or (survivor["operator"], survivor["file"], survivor["line"]) in reproducing,
                }
            )
    flagged = [m for m in on_lines if m["killed_by_fix_tests"]]
    if flagged:
        outcome = "coupled"
    elif on_lines:
        outcome = "not coupled"
    else:
        outcome = "no survivor on the fix's lines"
    return {
        "survivors_on_fix_lines": on_lines,
        "would_have_flagged": [m["id"] for m in flagged],
        "killed_by_fix_tests_elsewhere": sum(
            1
            for s in judged["survivors"]
            if (s.get("after_fix_tests") or {}).get("now") == "killed"
            and s["id"] not in {m["id"] for m in on_lines}
        ),
        "coupling": outcome,
    }


# -- the report ----------------------------------------------------------------------------


LEGEND = (
    "Part 2: the fixed kernels judged by the parent's tests (`mutant-gate run --changed-since "
    "PARENT`), then the survivors by the fix's tests (`rerun --survivors --tests`). "
    "`execution coupling`: `coupled` where a survivor of the parent's tests on the fix's "
    "changed statements is killed by the fix's tests (a mutant that would have flagged the "
    "gap before the bug shipped); `not coupled` where survivors sit there but the fix's tests "
    "kill none; `no survivor on the fix's lines`. `ships`: the parent's tests pass the buggy "
    "kernels; `reveals`: the fix's tests fail them (and pass the fixed ones). Both are asked "
    "of the run here; a `no` is said with its reason. Details: `summary.json`, `execution`."
)


def table(rows: Sequence[dict]) -> str:
    lines = [
        "| bug | family | textual coupling | execution coupling | ships / reveals "
        "| would have flagged it | its operator |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ex = row.get("execution")
        if not ex:
            continue
        if ex["status"] != "ran":
            cells = [row["id"], row["family"], row["textual"], f"not run ({ex['mode']}): "
                     f"{ex['reason']}", "-", "-", "-"]  # fmt: skip
        else:
            sanity = ex["sanity"]
            flagged = [m for m in ex["survivors_on_fix_lines"] if m["killed_by_fix_tests"]]
            on = len(ex["survivors_on_fix_lines"])
            coupling = f"{ex['coupling']} ({len(flagged)}/{on} survivors on the fix's lines)"
            if ex["mode"] == "interpret" and row["id"] in CPU_PARENT_K:
                coupling += f"; the parent's tests only `-k {CPU_PARENT_K[row['id']]}`"
            if not sanity["fix_tests_fail_buggy"]:
                coupling += "; the fix's tests do not fail the buggy kernels here"
            shown = "; ".join(f"`{m['id']}` line {m['line']}" for m in flagged[:3]) or "-"
            operators = ", ".join(sorted({m["operator"] for m in flagged})) or "-"
            cells = [row["id"], row["family"], row["textual"], coupling,
                     f"{_yes(sanity['could_ship'])} / {_yes(sanity['fix_tests_fail_buggy'])}",
                     shown, operators]  # fmt: skip
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def _yes(value: bool) -> str:
    return "yes" if value else "no"
