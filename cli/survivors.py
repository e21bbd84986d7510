"""The console's survivor lines: one line for each survivor the run leaves the user."""

from __future__ import annotations

from mutant_gate.engine.vocabulary import Verdict


def survivor_lines(report: dict) -> list[str]:
    """``survived ID operator in function line N: before -> after`` (rich markup), for
    each survivor not accepted in the baseline file."""
    return [
        f"[red]survived[/] {m['id']} {m['operator']} in {m['function']} line {m['line']}: "
        f"[dim]{m['before']!s} -> {m['after']!s}[/]"
        for m in report["mutants"]
        if m["verdict"] == Verdict.SURVIVED and not m.get("accepted")
    ]
