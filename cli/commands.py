"""Commands around a run: ``report``, ``rerun``, ``cache``; report flags for ``run``.

``cli/main.py`` only registers these (``add_run_options``, ``add_report_options``,
``add_commands``) and dispatches through ``COMMANDS``. A RUN argument is a run id, a
unique prefix of one, ``latest``, or (where a report is enough) a JSON report file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from collections.abc import Callable
from dataclasses import replace

from rich.console import Console
from rich.markup import escape

from mutant_gate.cache import DEFAULT_DIR, Store
from mutant_gate.cli.check_lines import counted
from mutant_gate.engine import formats, session
from mutant_gate.engine.errors import EXIT_OK, EXIT_UNDER_THRESHOLD, BadInput
from mutant_gate.engine.formats.words import gate, percent, score_phrases
from mutant_gate.engine.sandbox.backends import DEFAULT, backend
from mutant_gate.engine.settings import KEY_VARIABLES, api_key
from mutant_gate.engine.vocabulary import by_words

#: ``--stryker PATH``... -> format
REPORT_FLAGS = {"stryker": "stryker", "junit": "junit", "markdown": "markdown", "html": "html"}
EXPORT_FORMAT = "mutant-gate-run"
EXPORT_VERSION = 1
#: --out suffix -> format, when --format is not given
SUFFIXES = {".html": "html", ".htm": "html", ".xml": "junit", ".md": "markdown"}


def say(console: Console, text: str) -> None:
    """One plain line (no markup, no wrapping: ids and paths stay whole)."""
    console.print(text, highlight=False, markup=False, soft_wrap=True)


# -- options on `run` ---------------------------------------------------------------
def add_run_options(run: argparse.ArgumentParser) -> None:
    """Options `run` and `tui` share: the CI gate's scope and configuration."""
    run.add_argument(
        "--changed-since",
        metavar="REF",
        help="mutate only jit functions whose lines changed since this git ref "
        "(working tree against REF, e.g. origin/main)",
    )
    run.add_argument(
        "--config",
        metavar="PATH",
        help="pyproject.toml to read [tool.mutant-gate] from (default: found from the "
        "kernel file's directory upward, then the current directory's)",
    )
    run.add_argument(
        "--no-config", action="store_true", help="ignore [tool.mutant-gate] configuration"
    )


def add_report_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("reports (besides --json)")
    group.add_argument(
        "--stryker", metavar="PATH", help="Stryker mutation-testing-report-schema JSON"
    )
    group.add_argument("--junit", metavar="PATH", help="JUnit XML: one testcase per mutant")
    group.add_argument("--markdown", metavar="PATH", help="Markdown summary for a PR comment")
    group.add_argument("--html", metavar="PATH", help="one self-contained offline HTML page")


def check_report_paths(args: argparse.Namespace) -> None:
    """Before a run: every report path can be written (else exit 2 now, not after)."""
    for flag in ("json", *REPORT_FLAGS):
        path = getattr(args, flag, None)
        if path:
            formats.check_writable(path, f"--{flag}")


def write_reports(report: dict, args: argparse.Namespace, console: Console) -> None:
    """The formats asked for by ``--stryker``/``--junit``/``--markdown``/``--html``."""
    for flag, fmt in REPORT_FLAGS.items():
        path = getattr(args, flag, None)
        if path:
            formats.write(report, fmt, path)
            console.print(
                f"{fmt} report written to {path}", highlight=False, soft_wrap=True, markup=False
            )


def after_run(report: dict, args: argparse.Namespace, console: Console) -> None:
    """After `run`'s summary, before its score: what --changed-since left out, and the
    reports written."""
    changed = report.get("changed_since")
    if isinstance(changed, dict):
        functions = ", ".join(changed.get("functions") or []) or "none"
        left = ", ".join(changed.get("unchanged") or []) or "none"
        say(
            console,
            f"changed since {changed.get('ref')}: {functions}; not mutated (unchanged): {left}",
        )
    write_reports(report, args, console)


