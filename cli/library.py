"""``mutant-gate run PATH...`` over a library, and ``mutant-gate merge``.

A library run (several paths, a directory of kernels or of tests, or ``--shard``) drives
the engine's ``library.Library``: each module's run shown by its own ``Reporter`` on one
session (one sandbox pool, one cache), then a per-module table sorted by survivors, the
library's score lines and the gate. ``merge REPORT... --json OUT`` joins shards' JSON
reports into the report an unsharded run writes.
"""

from __future__ import annotations

import argparse
import json
import os

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mutant_gate.cli.check_lines import counted
from mutant_gate.engine import formats, library_paths, session
from mutant_gate.engine import library as engine_library
from mutant_gate.engine.errors import BadInput

#: set to 1: each module starts once the one before has ended (for comparison:
#: ``benchmarks/library_overlap.py``)
SEQUENTIAL_ENV = "MUTANT_GATE_LIBRARY_SEQUENTIAL"


def wanted(args: argparse.Namespace) -> bool:
    """Whether ``run``'s paths and flags ask for a library run."""
    paths = list(getattr(args, "paths", None) or [])
    return library_paths.is_library(paths, list(args.tests), getattr(args, "shard", None))


def require_paths(args: argparse.Namespace) -> None:
    """``run`` and ``tui`` need a kernel path: on the command line, or ``paths`` in the
    configuration."""
    if not getattr(args, "paths", None):
        raise BadInput(
            f"{args.command}: give a kernel file or directory (PATH...), "
            "or paths = [...] in [tool.mutant-gate]"
        )


def add_commands(sub, parser_class) -> None:
    merge = sub.add_parser(
        "merge",
        help="join the JSON reports of a library run's shards (--shard K/N) into one",
        description="Join shards' JSON reports into the report an unsharded run writes.",
    )
    merge.add_argument("reports", nargs="+", metavar="REPORT", help="a shard's JSON report")
    merge.add_argument("--json", metavar="PATH", required=True, help="write the joined report here")
    merge.add_argument("--fail-under", type=float, metavar="PCT", help="exit 1 under PCT")
    from mutant_gate.cli.commands import add_report_options

    add_report_options(merge)


def cmd_merge(args: argparse.Namespace, console: Console) -> int:
    from mutant_gate.cli import commands
    from mutant_gate.cli.summary import score_line

    commands.check_report_paths(args)
    reports = [(path, session.read_report_file(path)) for path in args.reports]
    report = engine_library.merge(reports)
    with open(args.json, "w") as fh:
        json.dump(report, fh, indent=2)
    module_table(console, report)
    console.print(f"{len(reports)} shards joined; report written to {args.json}", highlight=False)
    commands.write_reports(report, args, console)
    console.print(score_line(report), highlight=False)
    return commands.gate_exit(report, args.fail_under, console)


def cmd_library(args: argparse.Namespace, console: Console) -> int:
    """The library's run: its modules one after the other, then one report."""
    from mutant_gate.cli import commands
    from mutant_gate.cli.gates import path_gate
    from mutant_gate.cli.summary import score_line

    library = prepare(args, console)
    if library.modules:  # --changed-since may leave none
        drive(library, args, console)
    report = library.report()
    if report["files"] and all(f["status"] == engine_library.LEFT_OUT for f in report["files"]):
        raise BadInput(f"every kernel module was left out: {report['files'][0]['reason']}")
    if report["files"]:
        module_table(console, report)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
        console.print(f"report written to {args.json}", highlight=False)
    commands.write_reports(report, args, console)
    save_run(report, args)
    step = next_step(report)
    if step:
        console.print(f"[bold]{escape(step)}[/]", highlight=False)
    console.print(score_line(report), highlight=False)
    code = commands.gate_exit(report, args.fail_under, console, args.gate_on)
    return path_gate(report, args, console) or code


def save_run(report: dict, args: argparse.Namespace) -> None:
    """The library's report as a run record in the cache, beside its modules' runs:
    ``replay``, ``report`` and ``export`` find it by its id (``lib-...``) or as ``latest``."""
    from mutant_gate.cli import commands

    if not report.get("run_id") or not os.path.isdir(commands.cache_dir(args)):
        return
    paths = " ".join((report.get("library") or {}).get("paths") or [])
    record = {"run_id": report["run_id"], "settings": report.get("settings") or {},
              "kernel": paths, "report": report}  # fmt: skip
    with session.open_cache(commands.cache_dir(args)) as store:
        store.put_run(report["run_id"], record)


def prepare(args: argparse.Namespace, console: Console):
    """The library the paths and flags name (``engine.library.Library``); bad input, one
    line, before anything runs."""
    from mutant_gate.cli import commands
    from mutant_gate.cli.flags import run_settings

    lib = engine_library
    shard = lib.parse_shard(getattr(args, "shard", None))
    exclude = tuple(getattr(args, "exclude", None) or ())
    modules = library_paths.find_modules(list(args.paths), exclude)
    tests = library_paths.find_tests(list(args.tests), args.project_root)
    args.file = modules[0]  # the settings every module's run starts from
    settings = run_settings(args)
    commands.check_report_paths(args)
    if args.config:
        console.print(f"[dim]configuration: {args.config}[/]", highlight=False)
    unchanged: list[str] = []
    if settings.changed_since is not None:
        modules, unchanged = library_paths.changed_modules(modules, settings.changed_since)
    shards = f", shard {shard[0]}/{shard[1]}" if shard else ""
    console.print(
        f"library: {counted(len(modules), 'kernel module')}, {counted(len(tests), 'test file')}{shards}",
        highlight=False,
    )
    if unchanged:
        said = library_paths.unchanged_line(unchanged, modules, settings.changed_since)
        console.print(escape(said), highlight=False)
    return lib.Library(
        settings,
        modules,
        tests,
        paths=list(args.paths),
        given_tests=list(args.tests),
        exclude=exclude,
        shard=shard,
        unchanged=unchanged,
        overlap=os.environ.get(SEQUENTIAL_ENV) != "1",
    )


