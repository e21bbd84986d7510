"""What the tolerance hid, from one run's JSON report (a file's or a library's).

Usage:
    python benchmarks/tolerance_summary.py REPORT.json [--markdown]

Prints, per module: the survivors of the user's tests (survived, or killed only by a test
mutant-gate wrote), how many the diff-oracle saw differ, how many have a tolerance line
that names a closeness assertion whose error grew, how many got a proposal, how many a
checked tighter tolerance kills (hidden by tolerance); then the per-test-line view (the
report's ``checks.tolerance.lines``) with the checked tolerance.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def survivors_of_the_users_tests(report: dict) -> list[dict]:
    """Rows that survived, or whose tolerance section the check wrote (a written kill)."""
    return [
        m
        for m in report["mutants"]
        if m["verdict"] == "survived" or isinstance(m.get("tolerance"), dict)
    ]


def per_module(report: dict) -> dict[str, dict]:
    table: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    for m in survivors_of_the_users_tests(report):
        one = table[m.get("file") or report.get("kernel", {}).get("path", "?")]
        tolerance = m.get("tolerance") or {}
        one["survivors"] += 1
        one["oracle differs"] += (m.get("survivor") or {}).get("kind") == "differs"
        one["no assertion recorded"] += "no closeness assertion on its run" in str(
            tolerance.get("line")
        )
        one["with a line"] += "where" in tolerance
        one["proposals"] += tolerance.get("proposal") is not None
        one["hidden by tolerance"] += bool(tolerance.get("hidden"))
    return table


COLUMNS = (
    "survivors",
    "oracle differs",
    "no assertion recorded",
    "with a line",
    "proposals",
    "hidden by tolerance",
)


def checked(line: dict) -> str:
    """The tightest checked proposal at a line, in words ("-": none)."""
    for route, words in (("atol", "atol {}"), ("rtol", "rtol {}"), ("abs", "atol {}, rtol 0")):
        if line.get(f"{route}_checked") is not None:
            return words.format(f"{line[f'{route}_checked']:g}")
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    args = parser.parse_args()
    report = json.loads(args.report.read_text())
    lines = ["| module | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    totals: dict[str, int] = defaultdict(int)
    for module, counts in sorted(per_module(report).items()):
        lines.append(f"| {module} | " + " | ".join(str(counts[c]) for c in COLUMNS) + " |")
        for c in COLUMNS:
            totals[c] += counts[c]
    lines.append("| all | " + " | ".join(str(totals[c]) for c in COLUMNS) + " |")
    view = ((report.get("checks") or {}).get("tolerance") or {}).get("lines") or []
    lines += ["", "| test line | survivors through | atol, rtol there | checked tighter | kills |"]
    lines.append("|---|---|---|---|---|")
    for line in view:
        lines.append(
            f"| {line['where']} | {len(line['survivors'])} | {line['atol']:g}, "
            f"{line['rtol']:g} | {checked(line)} | {len(line['killed'])} |"
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