#: ``--gate-on``'s choices: the user's own tests' score, or with the written tests
GATE_CHOICES = ("yours", "written")


def gate_exit(
    report: dict, fail_under: float | None, console: Console, gate_on: str = "yours"
) -> int:
    """Exit code for ``--fail-under`` on the score ``gate_on`` names, saying by how much
    it falls short."""
    if fail_under is None:
        return EXIT_OK
    settings = {**(report.get("settings") or {}), "fail_under": fail_under, "gate_on": gate_on}
    report = {**report, "settings": settings}
    passed, sentence = gate(report)
    if passed:
        console.print(f"[green]{escape(sentence)}[/]", highlight=False, soft_wrap=True)
        return EXIT_OK
    console.print(f"[bold red]{escape(sentence)}[/]", highlight=False, soft_wrap=True)
    return EXIT_UNDER_THRESHOLD


# -- finding a run ----------------------------------------------------------------------
def cache_dir(args: argparse.Namespace) -> str:
    return args.cache_dir or DEFAULT_DIR


# -- mutant-gate report -------------------------------------------------------------------
def cmd_report(args: argparse.Namespace, console: Console) -> int:
    if args.site:
        return report_site(args, console)
    if len(args.run) != 1:
        raise BadInput("report: one RUN per report (several runs go into a --site DIR)")
    report = refresh_predictions(session.find_report(args.run[0], cache_dir(args)))
    fmt = args.format
    if fmt is None:
        suffix = os.path.splitext(args.out or "")[1].lower()
        fmt = SUFFIXES.get(suffix, "json")
    if args.out and args.out != "-":
        formats.check_writable(args.out, "--out")
        formats.write(report, fmt, args.out)
        Console(stderr=True).print(
            f"{fmt} report of run {report.get('run_id')} written to {args.out}",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    else:
        console.file.write(formats.render(report, fmt))
        console.file.flush()
    return EXIT_OK


def refresh_predictions(report: dict) -> dict:
    """The report as faces write it out (``session.exported``): a prediction file edited
    after the run stored it is a hash mismatch, said here and in the report."""
    report, said = session.exported(report)
    if said:
        Console(stderr=True).print(said, highlight=False, soft_wrap=True, markup=False)
    return report


def report_site(args: argparse.Namespace, console: Console) -> int:
    """``report RUN... --site DIR``: the replay site over those runs (``latest``: the
    newest run of each kernel file)."""
    from mutant_gate.engine.formats.site import write_site

    if args.format is not None or args.out is not None:
        raise BadInput("report: --site DIR writes a folder; leave out --format and --out")
    reports = [refresh_predictions(r) for r in session.site_reports(args.run, cache_dir(args))]
    written = write_site(reports, args.site)
    files = sorted({(r.get("kernel") or {}).get("path") for r in reports}, key=str)
    say(
        console,
        f"site of {counted(len(reports), 'run')} ({counted(len(files), 'kernel file')}) "
        f"written to {written[0]}; "
        "open it in a browser, no server needed",
    )
    return EXIT_OK


# -- mutant-gate rerun ------------------------------------------------------------------------
def cmd_rerun(args: argparse.Namespace, console: Console) -> int:
    from mutant_gate.cli.reporter import RerunReporter  # the engine's events: only when run
    from mutant_gate.cli.written import say_written
    from mutant_gate.engine.rerun import recorded_paths, select
    from mutant_gate.engine.settings import settings_from_json

    if not args.survivors and not args.mutant:
        raise BadInput("rerun: say what to judge again: --survivors and/or --mutant ID")
    if args.jobs is not None and args.jobs < 1:
        raise BadInput("-j must be at least 1")
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:
        raise BadInput("--fail-under must be between 0 and 100")
    check_report_paths(args)
    directory = cache_dir(args)
    report, took = session.rerun_report(args.run, directory, args.file, tuple(args.tests))
    if took:  # which run `latest` took, where there was a choice
        say(console, took)
    chosen = select(report["mutants"], args.survivors, args.mutant)
    if not chosen:
        console.print(
            f"run {report.get('run_id')} has no survivors: nothing to judge again",
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_OK
    kernel, tests = recorded_paths(report, args.tests)
    recorded = report.get("settings") or {}
    settings = settings_from_json(
        recorded,
        kernel_path=kernel,
        tests=tests,
        cache_dir=directory,
        use_cache=True,
        changed_since=None,
        workers=args.jobs
        or (None if backend(recorded.get("backend") or DEFAULT).remote else os.cpu_count() or 1),
        fail_under=args.fail_under if args.fail_under is not None else recorded.get("fail_under"),
        gate_on=args.gate_on or recorded.get("gate_on") or "yours",
    )
    if args.write_tests is not None:  # else the run's folder
        writers = replace(settings.writers, write_tests=args.write_tests or None)
        settings = replace(settings, writers=writers)
    session.require_backend(settings.backend)  # the run's
    if args.writer == "llm":
        session.require("openai", "--writer llm")
        if api_key() is None:
            raise BadInput(f"--writer llm needs a model key: set {' or '.join(KEY_VARIABLES)}")
    reporter = RerunReporter(console, report.get("run_id"), settings.tests, args.quiet)
    # contree: the run's image and endpoint
    with session.Session(settings, warn=lambda text: say(console, text)) as run:
        for event in run.rerun(report, chosen, force=args.force, writer=args.writer):
            reporter.handle(event)
    new = reporter.report
    assert new is not None
    for change in new["rerun"]["mutants"]:
        style = "green" if change["now"] == "killed" else "red"
        moved = "still" if change["was"] == change["now"] else f"{change['was']} ->"
        by = f" by {by_words(change['by'])}" if change["by"] else ""
        console.print(
            f"{change['id']}: {moved} [{style}]{change['now']}[/]{escape(by)}",
            highlight=False,
            soft_wrap=True,
        )
    say_written(run, settings.writers.write_tests, console)  # the tests it accepted
    old, now = report["score"], new["score"]
    mine = "your tests" if "with_written" in now else "score"
    with_written = score_phrases(now)[1]
    console.print(
        f"{mine}: [bold]{now['killed']}/{now['total']}[/] killed, adjusted "
        f"{percent(now['adjusted'])} (was {percent(old.get('adjusted'))})"
        + (f"; {with_written}" if with_written else "")
        + f"; run {new['run_id']} saved (`mutant-gate replay {new['run_id']}`)",
        highlight=False,
        soft_wrap=True,
    )
    if args.json:
        formats.write(new, "json", args.json)
        console.print(
            f"report written to {args.json}", highlight=False, soft_wrap=True, markup=False
        )
    write_reports(new, args, console)
    return gate_exit(new, settings.fail_under, console, settings.gate_on)


# -- mutant-gate cache ------------------------------------------------------------------------
def _when(record: dict) -> str:
    saved = record.get("saved_at")
    return time.strftime("%m-%d %H:%M", time.localtime(saved)) if saved else "?"


def cache_ls(args: argparse.Namespace, console: Console) -> int:
    directory = cache_dir(args)
    if not os.path.isdir(directory):
        console.print(f"no cache at {directory}", highlight=False, soft_wrap=True)
        return EXIT_OK
    with session.open_cache(directory) as store:
        ids = store.list_runs()
        records = [(i, store.get_run(i) or {}) for i in ids]
        counts = store.counts()
    rows = [("RUN", "KERNEL", "MUTANTS", "KILLED", "ADJUSTED", "SAVED", "STATE")]
    for run_id, record in records:
        report = record.get("report") or {}
        score = report.get("score") or {}
        state = "finished" if report else "unfinished"
        if report.get("rerun"):
            state = f"rerun of {report['rerun'].get('of')}"
        elif report and not report.get("complete", True):
            state = "incomplete"
        rows.append(
            (
                run_id,
                os.path.basename(record.get("kernel") or report.get("kernel", {}).get("path", "?")),
                str(len(report.get("mutants", []))) if report else "-",
                str(score.get("killed", "-")),
                percent(score.get("adjusted")) if report else "-",
                _when(record),
                state,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    say(console, f"runs in {os.path.abspath(directory)}")
    for r in rows:
        cells = [
            c.rjust(w) if 2 <= i <= 4 else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        say(console, "  ".join(cells).rstrip())
    console.print(
        f"{counts['runs']} runs, {counts['results']} job results, {counts['replies']} model "
        "replies",
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK


def cache_show(args: argparse.Namespace, console: Console) -> int:
    record = session.find_record(args.run, cache_dir(args))
    if args.json:
        console.file.write(json.dumps(record, indent=2) + "\n")
        return EXIT_OK
    report = record.get("report") or {}
    out = [f"run {record.get('run_id')}  (saved {_when(record)})"]
    kernel = record.get("kernel") or report.get("kernel", {}).get("path")
    out.append(f"kernel: {kernel}")
    if not report:
        out.append("unfinished: no report yet (the same `mutant-gate run` resumes it)")
        say(console, "\n".join(out))
        return EXIT_OK
    settings = report.get("settings") or {}
    writers = settings.get("writers") or {}
    toolchain = report.get("toolchain") or {}
    score = report["score"]
    out += [
        f"toolchain: triton {toolchain.get('triton')}, torch {toolchain.get('torch')}, "
        f"{toolchain.get('mode')} mode",
        f"operators: {settings.get('operators') or 'all'}; writer: {writers.get('writer')}"
        + (", stage 2" if writers.get("stage2") else "")
        + (f"; changed since {settings['changed_since']}" if settings.get("changed_since") else ""),
        "; ".join(p for p in score_phrases(score) if p)
        + "; "
        + ", ".join(f"{k} {v}" for k, v in sorted((score.get("by_verdict") or {}).items())),
    ]
    if report.get("rerun"):
        out.append(f"rerun of {report['rerun'].get('of')}")
    for row in report.get("mutants", []):
        if row.get("verdict") in ("survived", "error", "pending"):
            out.append(
                f"  {row['verdict']:<9} {row['id']} {row.get('operator')} in "
                f"{row.get('function')} line {row.get('line')}: {row.get('before')} -> "
                f"{row.get('after')}"
            )
    out.append(
        f"replay: mutant-gate replay {record.get('run_id')}; report: mutant-gate report "
        f"{record.get('run_id')} --format html --out report.html"
    )
    say(console, "\n".join(out))
    return EXIT_OK


def cache_clear(args: argparse.Namespace, console: Console) -> int:
    directory = cache_dir(args)
    if not os.path.isdir(directory):
        console.print(f"no cache at {directory}: nothing to clear", highlight=False, soft_wrap=True)
        return EXIT_OK
    if args.run:
        if args.runs or args.results or args.replies:
            raise BadInput("cache clear: --run ID removes those runs only; leave out --runs, "
                           "--results and --replies")  # fmt: skip
        gone_ids = session.delete_runs(args.run, directory)
        console.print(
            f"removed run {', '.join(gone_ids)} from {directory} (job results and model "
            "replies stay: other runs share them)",
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_OK
    kinds = tuple(k for k in ("runs", "results", "replies") if getattr(args, k)) or (
        "runs",
        "results",
        "replies",
    )
    with session.open_cache(directory) as store:
        gone = store.clear(kinds)
    console.print(
        "removed " + ", ".join(f"{n} {k}" for k, n in gone.items()) + f" from {directory}",
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK


def _open_text(path: str, mode: str):
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def cache_export(args: argparse.Namespace, console: Console) -> int:
    record = session.find_record(args.run, cache_dir(args))
    if not record.get("report"):
        raise BadInput(f"run {record.get('run_id')} is unfinished: nothing to export yet")
    data = {"format": EXPORT_FORMAT, "version": EXPORT_VERSION, "record": record}
    if args.file == "-":
        console.file.write(json.dumps(data) + "\n")
        return EXIT_OK
    formats.check_writable(args.file, "export")
    try:
        with _open_text(args.file, "w") as fh:
            json.dump(data, fh)
    except OSError as exc:
        raise BadInput(f"cannot write {args.file}: {exc.strerror}") from None
    console.print(
        f"run {record['run_id']} exported to {args.file}", highlight=False, soft_wrap=True
    )
    return EXIT_OK


def read_export(path: str) -> dict:
    """The run record in an export file (or a plain JSON report, wrapped as a record)."""
    try:
        with _open_text(path, "r") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise BadInput(f"no such file: {path}") from None
    except (OSError, ValueError, EOFError) as exc:
        raise BadInput(f"{path}: not a mutant-gate export ({exc})") from None
    if isinstance(data, dict) and data.get("format") == EXPORT_FORMAT:
        if data.get("version") != EXPORT_VERSION:
            raise BadInput(f"{path}: export version {data.get('version')} is not supported")
        record = data.get("record")
    elif isinstance(data, dict) and isinstance(data.get("mutants"), list):
        record = {"run_id": data.get("run_id"), "settings": data.get("settings"), "report": data}
        record["kernel"] = (data.get("kernel") or {}).get("path")
    else:
        raise BadInput(f"{path}: not a mutant-gate export or JSON report")
    report = record.get("report") if isinstance(record, dict) else None
    if (
        not isinstance(report, dict)
        or not isinstance(record.get("run_id"), str)
        or not isinstance(report.get("mutants"), list)
    ):
        raise BadInput(f"{path}: the run in it has no report")
    return record


def cache_import(args: argparse.Namespace, console: Console) -> int:
    record = read_export(args.file)
    record = {k: v for k, v in record.items() if k != "saved_at"}
    directory = cache_dir(args)
    with Store(directory) as store:
        existed = store.get_run(record["run_id"]) is not None
        store.put_run(record["run_id"], record)
        failed = store.write_failures
    if failed:
        raise BadInput(f"cannot write to the cache at {directory}: {failed[-1]}")
    where = f" --cache-dir {directory}" if directory != DEFAULT_DIR else ""
    say(
        console,
        f"{'replaced' if existed else 'imported'} run {record['run_id']} in {directory}; "
        f"open it with `mutant-gate replay {record['run_id']}{where}`",
    )
    return EXIT_OK


CACHE_COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "ls": cache_ls,
    "show": cache_show,
    "clear": cache_clear,
    "export": cache_export,
    "import": cache_import,
}


def cmd_cache(args: argparse.Namespace, console: Console) -> int:
    return CACHE_COMMANDS[args.cache_command](args, console)


# -- registration ---------------------------------------------------------------------------
def _cache_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help=f"cache location (default: cache-dir of [tool.mutant-gate], else {DEFAULT_DIR})",
    )


def add_commands(sub, parser_class: type[argparse.ArgumentParser]) -> None:
    report = sub.add_parser("report", help="write a report of a cached run in any format")
    report.add_argument(
        "run",
        nargs="+",
        help="run id, unique prefix, `latest`, or a JSON report file; several with --site "
        "(there `latest` is the newest run of each kernel file)",
    )
    report.add_argument(
        "--format",
        choices=tuple(formats.FORMATS),
        help="json | stryker | junit | markdown | html (default: from --out's suffix, else json)",
    )
    report.add_argument("--out", metavar="PATH", help="write here (default: standard output)")
    report.add_argument(
        "--site",
        metavar="DIR",
        help="write the replay site here: one offline index.html with a grid per kernel file",
    )
    _cache_dir_option(report)

    rerun = sub.add_parser("rerun", help="judge a cached run's survivors (or chosen mutants) again")
    rerun.add_argument(
        "run",
        help="run id, unique prefix, `latest`, or a kernel file (its latest run); `latest` "
        "is the latest run of FILE, else of the kernel file the --tests import",
    )
    rerun.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="the kernel file whose run to take (`rerun latest FILE`)",
    )
    rerun.add_argument(
        "--survivors", action="store_true", help="every mutant that survived the run"
    )
    rerun.add_argument(
        "--mutant", metavar="ID", action="append", default=[], help="this mutant (repeatable)"
    )
    rerun.add_argument(
        "--tests",
        metavar="PATH",
        action="append",
        default=[],
        help="pytest file to add to the run's (repeatable)",
    )
    rerun.add_argument("-j", "--jobs", type=int, metavar="N", help="sandbox workers")
    rerun.add_argument(
        "--force",
        action="store_true",
        help="run every job in the sandbox even when a result is cached (results and the "
        "new run are still stored)",
    )
    rerun.add_argument("--json", metavar="PATH", help="write the new JSON report here")
    rerun.add_argument(
        "--fail-under",
        type=float,
        metavar="PCT",
        help="exit 1 below this adjusted score (your tests', unless --gate-on written)",
    )
    rerun.add_argument(
        "--gate-on",
        choices=GATE_CHOICES,
        help="the score --fail-under gates on: yours or written (default: the run's)",
    )
    rerun.add_argument(
        "--writer",
        choices=("probe", "llm"),
        help="then write tests for the chosen survivors: the probe writer (no model), or "
        "the probe and then the model (stage 2) on those it left",
    )
    rerun.add_argument(
        "--write-tests",
        metavar="DIR",
        help="the folder the tests it writes go to (default: the run's, mutant-gate-tests)",
    )
    rerun.add_argument(
        "--no-write-tests",
        dest="write_tests",
        action="store_const",
        const="",
        help="write no tests to disk (they stay in the cache)",
    )
    rerun.add_argument("-q", "--quiet", action="store_true", help="no line per mutant")
    add_report_options(rerun)
    _cache_dir_option(rerun)

    cache = sub.add_parser("cache", help="list, show, clear, export and import cached runs")
    verbs = cache.add_subparsers(dest="cache_command", required=True, parser_class=parser_class)
    _cache_dir_option(verbs.add_parser("ls", help="list the cached runs"))
    show = verbs.add_parser("show", help="one run: settings, score, survivors")
    show.add_argument("run", help="run id, unique prefix or `latest`")
    show.add_argument("--json", action="store_true", help="print the whole run record")
    _cache_dir_option(show)
    clear = verbs.add_parser("clear", help="remove cached entries (default: all of them)")
    clear.add_argument("--runs", action="store_true", help="run records only")
    clear.add_argument("--results", action="store_true", help="sandbox job results only")
    clear.add_argument("--replies", action="store_true", help="model replies only")
    clear.add_argument(
        "--run", metavar="ID", action="append", default=[], help="this run only (repeatable)"
    )
    _cache_dir_option(clear)
    export = verbs.add_parser("export", help="write one run to a file (.gz: compressed)")
    export.add_argument("run", help="run id, unique prefix or `latest`")
    export.add_argument("file", help="where to write it (`-`: standard output)")
    _cache_dir_option(export)
    imp = verbs.add_parser("import", help="add an exported run (or a JSON report) to the cache")
    imp.add_argument("file", help="an export file, or a JSON report from --json")
    _cache_dir_option(imp)


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "report": cmd_report,
    "rerun": cmd_rerun,
    "cache": cmd_cache,
}

__all__ = [
    "COMMANDS",
    "add_commands",
    "add_report_options",
    "add_run_options",
    "check_report_paths",
    "GATE_CHOICES",
    "gate_exit",
    "write_reports",
]
