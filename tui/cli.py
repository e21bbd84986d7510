"""The ``mutant-gate`` command line: a rich observer of the pipeline's events."""

from __future__ import annotations

import argparse
import json
import os
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mutant_gate.cache import DEFAULT_DIR, CacheUnavailable, Store
from mutant_gate.engine.errors import EXIT_BAD_INPUT, EXIT_OK, EXIT_UNDER_THRESHOLD, BadInput
from mutant_gate.engine.events import (
    BaselineFinished,
    BaselineStarted,
    MutantFinished,
    RunFinished,
    RunStarted,
)
from mutant_gate.engine.pipeline import Run, RunSettings
from mutant_gate.engine.report import by_operator
from mutant_gate.engine.sandbox.local import LocalSandbox, SandboxStartError

VERDICT_STYLE = {
    "killed": "green",
    "survived": "bold red",
    "equivalent": "yellow",
    "not_compilable": "magenta",
    "error": "bold magenta",
    "pending": "dim",
}


class ArgumentError(BadInput):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise ArgumentError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mutant-gate", description="Mutation testing for Triton kernels.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="mutate a kernel file and run its checks against every mutant")
    run.add_argument("file", help="a .py file with @triton.jit kernels and its own check")
    run.add_argument("--json", metavar="PATH", help="write the JSON report here")
    run.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=DEFAULT_DIR,
        help="cache location (default: %(default)s)",
    )
    run.add_argument(
        "--no-cache", action="store_true", help="run every job even when a result is cached"
    )
    run.add_argument(
        "-j", "--jobs", type=int, default=None, metavar="N", help="sandbox workers (default: cores)"
    )
    run.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="limit for the original's check"
    )
    run.add_argument(
        "--timeout-factor",
        type=float,
        default=3.0,
        help="mutant limit = factor * original time + base",
    )
    run.add_argument("--timeout-base", type=float, default=5.0, metavar="S")
    run.add_argument("--memory-mb", type=int, default=4096, help="memory per sandbox child")
    run.add_argument(
        "--operators", metavar="LIST", help="operator/family names to use; -NAME excludes"
    )
    run.add_argument(
        "--tests",
        metavar="PATH",
        action="append",
        default=[],
        help="pytest file to add (repeatable)",
    )
    run.add_argument(
        "--fail-under",
        type=float,
        metavar="PCT",
        help="exit 1 when the adjusted score is below PCT",
    )
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    return parser


def _settings(args: argparse.Namespace) -> RunSettings:
    if args.jobs is not None and args.jobs < 1:
        raise BadInput("-j must be at least 1")
    if args.timeout <= 0:
        raise BadInput("--timeout must be positive")
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:
        raise BadInput("--fail-under must be between 0 and 100")
    return RunSettings(
        kernel_path=args.file,
        tests=tuple(args.tests),
        operators=args.operators,
        workers=args.jobs or os.cpu_count() or 1,
        timeout_s=args.timeout,
        timeout_factor=args.timeout_factor,
        timeout_base_s=args.timeout_base,
        memory_mb=args.memory_mb,
        seed=args.seed,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        fail_under=args.fail_under,
    )


