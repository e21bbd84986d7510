"""The ``mutant-gate`` command line: a rich observer of the pipeline's events."""

from __future__ import annotations

import argparse
import json
import os
import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mutant_gate.cache import DEFAULT_DIR, CacheUnavailable, Store
from mutant_gate.engine.checks import DEFAULT_TARGETS, parse_targets
from mutant_gate.engine.errors import EXIT_BAD_INPUT, EXIT_OK, BadInput
from mutant_gate.engine.events import (
    BaselineFinished,
    BaselineStarted,
    CheckFinished,
    MutantFinished,
    MutantUpdated,
    OwnCheckJudged,
    RunFinished,
    RunStarted,
    TestAccepted,
    TestRejected,
    WriterNote,
)
from mutant_gate.engine.pipeline import Run, RunSettings
from mutant_gate.engine.report import by_operator
from mutant_gate.engine.sandbox.local import LocalSandbox, SandboxStartError
from mutant_gate.engine.writers import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    WRITERS,
    LLMSettings,
    WriterSettings,
    write_tests,
)
from mutant_gate.tui import check_lines, commands
from mutant_gate.tui.config import apply_config

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
    run.add_argument(
        "--project-root",
        metavar="DIR",
        help="project mode: where the project's tests run from (default: found upward)",
    )
    run.add_argument(
        "--all-configs",
        action="store_true",
        help="run every @triton.autotune config (default: the first); a kill under any counts",
    )
    run.add_argument(
        "--no-select",
        action="store_true",
        help="project mode: run every test case for every mutant (no coverage-based selection)",
    )
    run.add_argument(
        "--mode",
        choices=("interpret", "compiled"),
        default="interpret",
        help="interpret: Triton's interpreter on the CPU (default); compiled: the local CUDA device",
    )
    run.add_argument(
        "--sanitize",
        action="store_true",
        help="compiled mode under compute-sanitizer memcheck (caching allocator off)",
    )
    run.add_argument(
        "--compare-modes",
        action="store_true",
        help="run every mutant in both modes and report where they disagree",
    )
    run.add_argument(
        "--backend",
        choices=("local", "contree"),
        default="local",
        help="where jobs run: local worker pool, or Nebius Contree sandboxes (default: %(default)s)",
    )
    run.add_argument(
        "--contree-image",
        metavar="REF",
        help="Contree image (UUID, tag, or OCI ref to import) holding python3, torch, triton",
    )
    run.add_argument(
        "--contree-url", metavar="URL", help="Contree API endpoint (default: the SDK's)"
    )
    writers = run.add_argument_group("test writers")
    writers.add_argument(
        "--writer",
        choices=WRITERS,
        default="probe",
        help="probe: model-free inputs near the own check's (default); llm: the model writes "
        "tests first (stage 1), then the probe; none: no writer",
    )
    writers.add_argument(
        "--stage2", action="store_true", help="the model answers each survivor (needs a key)"
    )
    writers.add_argument(
        "--attempts", type=int, default=3, metavar="N", help="model replies per test (default 3)"
    )
    writers.add_argument(
        "--probes", type=int, default=24, metavar="N", help="probe inputs per survivor (default 24)"
    )
    writers.add_argument(
        "--base-url",
        metavar="URL",
        default=DEFAULT_BASE_URL,
        help="OpenAI-compatible endpoint (default: %(default)s)",
    )
    writers.add_argument(
        "--model", metavar="NAME", default=DEFAULT_MODEL, help="model id (default: %(default)s)"
    )
    writers.add_argument(
        "--model-timeout", type=float, default=300.0, metavar="S", help="per model request"
    )
    writers.add_argument(
        "--price-in", type=float, metavar="USD", help="price per million prompt tokens"
    )
    writers.add_argument(
        "--price-out", type=float, metavar="USD", help="price per million completion tokens"
    )
    writers.add_argument(
        "--write-tests", metavar="DIR", help="write every accepted test here, ready to commit"
    )
    checks = run.add_argument_group("checks on survivors (after the writers)")
    checks.add_argument(
        "--compile-check",
        action="store_true",
        help="compile original and survivors for CUDA targets (no GPU needed); a survivor "
        "the compiler rejects is not_compilable",
    )
    checks.add_argument(
        "--compile-target",
        metavar="LIST",
        help="targets for --compile-check, e.g. sm_80,sm_90 (default: sm_75; implies "
        "--compile-check)",
    )
    checks.add_argument(
        "--diff-oracle",
        action="store_true",
        help="run original and each survivor side by side and compare every tensor "
        "argument after every launch",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    commands.add_run_options(run)  # --changed-since, --config, --no-config
    # The explorer takes every run option (whatever is added above, it inherits).
    sub.add_parser(
        "tui",
        parents=[run],
        add_help=False,
        help="the same run, live in the Textual explorer",
        description="Run like `run`, shown live in the Textual explorer.",
    )
    commands.add_report_options(run)  # --stryker, --junit, --markdown, --html: `run` only
    replay = sub.add_parser("replay", help="open a past run from the cache, offline")
    replay.add_argument(
        "run", nargs="?", help="run id (or a unique prefix), or a JSON report; omitted: choose"
    )
    replay.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=DEFAULT_DIR,
        help="cache location (default: %(default)s)",
    )
    commands.add_commands(sub, _Parser)  # report, rerun, cache
    return parser


