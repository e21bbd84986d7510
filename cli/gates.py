"""What `run` says after a run's summary of the test cases it left out and of the
per-path thresholds (``[tool.mutant-gate.fail-under-paths]``), for one kernel file's
run and a library's alike."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape

from mutant_gate.engine import library
from mutant_gate.engine.errors import EXIT_UNDER_THRESHOLD


def left_out(console: Console, report: dict) -> None:
    """One line for the test cases the original failed or ``--case-time`` left out."""
    records = report.get("left_out_cases") or []
    if records:
        first = records[0]
        said = f"{library.left_out_line(records)} (first: {first['case']}, {first['reason']})"
        console.print(f"[yellow]{escape(said)}[/]", highlight=False)


def path_gate(report: dict, args: argparse.Namespace, console: Console) -> int:
    """``[tool.mutant-gate.fail-under-paths]``: one line for each module under its
    threshold; exit 1 when there is one, else 0."""
    thresholds = getattr(args, "fail_under_paths", None) or []
    lines = library.under_thresholds(report, thresholds)
    for line in lines:
        console.print(f"[bold red]{escape(line)}[/]", highlight=False, soft_wrap=True)
    return EXIT_UNDER_THRESHOLD if lines else 0
