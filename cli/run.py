"""``mutant-gate run FILE``: the run through the engine's door, shown by the ``Reporter``
(several paths or a directory: a library's run, ``cli/library.py``)."""

from __future__ import annotations

import argparse
import json

from rich.console import Console
from rich.markup import escape

from mutant_gate.cli import check_lines, commands, library
from mutant_gate.cli.flags import run_settings
from mutant_gate.cli.gates import left_out, path_gate
from mutant_gate.cli.reporter import Reporter
from mutant_gate.cli.summary import next_step, score_line, summary, writers_summary
from mutant_gate.cli.written import say_written
from mutant_gate.engine import session


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    if library.wanted(args):  # several paths, a directory, --shard: one run of them all
        return library.cmd_library(args, console)
    settings = run_settings(args)
    commands.check_report_paths(args)
    if args.config:
        console.print(f"[dim]configuration: {args.config}[/]", highlight=False)
    verbose = getattr(args, "verbose", False)
    reporter = Reporter(console, quiet=args.quiet, verbose=verbose)

    def warn(text: str) -> None:
        console.print(f"[yellow]{text}[/]", highlight=False)

    with session.Session(settings, warn=warn) as run:
        with reporter:
            for event in run.events():
                reporter.handle(event)
    report = reporter.report
    assert report is not None
    summary(console, report, verbose)
    left_out(console, report)
    for line in writers_summary(report, verbose):
        console.print(line, highlight=False)
    for line in check_lines.summary_lines(report, verbose):
        console.print(line, highlight=False)
    write_tests(run, settings.writers.write_tests, console)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
        console.print(f"report written to {args.json}", highlight=False)
    return score_and_gate(report, args, console)


def write_tests(run: session.Session, directory: str | None, console: Console) -> None:
    """The written tests, by default in ``mutant-gate-tests/`` (``--write-tests DIR``,
    ``--no-write-tests``): one line saying where, and how to run them with plain pytest."""
    say_written(run, directory, console)


def score_and_gate(report: dict, args: argparse.Namespace, console: Console) -> int:
    """The run's last lines: what ``--changed-since`` left out and the reports written,
    then the score, then the gate's verdict (``--fail-under``), so the score is what a
    log ends with. Returns the exit code."""
    commands.after_run(report, args, console)
    step = next_step(report, getattr(args, "write_tests", None))
    if step:
        console.print(f"[bold]{escape(step)}[/]", highlight=False)
    console.print(score_line(report), highlight=False)
    code = commands.gate_exit(report, args.fail_under, console, args.gate_on)
    return path_gate(report, args, console) or code