def _writer_settings(args: argparse.Namespace) -> WriterSettings:
    if args.attempts < 1:
        raise BadInput("--attempts must be at least 1")
    if args.probes < 1:
        raise BadInput("--probes must be at least 1")
    if args.model_timeout <= 0:
        raise BadInput("--model-timeout must be positive")
    if (
        args.write_tests
        and os.path.exists(args.write_tests)
        and not os.path.isdir(args.write_tests)
    ):
        raise BadInput(f"--write-tests: not a directory: {args.write_tests}")
    return WriterSettings(
        writer=args.writer,
        stage2=args.stage2,
        attempts=args.attempts,
        probes=args.probes,
        write_tests=args.write_tests,
        llm=LLMSettings(
            base_url=args.base_url,
            model=args.model,
            timeout_s=args.model_timeout,
            price_in=args.price_in,
            price_out=args.price_out,
        ),
    )


def _settings(args: argparse.Namespace) -> RunSettings:
    if args.jobs is not None and args.jobs < 1:
        raise BadInput("-j must be at least 1")
    if args.timeout <= 0:
        raise BadInput("--timeout must be positive")
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:
        raise BadInput("--fail-under must be between 0 and 100")
    if args.sanitize and args.mode != "compiled" and not args.compare_modes:
        raise BadInput("--sanitize needs --mode compiled (or --compare-modes)")
    if args.backend != "contree" and (args.contree_image or args.contree_url):
        raise BadInput("--contree-image and --contree-url need --backend contree")
    return RunSettings(
        kernel_path=args.file,
        tests=tuple(args.tests),
        operators=args.operators,
        changed_since=args.changed_since,
        # contree: None lets the sandbox pick (remote runs cost no local cores)
        workers=args.jobs or (None if args.backend == "contree" else os.cpu_count() or 1),
        timeout_s=args.timeout,
        timeout_factor=args.timeout_factor,
        timeout_base_s=args.timeout_base,
        memory_mb=args.memory_mb,
        seed=args.seed,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        fail_under=args.fail_under,
        writers=_writer_settings(args),
        backend=args.backend,
        contree_image=args.contree_image,
        mode=args.mode,
        project_root=args.project_root,
        select_tests=not args.no_select,
        all_configs=args.all_configs,
        sanitize=args.sanitize,
        compare_modes=args.compare_modes,
        compile_check=args.compile_check or args.compile_target is not None,
        compile_targets=(
            parse_targets(args.compile_target)
            if args.compile_target is not None
            else DEFAULT_TARGETS
        ),
        diff_oracle=args.diff_oracle,
    )


def _sandbox(settings: RunSettings, args: argparse.Namespace):
    """The backend the flags ask for (contree-sdk is imported only when used)."""
    if settings.backend == "contree":
        from mutant_gate.engine.sandbox.contree import ContreeSandbox

        box = ContreeSandbox(
            settings.workers, settings.mode, image=settings.contree_image, base_url=args.contree_url
        )
        box.start()  # its image's torch/triton versions key the cache
        return box
    return LocalSandbox(settings.workers, settings.mode)


