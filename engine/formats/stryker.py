"""Stryker's mutation-testing-report-schema (version 2): the JSON other tools read.

Stryker's dashboard, its HTML elements and PIT/Stryker plugins read this shape. Our
verdicts map onto its statuses so that Stryker's score (detected / valid) equals our
adjusted score whenever no mutant is ``error``:

==================================  ============  =====================================
our verdict (``by``)                Stryker       why
==================================  ============  =====================================
killed (own-check, test:*, bounds)  Killed        a check failed on the mutant
killed (crash)                      Killed        the mutant's own fault ended the run
                                                  (Stryker's RuntimeError means "could
                                                  not be tested": that is our ``error``)
killed (timeout)                    Timeout       Stryker counts it as detected too
survived                            Survived
equivalent                          Ignored       a claim, excluded from our adjusted
                                                  score as Ignored is from Stryker's
not_compilable                      CompileError  the compile-check set it aside
error                               RuntimeError  the harness failed; never a kill.
                                                  Stryker leaves it out of its score,
                                                  our adjusted score counts it as not
                                                  killed: the only place they differ
pending (run incomplete)            Pending
==================================  ============  =====================================

A library's report carries every module in ``files`` (its source and its mutants), keyed
by its path below the folder the modules share (``projectRoot``).
"""

from __future__ import annotations

import os

from ..vocabulary import By, by_words
from .modules import is_library, module_report
from .words import (
    claim_lines,
    compile_lines,
    end_position,
    kernel_name,
    kernel_source,
    killing_tests,
    oracle_sentence,
    tool_version,
)

SCHEMA_VERSION = "2"


def status_of(row: dict) -> str:
    verdict, by = row.get("verdict"), row.get("by")
    if verdict == "killed":
        return "Timeout" if by == By.TIMEOUT else "Killed"
    return {
        "survived": "Survived",
        "equivalent": "Ignored",
        "not_compilable": "CompileError",
        "flaky": "Ignored",
        "error": "RuntimeError",
    }.get(verdict, "Pending")


def status_reason(row: dict, written: frozenset[str] = frozenset()) -> str:
    verdict = row.get("verdict")
    reason = row.get("reason") or ""
    if verdict == "killed":
        return _killed_reason(row, reason, written)
    parts = [reason] if reason else []
    if verdict in ("survived", "equivalent"):
        parts += _evidence_of_survival(row)
    if verdict == "not_compilable":
        parts += _compile_failures(row, parts)
    return "; ".join(parts) or verdict or "pending"


def _compile_failures(row: dict, said: list[str]) -> list[str]:
    """The row's compile lines that say a target does not compile, less those already
    ``said``."""
    return [c for c in compile_lines(row) if "does not compile" in c and c not in said]


def _killed_reason(row: dict, reason: str, written: frozenset[str]) -> str:
    """What killed the mutant, and whether only a test mutant-gate wrote did (``written``)."""
    said = f"killed by {by_words(row.get('by'))}: {reason}".rstrip(": ")
    if row.get("id") in written:
        said += " (by a test mutant-gate wrote: your tests let it through)"
    return said


def _evidence_of_survival(row: dict) -> list[str]:
    """What a survivor's (or an equivalent's) record says for it: the diff-oracle's
    sentence and each claim."""
    sentence = oracle_sentence(row)
    parts = [f"diff-oracle: {sentence}"] if sentence else []
    return parts + [f"claim by {c}" for c in claim_lines(row)]


def _test_id(test: dict) -> str:
    return test.get("name") or "own-check"


def mutant_entry(report: dict, row: dict) -> dict:
    end_line, end_col = end_position(row)
    entry = {
        "id": row["id"],
        "mutatorName": row.get("operator", "?"),
        "description": f"{row.get('family', '?')}/{row.get('operator', '?')} in "
        f"{row.get('function', '?')}: {row.get('before', '')} -> {row.get('after', '')}",
        "replacement": row.get("after", ""),
        "location": {
            "start": {"line": row["line"], "column": row["col"] + 1},
            "end": {"line": end_line, "column": end_col + 1},
        },
        "status": status_of(row),
        "statusReason": status_reason(
            row,
            frozenset(((report.get("score") or {}).get("with_written") or {}).get("added") or ()),
        ),
        "static": False,
    }
    killers = [_test_id(t) for t in killing_tests(report, row)]
    if killers:
        entry["killedBy"] = killers
    if row.get("duration_s") is not None:
        entry["duration"] = round(row["duration_s"] * 1000.0, 1)
    return entry


def test_files(report: dict) -> dict:
    """Stryker's ``testFiles``: our checks and tests by the file they live in."""
    files: dict[str, dict] = {}
    for test in report.get("tests", []):
        name = test.get("file") or kernel_name(report)
        files.setdefault(name, {"tests": []})["tests"].append(
            {"id": _test_id(test), "name": f"{test.get('origin', '?')}: {_test_id(test)}"}
        )
    return files


def _file_entry(report: dict, part: dict) -> dict:
    """One kernel file's entry of ``files``: its source and its mutants (``part``: the
    file's report, the whole report of a one-file run)."""
    source, _how = kernel_source(part)
    return {
        "language": "python",
        "source": source,
        "mutants": [mutant_entry(report, row) for row in part.get("mutants", [])],
    }


def _files(report: dict) -> tuple[str, dict]:
    """(``projectRoot``, ``files``): a one-file run's kernel file by its name beside its
    folder; a library's every module (left out and not reached ones too, with what
    mutants they have) by its path below the folder all of them share."""
    if not is_library(report):
        path = (report.get("kernel") or {}).get("path") or "kernel.py"
        return os.path.dirname(path) or ".", {kernel_name(report): _file_entry(report, report)}
    return _library_files(report)


def _library_files(report: dict) -> tuple[str, dict]:
    """(``projectRoot``, ``files``) of a library run: each module by its path below the
    folder all of them share."""
    records = report.get("files") or []
    root = _shared_folder([str(r["path"]) for r in records])
    return root or ".", {
        os.path.relpath(str(r["path"]), root or "."): _file_entry(report, module_report(report, r))
        for r in records
    }


def _shared_folder(paths: list[str]) -> str:
    """The folder all of ``paths`` lie below ("." when none, or when they mix absolute and
    relative paths)."""
    folders = [os.path.dirname(p) or "." for p in paths]
    try:
        return os.path.commonpath(folders) if folders else "."
    except ValueError:  # absolute and relative paths: each by its path as given
        return "."


def stryker_report(report: dict) -> dict:
    """The report as mutation-testing-report-schema JSON (a dict, ready for json.dump)."""
    root, files = _files(report)
    threshold = (report.get("settings") or {}).get("fail_under")
    low = int(round(threshold)) if threshold is not None else 60
    toolchain = report.get("toolchain") or {}
    return {
        "schemaVersion": SCHEMA_VERSION,
        "thresholds": {"high": max(80, low), "low": low},
        "projectRoot": root,
        "files": files,
        "testFiles": test_files(report),
        "framework": {
            "name": "mutant-gate",
            "version": tool_version(),
            "dependencies": {
                k: str(v) for k, v in toolchain.items() if k in ("python", "torch", "triton")
            },
        },
        "config": {
            "run_id": report.get("run_id"),
            "mode": toolchain.get("mode"),
            "settings": report.get("settings") or {},
        },
    }
