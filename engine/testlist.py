"""The report's ``tests``: every check and test of a run, where it came from, what it killed.

One entry per check outcome of the baseline (the own check, ``--tests`` files, tests a
stage-1 writer added before the mutants ran), then one per test function added after
the mutants ran (stage-2 and probe killer tests, verified on their own). Each entry has
``origin`` (own | given | stage1 | stage2 | probe), the ``file`` it lives in, its
``source`` (the test function, or the ``__main__`` block of an own check) and ``kills``:
the mutants whose verdict names it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from .harness.main_guard import is_main_guard
from .job import JobResult
from .kernel_file import EXTRA_TESTS, OWN_CHECK, KernelFile
from .records import Mutant, MutantOutcome, Verdict


def find_test_functions(source: str) -> dict[str, str]:
    """Top-level ``test*`` functions of ``source``: name -> source text (with decorators)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    lines = source.splitlines(keepends=True)
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[node.name] = "".join(lines[start - 1 : node.end_lineno]).rstrip() + "\n"
    return found


def main_block(source: str) -> str | None:
    """The ``if __name__ == "__main__":`` block of ``source``, as written."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if is_main_guard(node):
            return ast.get_source_segment(source, node)
    return None


#: where a test was written (its proof on the original timed it)
WRITTEN = ("stage1", "stage2", "probe")


def _function_of(node: str) -> str:
    return node.split("[", 1)[0]


def _test_index(kernel: KernelFile) -> tuple[dict[str, tuple[str, str, str]], dict[str, dict]]:
    """The test files' functions, function -> (file, origin, source) (the first file's of
    a name), and the written tests' cases on the original (their proofs)."""
    index: dict[str, tuple[str, str, str]] = {}
    cases: dict[str, dict] = {}
    for test in kernel.tests:
        for name, text in find_test_functions(test.source).items():
            index.setdefault(name, (test.name, test.origin, text))
        cases.update(test.cases or {})
    return index, cases


def _test_of(
    name: str, kernel: KernelFile, own_functions: dict[str, str], index: dict
) -> tuple[str | None, str, str | None, str | None]:
    """The check ``name`` the original ran: (its file, origin, source, and the test
    function's name where it is a test file's, else None)."""
    if name == OWN_CHECK:
        return kernel.name, "own", main_block(kernel.source), None
    if name.startswith(OWN_CHECK + "::"):
        function = _function_of(name.split("::", 1)[1])
        return kernel.name, "own", own_functions.get(function), None
    function = _function_of(name.split("::", 1)[-1])
    file, origin, source = index.get(function, (None, "given", None))
    return file, origin, source, function


def report_tests(
    kernel: KernelFile,
    baseline: JobResult,
    mutants: Sequence[Mutant],
    outcomes: dict[str, MutantOutcome],
) -> list[dict]:
    killed = [
        outcomes[m.id]
        for m in mutants
        if m.id in outcomes and outcomes[m.id].verdict is Verdict.KILLED
    ]
    own_functions = find_test_functions(kernel.source)
    index, cases = _test_index(kernel)

    def proved(case: str) -> dict:
        """A written test's time and launches in its proof on the original."""
        found = [info for c, info in cases.items() if c == case or _function_of(c) == case]
        if not found:
            return {}
        launched = [info.get("functions") for info in found]
        return {
            "original_s": round(sum(info["duration_s"] for info in found), 4),
            "launches": None
            if any(f is None for f in launched)
            else sorted(set().union(*map(set, launched))),
        }

    own_nodes = [
        o.name.split("::", 1)[1] for o in baseline.outcomes if o.name.startswith(OWN_CHECK + "::")
    ]

    def own_node_of(outcome: MutantOutcome) -> str | None:
        return next((n for n in own_nodes if outcome.reason.endswith(f"({n})")), None)

    def kills_of(check_name: str) -> list[str]:
        if check_name == OWN_CHECK:
            return [o.mutant_id for o in killed if o.by == OWN_CHECK and own_node_of(o) is None]
        node = check_name.split("::", 1)[1]
        if check_name.startswith(OWN_CHECK + "::"):
            return [
                o.mutant_id for o in killed if o.by == OWN_CHECK and o.reason.endswith(f"({node})")
            ]
        return [o.mutant_id for o in killed if o.by == f"test:{node}"]

    entries: list[dict] = []
    seen: set[str] = set()
    for outcome in baseline.outcomes:
        name = outcome.name
        file, origin, source, given = _test_of(name, kernel, own_functions, index)
        if given is not None:
            seen.add(given)
        entries.append(
            {
                "name": name,
                "status": outcome.status,
                "baseline_duration_s": round(outcome.duration_s, 4),
                "origin": origin,
                "file": file,
                "source": source,
                "kills": kills_of(name),
                **(proved(name.split("::", 1)[1]) if origin in WRITTEN else {}),
            }
        )
    return entries + _not_run_entries(kernel, seen, kills_of, proved)


def _not_run_entries(
    kernel: KernelFile,
    seen: set[str],
    kills_of: Callable[[str], list[str]],
    proved: Callable[[str], dict],
) -> list[dict]:
    """The test functions the original did not run (``seen``: those it ran). Tests
    accepted after the mutants ran (killer tests): verified on their own. A given test
    the original did not run was left out by the selection (-k, -m, node ids)."""
    entries: list[dict] = []
    for test in kernel.tests:
        for function, source in find_test_functions(test.source).items():
            if function in seen:
                continue
            name = f"{EXTRA_TESTS}::{function}"
            entries.append(
                {
                    "name": name,
                    "status": "deselected" if test.origin == "given" else "passed",
                    "baseline_duration_s": None,
                    "origin": test.origin,
                    "file": test.name,
                    "source": source,
                    "kills": kills_of(name),
                    **proved(function),
                }
            )
    return entries


def baseline_cases(baseline: JobResult) -> list[dict]:
    """Every case the original ran, slowest first: its name (in project mode the node id
    from the project root), status and seconds (setup, call and teardown), and its CPU
    seconds where they were measured (what a mutant's limit counts)."""
    coverage = baseline.extra.get("coverage") or {}
    full = {node.split("::", 1)[1]: node for node in coverage}
    rows = []
    for outcome in baseline.outcomes:
        case = outcome.name.partition("::")[2]
        cpu = (coverage.get(full.get(case, "")) or {}).get("cpu_s")
        rows.append(
            {
                "case": full.get(case, outcome.name),
                "status": outcome.status,
                "duration_s": round(outcome.duration_s, 4),
                **({"cpu_s": round(float(cpu), 4)} if cpu is not None else {}),
            }
        )
    return sorted(rows, key=lambda r: -r["duration_s"])
