"""``mutant-gate run FILE``: the run through the engine's door, shown by the ``Reporter``."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from mutant_gate.cli import check_lines, commands
from mutant_gate.cli.check_lines import counted
from mutant_gate.cli.flags import run_settings
from mutant_gate.cli.reporter import Reporter
from mutant_gate.cli.summary import score_line, summary, writers_summary
from mutant_gate.engine import session


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    settings = run_settings(args)
    commands.check_report_paths(args)
    if args.config:
        console.print(f"[dim]configuration: {args.config}[/]", highlight=False)
    reporter = Reporter(console, quiet=args.quiet)

    def warn(text: str) -> None:
        console.print(f"[yellow]{text}[/]", highlight=False)

    with session.Session(settings, warn=warn) as run:
        with reporter:
            for event in run.events():
                reporter.handle(event)
    report = reporter.report
    assert report is not None
    summary(console, report)
    for line in writers_summary(report):
        console.print(line, highlight=False)
    for line in check_lines.summary_lines(report):
        console.print(line, highlight=False)
    if args.write_tests:
        write_tests(run, args.write_tests, console)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
        console.print(f"report written to {args.json}", highlight=False)
    return score_and_gate(report, args, console)


def write_tests(run: session.Session, directory: str, console: Console) -> None:
    """``--write-tests DIR``: the accepted tests, ready to commit."""
    written = run.write_tests(directory)
    console.print(
        f"{counted(len(written), 'accepted test file')} written to {directory}"
        if written
        else f"no accepted tests to write to {directory}",
        highlight=False,
    )


def score_and_gate(report: dict, args: argparse.Namespace, console: Console) -> int:
    """The run's last lines: what ``--changed-since`` left out and the reports written,
    then the score, then the gate's verdict (``--fail-under``), so the score is what a
    log ends with. Returns the exit code."""
    commands.after_run(report, args, console)
    console.print(score_line(report), highlight=False)
    return commands.gate_exit(report, args.fail_under, console)
