"""JUnit XML: one testcase per mutant, so any CI test viewer shows the survivors.

A killed mutant passes; a survivor fails (its diff is the failure text); ``error``
is a JUnit error; ``equivalent``, ``not_compilable`` and ``pending`` are skipped
with the reason. The suite's properties carry the run id and both scores.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ..vocabulary import by_words
from .words import (
    claim_lines,
    compile_lines,
    counts,
    kernel_name,
    killing_tests,
    oracle_sentence,
)

#: Characters XML 1.0 cannot hold (error tails may carry terminal escapes).
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: object) -> str:
    return _INVALID_XML.sub("", "" if text is None else str(text))


def _case_name(row: dict) -> str:
    return f"{row['id']} {row.get('operator', '?')} line {row.get('line')}"


def _details(report: dict, row: dict) -> str:
    lines = [
        f"mutant {row['id']}: {row.get('family')}/{row.get('operator')} in "
        f"{row.get('function')} line {row.get('line')}",
        f"  {row.get('before', '')}  ->  {row.get('after', '')}",
        f"verdict: {row.get('verdict')}"
        + (f" by {by_words(row.get('by'))}" if row.get("by") else ""),
    ]
    if row.get("reason"):
        lines.append(f"reason: {row['reason']}")
    for test in killing_tests(report, row):
        lines.append(f"killing test: {test.get('name')} ({test.get('file')})")
    sentence = oracle_sentence(row)
    if sentence:
        lines.append(f"diff-oracle: {sentence}")
    lines.extend(f"compile {c}" for c in compile_lines(row))
    lines.extend(f"claim {c}" for c in claim_lines(row))
    return "\n".join(lines) + "\n\n" + (row.get("diff") or "")


def junit_xml(report: dict) -> str:
    """The report as a JUnit XML document (text)."""
    name = kernel_name(report)
    module = name[:-3] if name.endswith(".py") else name
    rows = report.get("mutants", [])
    attrs = _suite_attrs(counts(report), rows)
    suites = ET.Element("testsuites", {"name": "mutant-gate", **attrs})
    suite = ET.SubElement(suites, "testsuite", {"name": f"mutant-gate {name}", **attrs})
    _add_properties(ET.SubElement(suite, "properties"), report)
    for row in rows:
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": f"mutant_gate.{module}.{row.get('function', '?')}",
                "name": _clean(_case_name(row)),
                "time": f"{row.get('duration_s') or 0.0:.3f}",
                "file": _clean(report.get("kernel", {}).get("path", name)),
                "line": str(row.get("line", 0)),
            },
        )
        _add_verdict(case, row.get("verdict", "pending"), row, _clean(_details(report, row)))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, "unicode") + "\n"


def _suite_attrs(per_verdict: dict[str, int], rows: list[dict]) -> dict[str, str]:
    """A suite's counts: every mutant a test, survivors failures, harness errors errors,
    the ones not judged either way skipped; and the time they took."""
    total_time = sum(r.get("duration_s") or 0.0 for r in rows)
    return {
        "tests": str(len(rows)),
        "failures": str(per_verdict["survived"]),
        "errors": str(per_verdict["error"]),
        "skipped": str(
            per_verdict["equivalent"]
            + per_verdict["not_compilable"]
            + per_verdict["flaky"]
            + per_verdict["pending"]
        ),
        "time": f"{total_time:.3f}",
    }


def _add_properties(props: ET.Element, report: dict) -> None:
    """The run's id, kernel, score and gate as properties (those it has)."""
    score = report.get("score") or {}
    settings = report.get("settings") or {}
    for key, value in (
        ("run_id", report.get("run_id")),
        ("kernel", report.get("kernel", {}).get("path")),
        ("score.killed", score.get("killed")),
        ("score.total", score.get("total")),
        ("score.raw", score.get("raw")),
        ("score.adjusted", score.get("adjusted")),
        ("score.with_written.killed", (score.get("with_written") or {}).get("killed")),
        ("score.with_written.adjusted", (score.get("with_written") or {}).get("adjusted")),
        ("gate_on", settings.get("gate_on")),
        ("fail_under", settings.get("fail_under")),
        ("complete", report.get("complete")),
    ):
        if value is not None:
            text = str(value).lower() if isinstance(value, bool) else _clean(value)
            ET.SubElement(props, "property", {"name": key, "value": text})


def _add_verdict(case: ET.Element, verdict: str, row: dict, details: str) -> None:
    """A mutant's verdict in a test case: a survivor a failure, a harness error an error,
    one not judged either way skipped; the details beside."""
    reason = _clean(row.get("reason") or verdict)
    if verdict == "survived":
        failure = ET.SubElement(
            case, "failure", {"type": "survived", "message": f"mutant survived: {reason}"}
        )
        failure.text = details
    elif verdict == "error":
        error = ET.SubElement(
            case, "error", {"type": "error", "message": f"harness error: {reason}"}
        )
        error.text = details
    elif verdict in ("equivalent", "not_compilable", "flaky", "pending"):
        message = reason if verdict != "pending" else "not judged: the run is incomplete"
        ET.SubElement(case, "skipped", {"message": _clean(f"{verdict}: {message}")})
        ET.SubElement(case, "system-out").text = details
    else:
        ET.SubElement(case, "system-out").text = details
