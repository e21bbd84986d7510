"""What `run` says after a run's summary of the test cases it left out and of the
per-path thresholds (``[tool.mutant-gate.fail-under-paths]``), for one kernel file's
run and a library's alike."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape

from mutant_gate.engine import library
from mutant_gate.engine.errors import EXIT_UNDER_THRESHOLD


def left_out(console: Console, report: dict, said: set[str] | None = None) -> None:
    """One line for the test cases the original failed or ``--case-time`` left out; with
    ``said`` (a library run's lines so far), not again for a module whose original is an
    earlier module's."""
    records = report.get("left_out_cases") or []
    if records:
        first = records[0]
        line = f"{library.left_out_line(records)} (first: {first['case']}, {first['reason']})"
        if said is not None and line in said:
            return
        console.print(f"[yellow]{escape(line)}[/]", highlight=False)
        if said is not None:
            said.add(line)


def path_gate(report: dict, args: argparse.Namespace, console: Console) -> int:
    """``[tool.mutant-gate.fail-under-paths]``: one line for each module under its
    threshold; exit 1 when there is one, else 0."""
    thresholds = getattr(args, "fail_under_paths", None) or []
    lines = library.under_thresholds(report, thresholds)
    for line in lines:
        console.print(f"[bold red]{escape(line)}[/]", highlight=False, soft_wrap=True)
    return EXIT_UNDER_THRESHOLD if lines else 0
