"""``mutant-gate``: the argparse parser, the dispatch to each command, exit codes.

``run`` is ``cli/run.py``; ``report``, ``rerun`` and ``cache`` are ``cli/commands.py``;
``tui`` and ``replay`` import the Textual explorer (``mutant_gate.tui``) only when used.
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
import threading
from typing import NoReturn

from rich.console import Console

from mutant_gate.cache import DEFAULT_DIR, CacheUnavailable
from mutant_gate.cli import accepted, commands, library, study
from mutant_gate.cli.config import Renamed, apply_config
from mutant_gate.cli.flags import DEFAULT_TESTS_DIR, run_settings
from mutant_gate.engine import session
from mutant_gate.engine.errors import EXIT_BAD_INPUT, EXIT_OK, BadInput
from mutant_gate.engine.sandbox.backends import BACKENDS
from mutant_gate.engine.sandbox.backends import DEFAULT as DEFAULT_BACKEND
from mutant_gate.engine.sandbox.local import SandboxStartError
from mutant_gate.engine.settings import DEFAULT_BASE_URL, DEFAULT_MODEL, WRITERS


class ArgumentError(BadInput):
    pass


class KernelPaths(argparse.Action):
    """``run PATH...``: the paths, and ``file`` (the first one, what one file's run reads)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, list(values))
        namespace.file = values[0] if values else None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        """One line, exit 2: ``main`` says ``mutant-gate: error:``, so the message names
        only the command below it (``run: argument --jobs: ...``)."""
        command = self.prog.removeprefix(PROG).strip()
        raise ArgumentError(f"{command}: {message}" if command else message)


PROG = "mutant-gate"
#: the width of output that is not a terminal: wide enough never to cut or wrap a line
LOG_WIDTH = 100_000


def make_console(stderr: bool = False) -> Console:
    """A console for standard output (or error). Not a terminal (a pipe, a file, a CI
    log): no width to fit, so lines and tables are written whole, never wrapped or cut
    to 80 columns, unless ``COLUMNS`` gives a width: then as a terminal that wide."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return Console(stderr=stderr, width=int(columns))
    return Console(stderr=stderr, width=LOG_WIDTH, soft_wrap=True)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Mutation testing for Triton kernels.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="mutate a kernel file and run its checks against every mutant")
    run.add_argument(
        "paths",
        nargs="*",
        action=KernelPaths,
        metavar="PATH",
        help="a .py file with @triton.jit kernels and its own check, or a library: files and "
        "directories (every .py below with a @triton.jit function), judged in one run",
    )
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
    run.add_argument(
        "--case-time",
        type=float,
        metavar="S",
        help="leave out the test cases slower than S seconds on the original (named in the "
        "report; in project mode each is stopped there, so a slow case costs S); in project "
        "mode, the cases the original fails are left out too",
    )
    run.add_argument(
        "--memory-mb",
        type=int,
        default=None,
        help="address space per sandbox job, in MB (default: the machine's memory less headroom, "
        "shared by the workers)",
    )
    run.add_argument(
        "--operators", metavar="LIST", help="operator/family names to use; -NAME excludes"
    )
    run.add_argument(
        "--tests",
        metavar="PATH",
        action="append",
        default=[],
        help="pytest file or directory to add (repeatable; a directory: the files `pytest "
        "DIR` collects); FILE::CASE runs only that case (a node id)",
    )
    run.add_argument(
        "--exclude",
        metavar="GLOB",
        action="append",
        default=[],
        help="a library run: leave out the kernel files whose path matches GLOB (repeatable)",
    )
    run.add_argument(
        "--shard",
        metavar="K/N",
        help="judge share K of N of the mutants (by id; CI jobs), joined by `mutant-gate merge`",
    )
    run.add_argument(
        "-k",
        dest="keyword",
        metavar="EXPR",
        help="pytest's -k for the --tests files: only cases whose names match EXPR run, "
        "for the original and every mutant (e.g. -k 'not large')",
    )
    run.add_argument(
        "-m",
        dest="marker",
        metavar="EXPR",
        help="pytest's -m for the --tests files: only cases whose marks match EXPR run",
    )
    run.add_argument(
        "--fail-under",
        type=float,
        metavar="PCT",
        help="exit 1 when the adjusted score of your tests (the own check, --tests, the "
        "project's tests) is below PCT (--gate-on written: with the tests mutant-gate wrote)",
    )
    run.add_argument(
        "--gate-on",
        choices=commands.GATE_CHOICES,
        default="yours",
        help="the score --fail-under gates on: yours (default: your own tests) or written "
        "(with the tests mutant-gate wrote)",
    )
    run.add_argument(
        "--accepted",
        metavar="PATH",
        help="accepted survivors (TOML, `mutant-gate accept` writes it): left out of "
        "the adjusted score while their code is unchanged",
    )
    run.add_argument(
        "--baseline", dest="accepted", action=Renamed, new="--accepted", help=argparse.SUPPRESS
    )
    run.add_argument(
        "--predict",
        metavar="FILE",
        help="predictions (TOML or JSON: expected verdict, by, oracle, compile per mutant id "
        "or operator+line), hashed and stored before anything runs, scored after",
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
        help="run every test case for every mutant (default: only the cases that launch "
        "its kernel, fastest first)",
    )
    run.add_argument(
        "--mode",
        choices=("auto", "interpret", "compiled"),
        default="auto",
        help="auto (default): compiled on a machine with a CUDA device, its mask, bound and "
        "offset survivors judged again in the interpreter; the interpreter elsewhere. "
        "interpret: Triton's interpreter on the CPU; compiled: the local CUDA device",
    )
    run.add_argument(
        "--interpreter",
        choices=("batched", "triton"),
        default="batched",
        help="who runs an interpreted launch's programs: batched (default): every program at "
        "once, falling back to Triton's loop where it cannot (the report says where and why); "
        "triton: Triton's own loop, one program after another, for comparison and as an "
        "escape hatch",
    )
    run.add_argument(
        "--no-poison",
        action="store_true",
        help="interpreter: let a masked tl.load without other= read 0 on masked-off lanes, "
        "as the interpreter does (default: NaN, or the integer maximum, for lanes a GPU "
        "leaves undefined, so a check that depends on them fails); compiled mode: let "
        "device memory from torch.empty hold what the allocator recycled (default: NaN or "
        "the integer maximum, torch's deterministic fill, so a verdict never hangs on it)",
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
        choices=tuple(BACKENDS),
        default=DEFAULT_BACKEND,
        help="where jobs run: "
        + ", ".join(f"{b.name}: {b.words}" for b in BACKENDS.values())
        + " (default: %(default)s)",
    )
    run.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="--backend ray: the cluster to join, or 'local' for a Ray of this machine "
        "started for the run (default: a running cluster, else a local one)",
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
        "--probe-time",
        type=float,
        default=None,
        metavar="S",
        help="the probe's time in seconds of sandbox jobs (default: 0.8 of what the "
        "mutants' jobs took; 0: no limit but --probes); every survivor's first inputs run regardless, "
        "and below 30 s (or S) every kind of input it never tried",
    )
    writers.add_argument(
        "--test-budget-factor",
        type=float,
        default=3.0,
        metavar="F",
        help="a written test may take F times the own check's time on the original "
        "(default 3; 0: no budget); a slower one goes back to the model with its time",
    )
    writers.add_argument(
        "--test-budget-min",
        type=float,
        default=2.0,
        metavar="S",
        help="the time budget of a written test is never under S seconds (default 2)",
    )
    writers.add_argument(
        "--probe-triggers",
        metavar="LIST",
        help="the probe's trigger kinds, comma-separated (default: all; see README)",
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
    writers.add_argument(  # before --write-tests: a config key names that one
        "--no-write-tests",
        dest="write_tests",
        action="store_const",
        const="",
        default=argparse.SUPPRESS,
        help="write no tests to disk (they stay in the cache)",
    )
    writers.add_argument(
        "--write-tests",
        metavar="DIR",
        default=DEFAULT_TESTS_DIR,
        help="the folder written tests go to, each runnable with plain pytest "
        "(default: %(default)s)",
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
        "--no-diff-oracle",
        dest="diff_oracle",
        action="store_false",
        help="do not compare survivors with the original: their kind is not checked",
    )
    # after --no-diff-oracle: the configuration's key `diff-oracle` is this on/off flag
    checks.add_argument(
        "--diff-oracle",
        action="store_true",
        default=True,
        help="run original and each survivor side by side and compare every tensor "
        "argument after every launch, sorting survivors into outputs differ (a test "
        "gap) and no difference observed (on by default)",
    )
    checks.add_argument(
        "--no-tolerance",
        dest="tolerance",
        action="store_false",
        help="do not name the closeness assertion that let each survivor through",
    )
    # after --no-tolerance: the configuration's key `tolerance` is this on/off flag
    checks.add_argument(
        "--tolerance",
        action="store_true",
        default=True,
        help="name the closeness assertion (assert_close, allclose, approx, ...) that let each "
        "survivor through, and check a tighter tolerance by running the test with it on the "
        "original and the survivor: hidden by tolerance (on by default; never changes a "
        "verdict)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    run.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also the timing, the probe's spend and per-survivor notes, the sandbox's "
        "details and the shims (all of them are in the JSON report)",
    )
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
    library.add_commands(sub, _Parser)  # merge
    accepted.add_commands(sub, _Parser)  # accept (and its old name, baseline add)
    study.add_commands(sub)
    return parser


def cmd_tui(args: argparse.Namespace) -> int:
    if library.wanted(args):
        raise BadInput(
            "tui: the explorer opens one kernel file; `mutant-gate run PATH...` judges a library"
        )
    session.require("textual", "the explorer")
    settings = run_settings(args)
    from mutant_gate.tui.app import run_live  # Textual is imported for the explorer only

    return run_live(settings, json_path=args.json, sandbox_factory=session.make_sandbox)


def cmd_replay(args: argparse.Namespace) -> int:
    session.require("textual", "the explorer")
    from mutant_gate.tui.app import run_replay

    return run_replay(args.run, args.cache_dir)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP: the run ends as on Ctrl-C (finished results stay cached)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum: int, _frame) -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the clean-up short
    raise Stopped(signum)


def stop_on_signals() -> dict:
    """SIGTERM and SIGHUP end a command the way Ctrl-C does (CI runners, ``timeout``,
    schedulers and closed terminals send them, often to this process alone). Returns
    the handlers it replaced."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP)}


def main(argv: list[str] | None = None) -> int:
    console = make_console()
    err = make_console(stderr=True)
    replaced: dict = {}
    try:
        parser = build_parser()
        args = apply_config(parser, parser.parse_args(argv), argv)
        if args.command in ("run", "tui"):
            library.require_paths(args)
        if args.command not in ("tui", "replay"):  # the explorer keeps Textual's handling
            replaced = stop_on_signals()
        if args.command == "study":
            return study.cmd_study(args, console)
        if args.command in ("accept", "baseline"):
            return accepted.cmd_baseline(args, console)
        if args.command == "merge":
            return library.cmd_merge(args, console)
        if args.command in commands.COMMANDS:
            return commands.COMMANDS[args.command](args, console)
        if args.command == "run":
            from mutant_gate.cli.run import cmd_run  # the engine: only when a run starts

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
    except KeyboardInterrupt as exc:
        how = f"stopped by {exc}" if isinstance(exc, Stopped) else "interrupted"
        err.print(
            f"mutant-gate: {how}; finished results are cached and the next run resumes",
            markup=False,
        )
        return 128 + exc.signum if isinstance(exc, Stopped) else 130
    finally:
        for sig, handler in replaced.items():
            signal.signal(sig, handler)
    return EXIT_OK


def entry() -> None:
    leave(main())


def leave(code: int) -> NoReturn:
    """End the process with ``code``, skipping the interpreter's teardown (freeing every
    module and object: 13 ms here, a tenth of a cached rerun) as mypy does: exit
    handlers run and output is flushed first. The ordinary exit where it does more: a
    thread still running (it waits for it), a profiler, tracer or debugger watching
    (they report after the program returns), output that cannot be flushed. In-process
    callers use ``main``, which returns the code."""
    watched = sys.gettrace() is not None or sys.getprofile() is not None
    if threading.active_count() == 1 and not watched:
        atexit._run_exitfuncs()  # what the ordinary exit runs: logging, finalizers...
        try:
            for stream in (sys.stdout, sys.stderr):
                if stream is not None:
                    stream.flush()
        except (OSError, ValueError):
            sys.exit(code)  # e.g. a closed pipe: said the ordinary way
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    entry()
