"""What every face reads from a library's report: its modules and their kernels.

A library run's report (``engine/library.py``) holds every module's rows, each naming
its ``file``, and a ``files`` section (per module: mutants, killed, survived, score,
status and reason). The faces (console, Stryker, Markdown, HTML, the site, the explorer)
show the same things in the same order from it; this module says them once:

- ``is_library(report)``: a library's report (a one-file report renders as always);
- ``module_report(report, record)``: one module's part shaped as a one-file report (its
  kernel, its rows, its score), so a face's one-file code renders a module unchanged;
- ``kernel_counts(report, record)``: per jit function of the module, its mutants and
  survivors (survivors of your tests, as ``files`` counts them).

Nothing here recomputes a verdict: counts come from the rows as the report holds them,
so a merged report (``mutant-gate merge``) renders as the unsharded one.
"""

from __future__ import annotations

from ..report import score, written_names
from ..vocabulary import Verdict
from .words import is_library, kernel_source, library_name  # noqa: F401 - said there, used here

JUDGED, NOT_REACHED, LEFT_OUT = "judged", "not_reached", "left_out"
#: a module's status in words, as every face says it
STATUS_WORDS = {JUDGED: "judged", NOT_REACHED: "not reached", LEFT_OUT: "left out"}


def module_rows(report: dict, record: dict) -> list[dict]:
    """The report's rows of one ``files`` entry, in the report's order."""
    return [r for r in report.get("mutants", []) if r.get("file") == record.get("path")]


def _survived(rows: list[dict], counted: dict) -> int:
    """Survivors of your tests: neither killed by them, excluded, nor a harness error (a
    mutant only a written test kills is one of them), as ``files`` counts them."""
    errors = sum(1 for r in rows if r.get("verdict") == Verdict.ERROR.value)
    return len(rows) - counted["killed"] - len(counted["excluded"]) - errors


def module_report(report: dict, record: dict) -> dict:
    """One module's part of a library report, shaped as a one-file run's report: its
    kernel (path, sha256, jit functions, and its source where its file, read from here,
    is the one the run judged), its rows, their score; the rest (tests, settings,
    toolchain) the library's. ``module`` holds its ``files`` entry."""
    rows = module_rows(report, record)
    judged = [r for r in rows if r.get("verdict") != "pending"]
    part = _library_wide(report)
    part.update(
        run_id=record.get("run_id") or report.get("run_id"),
        kernel={
            "path": record.get("path"),
            "sha256": record.get("sha256"),
            "jit_functions": list(record.get("jit_functions") or []),
        },
        mutants=rows,
        score=score(judged, written_names(report.get("tests") or [])),
        module=record,
    )
    source, how = kernel_source(part)
    if how != "diffs":  # the module's file as the run saw it (same sha256)
        part["kernel"]["source"] = source
    return part


def _library_wide(report: dict) -> dict:
    """A copy of the library report's fields every module shares (tests, settings,
    toolchain...): all but its modules, its rows and its score."""
    return {k: v for k, v in report.items() if k not in ("files", "library", "mutants", "score")}


def kernel_counts(report: dict, record: dict) -> list[dict]:
    """Per jit function of a module (those with mutants, then those without): its
    mutants, killed and survivors (of your tests), and whether any case reached it; the
    most survivors first."""
    rows = module_rows(report, record)
    written = written_names(report.get("tests") or [])
    names = list(
        dict.fromkeys([*(record.get("jit_functions") or []), *(r.get("function") for r in rows)])
    )
    out = [_kernel_count(name, rows, written) for name in names]
    return sorted(out, key=lambda k: (-k["survived"], -k["mutants"], k["function"]))


def _kernel_count(name: object, rows: list[dict], written: frozenset[str]) -> dict:
    """One jit function's counts from its module's ``rows``: its mutants, killed,
    survivors of your tests, and whether any case reached it."""
    mine = [r for r in rows if r.get("function") == name]
    counted = score(mine, written)
    return {
        "function": str(name),
        "mutants": len(mine),
        "killed": counted["killed"],
        "survived": _survived(mine, counted),
        "reached": not mine or any(r.get("reached") is not False for r in mine),
    }


def modules_by_survivors(report: dict) -> list[dict]:
    """The ``files`` entries, the most survivors first (then by path)."""
    return sorted(report.get("files") or [], key=lambda f: (-f.get("survived", 0), f["path"]))


def module_score(record: dict) -> str:
    """A module's score cell: its adjusted score, or its status where it was not judged."""
    status = record.get("status") or JUDGED
    if status != JUDGED:
        return STATUS_WORDS.get(status, status)
    value = record.get("score")
    return "-" if value is None else f"{value:.1f}%"