def _summary(console: Console, report: dict) -> None:
    verdicts = ["killed", "survived", "equivalent", "not_compilable", "error"]
    table = Table(
        title=f"mutants of {os.path.basename(report['kernel']['path'])}", title_justify="left"
    )
    table.add_column("family")
    table.add_column("operator")
    table.add_column("total", justify="right")
    for v in verdicts:
        table.add_column(v, justify="right", style=VERDICT_STYLE[v])
    for row in by_operator(report):
        table.add_row(
            row["family"],
            row["operator"],
            str(row["total"]),
            *(str(row.get(v, 0) or "") for v in verdicts),
        )
    console.print(table)
    survivors = [m for m in report["mutants"] if m["verdict"] == "survived"]
    for m in survivors:
        console.print(
            f"[red]survived[/] {m['id']} {m['operator']} in {m['function']} line {m['line']}: "
            f"[dim]{m['before']!s} -> {m['after']!s}[/]",
            highlight=False,
        )
    errors = [m for m in report["mutants"] if m["verdict"] == "error"]
    for m in errors:
        console.print(
            f"[magenta]error[/] {m['id']} {m['operator']} line {m['line']}: {m['reason']}",
            highlight=False,
        )
    s = report["score"]
    excluded = ", ".join(f"{e['id']} ({e['verdict']})" for e in s["excluded"]) or "none"
    raw = "n/a" if s["raw"] is None else f"{s['raw']:.1f}%"
    adjusted = "n/a" if s["adjusted"] is None else f"{s['adjusted']:.1f}%"
    console.print(
        f"score: [bold]{s['killed']}/{s['total']}[/] killed, raw {raw}, adjusted {adjusted} "
        f"(excluded: {excluded})",
        highlight=False,
    )
    net = "cut" if report["sandbox"]["network_cut"] else "NOT cut (unshare refused)"
    iso = report["sandbox"].get("isolation") or {}
    if iso:
        net += f", filesystem {iso.get('filesystem', '?')}, user {iso.get('user', '?')}"
    cached = sum(1 for m in report["mutants"] if m["cached"])
    console.print(
        f"[dim]sandbox: {report['sandbox']['backend']} x{report['sandbox']['workers']}, network {net}, "
        f"mutant timeout {report['sandbox']['mutant_timeout_s']} s; {cached} results from cache; "
        f"run {report['run_id']}[/]",
        highlight=False,
    )


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    settings = _settings(args)
    if args.json:
        parent = os.path.dirname(os.path.abspath(args.json))
        if not os.path.isdir(parent):
            raise BadInput(f"--json: directory does not exist: {parent}")
    store = Store(settings.cache_dir) if settings.use_cache else None
    sandbox = LocalSandbox(settings.workers, settings.mode)
    report = None
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=console,
        disable=args.quiet,
        transient=False,
    )
    counts: dict[str, int] = {}
    events = Run(settings, sandbox, store).events()
    try:
        with progress:
            task = progress.add_task("loading", total=None, counts="")
            for event in events:
                if isinstance(event, RunStarted):
                    progress.console.print(
                        f"{event.kernel.path}: {len(event.kernel.jit_functions)} jit functions, "
                        f"{len(event.mutants)} mutants ({event.generation_s * 1000:.0f} ms)",
                        highlight=False,
                    )
                    progress.update(task, description="original", total=len(event.mutants))
                elif isinstance(event, BaselineStarted):
                    pass
                elif isinstance(event, BaselineFinished):
                    src = "cached" if event.cached else f"{event.result.duration_s:.2f} s"
                    progress.console.print(
                        f"original passes its own check ({src}); mutant timeout "
                        f"{event.mutant_timeout_s:.1f} s",
                        highlight=False,
                    )
                    progress.update(task, description="mutants")
                elif isinstance(event, MutantFinished):
                    v = event.outcome.verdict.value
                    counts[v] = counts.get(v, 0) + 1
                    text = " ".join(
                        f"[{VERDICT_STYLE[k]}]{k} {n}[/]" for k, n in sorted(counts.items())
                    )
                    progress.update(task, completed=event.done, counts=text)
                elif isinstance(event, RunFinished):
                    report = event.report
    finally:
        sandbox.close()  # first: jobs in flight end at once instead of running out their time
        events.close()
        if store is not None:
            store.close()
    assert report is not None
    _summary(console, report)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=2)
        console.print(f"report written to {args.json}", highlight=False)
    if settings.fail_under is not None:
        adjusted = report["score"]["adjusted"] or 0.0
        if adjusted < settings.fail_under:
            console.print(
                f"[bold red]score {adjusted:.1f}% is under --fail-under {settings.fail_under:g}% "
                f"by {settings.fail_under - adjusted:.1f} points[/]",
                highlight=False,
            )
            return EXIT_UNDER_THRESHOLD
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    console = Console(stderr=False)
    err = Console(stderr=True)
    try:
        args = build_parser().parse_args(argv)
        if args.command == "run":
            return cmd_run(args, console)
    except BadInput as exc:
        err.print(f"mutant-gate: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    except (SandboxStartError, CacheUnavailable) as exc:
        err.print(f"mutant-gate: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err.print(
            "mutant-gate: interrupted; finished results are cached and the next run resumes",
            markup=False,
        )
        return 130
    return EXIT_OK


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
