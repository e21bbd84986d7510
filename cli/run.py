"""``mutant-gate run FILE``: the run through the engine's door, shown by the ``Reporter``."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from mutant_gate.cli import check_lines, commands
from mutant_gate.cli.flags import run_settings
from mutant_gate.cli.reporter import Reporter
from mutant_gate.cli.summary import summary, writers_summary
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
        written = run.write_tests(args.write_tests)
        console.print(
            f"{len(written)} accepted test files written to {args.write_tests}"
            if written
            else f"no accepted tests to write to {args.write_tests}",
            highlight=False,
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
        console.print(f"report written to {args.json}", highlight=False)
    return commands.finish_run(report, args, console)