def drive(library, args: argparse.Namespace, console: Console) -> None:
    """Each module's run on one session, shown by a ``Reporter`` of its own, one module
    after the other (underneath, the next module starts in the tail of the one before:
    ``Library.module_runs``); a module left out says why; a judged one's written tests are
    written out."""
    from mutant_gate.cli.gates import left_out
    from mutant_gate.cli.reporter import Reporter
    from mutant_gate.cli.written import say_written

    def warn(text: str) -> None:
        console.print(f"[yellow]{text}[/]", highlight=False)

    total = len(library.modules)
    settings = library.settings
    said: set[str] = set()  # the suite's left-out cases, said once, not for every module
    with session.Session(settings, warn=warn) as run:
        for number, (module, events) in enumerate(library.module_runs(run), 1):
            shown = escape(library_paths.shown(module.path))
            console.print(f"[bold]module {number}/{total}: {shown}[/]", highlight=False)
            reporter = Reporter(console, quiet=args.quiet, verbose=getattr(args, "verbose", False))
            with reporter:
                for event in events:
                    reporter.handle(event)
            if module.took_shared:
                console.print("[dim]the suite's original: taken from an earlier module's run[/]")
            if module.reason:
                console.print(f"[yellow]left out: {escape(module.reason)}[/]", highlight=False)
            elif module.report is not None:
                say_written(run, settings.writers.write_tests, console, module.driver)
                left_out(console, module.report, said)


def next_step(report: dict) -> str | None:
    """The module to look at first: the judged one with the most survivors (its own run
    in the cache shows them)."""
    judged = [f for f in report["files"] if f["status"] == "judged"]
    worst = max(judged, key=lambda f: f["survived"], default=None)
    if worst is None or not worst["survived"] or not worst.get("run_id"):
        return None
    return (
        f"next: `mutant-gate replay {worst['run_id']}` shows the {worst['survived']} "
        f"survivors of {worst['path']}, the most of any module"
    )


#: the table's module column: at most this wide, so the table fits 80 columns
MODULE_WIDTH = 36
#: the kernel table's module and kernel columns: at most this wide (80 columns in all)
KERNEL_MODULE_WIDTH, KERNEL_WIDTH = 24, 20


def _name(path: str, width: int = MODULE_WIDTH) -> str:
    """A module's path, cut from the left to ``width`` (its end names it)."""
    return path if len(path) <= width else "..." + path[-(width - 3) :]


def module_table(console: Console, report: dict) -> None:
    """Per module: mutants, killed (by your tests), survived and the adjusted score, the
    most survivors first; then a line for each module not reached or left out."""
    table = Table(box=box.SIMPLE, title="kernel modules", title_justify="left", pad_edge=False)
    table.add_column("module", no_wrap=True, max_width=MODULE_WIDTH)
    for column in ("mutants", "killed", "survived"):
        table.add_column(column, justify="right")
    table.add_column("score", justify="right")
    files = sorted(report["files"], key=lambda f: (-f["survived"], f["path"]))
    for f in files:
        if f["status"] == "left_out":
            said = "left out"
        elif f["status"] == "not_reached":
            said = "not reached"
        else:
            said = "-" if f["score"] is None else f"{f['score']:.1f}%"
        table.add_row(
            escape(_name(f["path"])), str(f["mutants"]), str(f["killed"]), str(f["survived"]), said
        )
    console.print(table)
    kernel_table(console, report)
    for f in files:
        if f["status"] != "judged":
            console.print(f"{escape(f['path'])}: {escape(f['reason'])}", highlight=False)
        elif f.get("not_reached"):
            kernels = ", ".join(f["not_reached"])
            console.print(
                f"{escape(f['path'])}: not reached by the tests: {escape(kernels)}",
                highlight=False,
            )


def kernel_table(console: Console, report: dict) -> None:
    """Per judged module (by its import name, the most survivors first), its jit
    functions with their mutants, killed and survivors (the most survivors first); a
    kernel no case reaches says so in its survived column."""
    modules = formats.modules
    table = Table(box=box.SIMPLE, title="kernels", title_justify="left", pad_edge=False)
    table.add_column("module", no_wrap=True, max_width=KERNEL_MODULE_WIDTH)
    table.add_column("kernel", no_wrap=True, max_width=KERNEL_WIDTH)
    for column in ("mutants", "killed", "survived"):
        table.add_column(column, justify="right")
    shown = 0
    for f in modules.modules_by_survivors(report):
        if f["status"] != "judged":
            continue
        for number, kernel in enumerate(modules.kernel_counts(report, f)):
            name = f.get("module") or f["path"]  # its import name, as reasons say it
            module = _name(name, KERNEL_MODULE_WIDTH) if number == 0 else ""
            survived = str(kernel["survived"]) if kernel["reached"] else "not reached"
            table.add_row(
                escape(module),
                escape(_name(kernel["function"], KERNEL_WIDTH)),
                str(kernel["mutants"]),
                str(kernel["killed"]),
                survived,
            )
            shown += 1
    if shown:
        console.print(table)
