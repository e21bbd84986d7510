"""``mutant-gate run FILE``: the run through the engine's door, shown by the ``Reporter``."""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from mutant_gate.cache import CacheUnavailable, Store
from mutant_gate.cli import check_lines, commands
from mutant_gate.cli.flags import run_settings
from mutant_gate.cli.reporter import Reporter
from mutant_gate.cli.summary import summary, writers_summary
from mutant_gate.engine import session


def open_store(directory: str, console: Console) -> Store | None:
    """The cache, or None (said plainly) when it exists but cannot be used."""
    try:
        return Store(directory)
    except CacheUnavailable as exc:
        if exc.fatal:
            raise
        console.print(f"[yellow]warning: {exc}; running without the cache[/]", highlight=False)
        return None


def close_store(store: Store | None, console: Console) -> None:
    if store is None:
        return
    store.close()
    if store.write_failures:
        console.print(
            f"[yellow]warning: {len(store.write_failures)} cache writes failed "
            f"({store.write_failures[-1]}); those results were not saved[/]",
            highlight=False,
        )


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    settings = run_settings(args)
    commands.check_report_paths(args)
    if args.config:
        console.print(f"[dim]configuration: {args.config}[/]", highlight=False)
    store = open_store(settings.cache_dir, console) if settings.use_cache else None
    reporter = Reporter(console, quiet=args.quiet)
    sandbox = run = events = None
    try:
        sandbox = session.make_sandbox(settings)
        run = session.start_run(settings, sandbox, store)
        events = run.events()
        with reporter:
            for event in events:
                reporter.handle(event)
    finally:
        if sandbox is not None:
            sandbox.close()  # first: jobs in flight end at once instead of running out their time
        if run is not None and run.other_sandbox is not None:
            run.other_sandbox.close()
        if events is not None:
            events.close()
        close_store(store, console)
    report = reporter.report
    assert report is not None
    summary(console, report)
    for line in writers_summary(report):
        console.print(line, highlight=False)
    for line in check_lines.summary_lines(report):
        console.print(line, highlight=False)
    if args.write_tests:
        from mutant_gate.engine.writers.common import write_tests  # only when asked

        written = write_tests(run.kernel.tests, args.write_tests)
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
