"""``mutant-gate accept RUN ID... --reason TEXT``: accept survivors of a cached run.

The entries go to the accepted-survivors file (``--accepted PATH``; else ``accepted`` of
the current directory's ``[tool.mutant-gate]``; else ``mutant-gate-baseline.toml`` here),
which ``run --accepted`` reads (``engine/accepted.py`` holds the format). The old
spellings (``baseline add``, ``--baseline``, the ``baseline`` key) still work and say once
that they are old.
"""

from __future__ import annotations

import argparse

from rich.console import Console

from mutant_gate.cache import DEFAULT_DIR
from mutant_gate.cli.config import Renamed, deprecated
from mutant_gate.engine import session
from mutant_gate.engine.errors import EXIT_OK, BadInput
from mutant_gate.engine.settings import DEFAULT_BASELINE


def _say(console: Console, text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def _row(report: dict, ref: str) -> dict:
    rows = report.get("mutants") or []
    found = [r for r in rows if r.get("id") == ref] or [
        r for r in rows if str(r.get("id", "")).startswith(ref)
    ]
    if not found:
        raise BadInput(f"run {report.get('run_id')} has no mutant {ref!r}")
    if len(found) > 1:
        raise BadInput(f"mutant {ref!r} is ambiguous in run {report.get('run_id')}")
    return found[0]


def accept_survivors(args: argparse.Namespace, console: Console) -> int:
    if not args.reason or not args.reason.strip():
        raise BadInput("accept: --reason must say why the survivor may stay")
    from mutant_gate.engine import accepted  # the file's format: only for `accept`

    path = args.accepted or DEFAULT_BASELINE
    report = session.find_report(args.run, args.cache_dir or DEFAULT_DIR)
    rows = [_row(report, ref) for ref in dict.fromkeys(args.mutant)]
    added, present = accepted.accept(report, rows, args.reason, path)
    if added:
        n = len(added)
        _say(
            console,
            f"accepted {n} survivor{'s' if n != 1 else ''} in {path}: "
            + ", ".join(f"{e.id} ({e.operator}, {e.function} line {e.line})" for e in added)
            + "; `run --accepted` leaves them out of the adjusted score while their "
            "functions are unchanged",
        )
    for entry in present:
        _say(console, f"{entry.id} is already accepted in {path} (same code): unchanged")
    return EXIT_OK


def add_commands(sub, parser_class: type[argparse.ArgumentParser]) -> None:
    accept = sub.add_parser(
        "accept", help="accept survivors of a cached run for the CI gate (--accepted)"
    )
    _accept_arguments(accept)
    # the old spelling: `baseline add`, said once to be old
    baseline = sub.add_parser("baseline", help="deprecated: `accept`")
    verbs = baseline.add_subparsers(
        dest="baseline_command", required=True, parser_class=parser_class
    )
    _accept_arguments(verbs.add_parser("add", help="deprecated: `accept`"))


def _accept_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="run id, unique prefix, `latest`, or a JSON report file")
    parser.add_argument("mutant", nargs="+", help="survivor id (or a unique prefix)")
    parser.add_argument("--reason", required=True, help="why the survivor may stay")
    parser.add_argument(
        "--accepted",
        metavar="PATH",
        help="the accepted-survivors file (default: accepted of [tool.mutant-gate], else "
        f"{DEFAULT_BASELINE})",
    )
    parser.add_argument(
        "--baseline", dest="accepted", action=Renamed, new="--accepted", help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help=f"cache location (default: cache-dir of [tool.mutant-gate], else {DEFAULT_DIR})",
    )


def cmd_baseline(args: argparse.Namespace, console: Console) -> int:
    if args.command == "baseline":
        deprecated("`mutant-gate baseline add`", "`mutant-gate accept`")
    return accept_survivors(args, console)