def _modes_summary(console: Console, modes: dict | None) -> None:
    """``--compare-modes``: every mutant whose verdict depends on the mode, with both reasons."""
    if not modes:
        return
    first, second = modes["compared"]
    if "skipped" in modes:
        console.print(f"[yellow]modes not compared: {modes['skipped']}[/]", highlight=False)
        return
    total = modes["agree"] + len(modes["disagreements"])
    console.print(
        f"modes: {first} and {second} agree on {modes['agree']}/{total} mutants", highlight=False
    )
    for d in modes["disagreements"]:
        a, b = d[first], d[second]
        console.print(
            f"  [bold yellow]{d['id']}[/] {d['operator']} line {d['line']}: "
            f"{first} {a['verdict']} ({a['by'] or a['reason']}), "
            f"{second} {b['verdict']} ({b['by'] or b['reason']})",
            highlight=False,
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
    _modes_summary(console, report.get("modes"))
    console.print(
        f"score: [bold]{s['killed']}/{s['total']}[/] killed, raw {raw}, adjusted {adjusted} "
        f"(excluded: {excluded})",
        highlight=False,
    )
    selection = report.get("selection")
    if selection and selection.get("mutants"):
        n, suite = selection["mutants"], selection["suite_cases"]
        console.print(
            f"test selection: {selection['cases_run']} test cases for {n} mutants "
            f"({selection['cases_run'] / n:.1f} per mutant, fastest first, stopping at the "
            f"first kill); the full suite: {suite} per mutant ({suite * n} in all)",
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


def _writer_line(event) -> str | None:
    """One log line (rich markup) for a writer's event."""
    if isinstance(event, WriterNote):
        style = {"error": "bold red", "warning": "yellow"}.get(event.level, "dim")
        where = f" {event.mutant_id}" if event.mutant_id else ""
        return f"[{style}]{event.writer}{where}: {escape(event.message)}[/]"
    if isinstance(event, TestAccepted):
        kills = f", kills {', '.join(event.kills)}" if event.kills else ""
        return f"[green]{event.origin}: accepted {event.file}[/] ({len(event.tests)} tests{kills})"
    if isinstance(event, TestRejected):
        where = f" for {event.mutant_id}" if event.mutant_id else ""
        return (
            f"[yellow]{event.origin}: rejected attempt {event.attempt}{where}:[/] "
            f"{escape(event.reason)}"
        )
    if isinstance(event, MutantUpdated):
        o = event.outcome
        by = f" by {o.by}" if o.by else ""
        return f"[{VERDICT_STYLE.get(o.verdict.value, 'dim')}]{event.mutant.id} {o.verdict.value}{by}[/]"
    return None


def _writers_summary(report: dict) -> list[str]:
    """What the writers added: accepted tests with their kills, the model's tokens."""
    lines = []
    for t in report.get("tests", []):
        if t.get("origin") in ("stage1", "stage2", "probe"):
            kills = ", ".join(t["kills"]) or "nothing"
            lines.append(
                f"[green]{t['origin']}[/] {t['file']}::{t['name'].split('::')[-1]} kills {kills}"
            )
    claims = [
        (m["id"], c)
        for m in report["mutants"]
        if m["verdict"] == "survived"
        for c in m.get("claims", [])
    ]
    for mid, c in claims:
        lines.append(f"[yellow]claim[/] {mid} {c['claim']} by {c['by']}: {escape(c['reason'])}")
    tokens = _tokens_line(report)
    if tokens:
        lines.append(tokens)
    return lines


def _tokens_line(report: dict) -> str | None:
    tokens = report.get("tokens") or {}
    if not tokens.get("calls"):
        return None
    cost = tokens.get("cost_usd")
    money = f"~${cost:.4f}" if cost is not None else "cost unknown (--price-in/--price-out)"
    return (
        f"model {tokens.get('model')}: {tokens['calls']} calls ({tokens.get('cached_calls', 0)} "
        f"from cache), {tokens.get('prompt', 0):,} prompt + {tokens.get('completion', 0):,} "
        f"completion tokens, {money}"
    )


def _open_store(directory: str, console: Console) -> Store | None:
    """The cache, or None (said plainly) when it exists but cannot be used."""
    try:
        return Store(directory)
    except CacheUnavailable as exc:
        if exc.fatal:
            raise
        console.print(f"[yellow]warning: {exc}; running without the cache[/]", highlight=False)
        return None


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    settings = _settings(args)
    commands.check_report_paths(args)
    if args.config:
        console.print(f"[dim]configuration: {args.config}[/]", highlight=False)
    store = _open_store(settings.cache_dir, console) if settings.use_cache else None
    sandbox = _sandbox(settings, args)
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
    run = Run(settings, sandbox, store)
    if settings.compare_modes:
        other = "compiled" if settings.mode == "interpret" else "interpret"
        run.other_sandbox = LocalSandbox(settings.workers, other)
    events = run.events()
    baselines = 0
    verdicts: dict[str, str] = {}
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
                elif isinstance(event, OwnCheckJudged):
                    if not event.asserts:
                        progress.console.print(
                            f"[bold yellow]note: {event.note}[/]; {event.evidence}",
                            highlight=False,
                        )
                elif isinstance(event, BaselineStarted):
                    pass
                elif isinstance(event, BaselineFinished):
                    src = "cached" if event.cached else f"{event.result.duration_s:.2f} s"
                    what = "its own check" if not baselines else "its own check + written tests"
                    baselines += 1
                    progress.console.print(
                        f"original passes {what} ({src}); mutant timeout "
                        f"{event.mutant_timeout_s:.1f} s",
                        highlight=False,
                    )
                    progress.update(task, description="mutants")
                elif isinstance(event, MutantFinished):
                    v = event.outcome.verdict.value
                    counts[v] = counts.get(v, 0) + 1
                    verdicts[event.mutant.id] = v
                    text = " ".join(
                        f"[{VERDICT_STYLE[k]}]{k} {n}[/]" for k, n in sorted(counts.items())
                    )
                    progress.update(task, completed=event.done, counts=text)
                elif isinstance(event, CheckFinished):
                    progress.console.print(check_lines.event_line(event), highlight=False)
                elif isinstance(event, WriterNote | TestAccepted | TestRejected | MutantUpdated):
                    if isinstance(event, MutantUpdated) and event.mutant.id in verdicts:
                        old, new = verdicts[event.mutant.id], event.outcome.verdict.value
                        counts[old] -= 1
                        counts[new] = counts.get(new, 0) + 1
                        verdicts[event.mutant.id] = new
                        text = " ".join(
                            f"[{VERDICT_STYLE[k]}]{k} {n}[/]"
                            for k, n in sorted(counts.items())
                            if n
                        )
                        progress.update(task, counts=text)
                    line = _writer_line(event)
                    if line:
                        progress.console.print(line, highlight=False)
                elif isinstance(event, RunFinished):
                    report = event.report
    finally:
        sandbox.close()  # first: jobs in flight end at once instead of running out their time
        if run.other_sandbox is not None:
            run.other_sandbox.close()
        events.close()
        if store is not None:
            store.close()
            if store.write_failures:
                console.print(
                    f"[yellow]warning: {len(store.write_failures)} cache writes failed "
                    f"({store.write_failures[-1]}); those results were not saved[/]",
                    highlight=False,
                )
    assert report is not None
    _summary(console, report)
    for line in _writers_summary(report):
        console.print(line, highlight=False)
    for line in check_lines.summary_lines(report):
        console.print(line, highlight=False)
    if args.write_tests:
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


def cmd_tui(args: argparse.Namespace) -> int:
    from mutant_gate.tui.app import run_live  # Textual is imported for the explorer only

    settings = _settings(args)
    return run_live(settings, json_path=args.json, sandbox_factory=lambda s: _sandbox(s, args))


def cmd_replay(args: argparse.Namespace) -> int:
    from mutant_gate.tui.app import run_replay

    return run_replay(commands.latest_to_id(args.run, args.cache_dir), args.cache_dir)


def main(argv: list[str] | None = None) -> int:
    console = Console(stderr=False)
    err = Console(stderr=True)
    try:
        parser = build_parser()
        args = apply_config(parser, parser.parse_args(argv), argv)
        if args.command in commands.COMMANDS:
            return commands.COMMANDS[args.command](args, console)
        if args.command == "run":
            return cmd_run(args, console)
        if args.command == "tui":
            return cmd_tui(args)
        if args.command == "replay":
            return cmd_replay(args)
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
