"""``run`` and ``tui`` flags as the engine's ``RunSettings``, checked before anything runs.

A bad value, a flag that needs an optional extra that is not installed
(``--backend contree`` or ``ray``, ``--writer llm``, ``--stage2``), or a model stage asked for with
no key (by a flag or by ``[tool.mutant-gate]``, which then is named) is ``BadInput``:
one line, exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from mutant_gate.cli.config import TABLE, load_table
from mutant_gate.engine import session
from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.sandbox.backends import backend, check_options
from mutant_gate.engine.settings import (
    DEFAULT_BASELINE,
    DEFAULT_TARGETS,
    LLMSettings,
    RunSettings,
    WriterSettings,
    parse_targets,
)

#: Where written tests go unless ``--write-tests DIR`` (or the configuration's
#: ``write-tests``) says otherwise: in the working directory, beside the cache
#: (``.mutant-gate/``) and the reports a run writes, where ``python -m pytest`` runs them
#: (the kernel file's directory, or a project's root, is the usual working directory).
#: ``--no-write-tests`` (or ``write-tests = false``) writes none.
DEFAULT_TESTS_DIR = "mutant-gate-tests"


def writer_settings(args: argparse.Namespace) -> WriterSettings:
    if args.attempts < 1:
        raise BadInput("--attempts must be at least 1")
    if args.probes < 1:
        raise BadInput("--probes must be at least 1")
    probe_time = getattr(args, "probe_time", None)
    if probe_time is not None and not probe_time >= 0:
        raise BadInput("--probe-time must be 0 (no limit) or a positive number of seconds")
    if args.model_timeout <= 0:
        raise BadInput("--model-timeout must be positive")
    write_tests = getattr(args, "write_tests", None) or None
    if write_tests and os.path.exists(write_tests) and not os.path.isdir(write_tests):
        raise BadInput(f"--write-tests: not a directory: {write_tests}")
    budget_factor = getattr(args, "test_budget_factor", 3.0)
    budget_min = getattr(args, "test_budget_min", 2.0)
    if budget_factor < 0 or budget_min < 0:
        raise BadInput("--test-budget-factor and --test-budget-min must not be negative")
    triggers: tuple[str, ...] = ()
    if getattr(args, "probe_triggers", None):
        from mutant_gate.engine.writers.probe.kinds import TRIGGERS  # only when asked

        triggers = tuple(t.strip() for t in args.probe_triggers.split(",") if t.strip())
        unknown = sorted(set(triggers) - TRIGGERS)
        if unknown or not triggers:
            raise BadInput(
                f"--probe-triggers: unknown kind {', '.join(unknown) or '(none given)'}; "
                f"known: {', '.join(sorted(TRIGGERS))}"
            )
    return WriterSettings(
        writer=args.writer,
        stage2=args.stage2,
        attempts=args.attempts,
        probes=args.probes,
        probe_time=probe_time,
        probe_triggers=triggers,
        write_tests=write_tests,
        test_budget_factor=budget_factor,
        test_budget_min_s=budget_min,
        llm=LLMSettings(
            base_url=args.base_url,
            model=args.model,
            timeout_s=args.model_timeout,
            price_in=args.price_in,
            price_out=args.price_out,
        ),
    )


def _accepted(path: str | None) -> str | None:
    """The accepted-survivors file, read once now: a missing or malformed one fails before
    the run. Without ``--accepted`` (nor the configuration's), the file ``accept`` and the
    explorer's ``a`` write by default, when it is in the current directory: said in one
    line, so a run never leaves survivors out of the adjusted score unannounced."""
    found = not path and os.path.isfile(DEFAULT_BASELINE)
    path = DEFAULT_BASELINE if found else path
    if path:
        from mutant_gate.engine import accepted

        entries = accepted.load(path)
        if found:
            print(f"accepted survivors: {path} ({len(entries)} entries)", file=sys.stderr)
    return path


def _predict(path: str | None) -> str | None:
    """The prediction file, parsed now: a missing or malformed one fails before the run."""
    if path:
        from mutant_gate.engine import predictions

        predictions.register(path)
    return path


def pytest_expression(flag: str, text: str | None, tests: list[str]) -> str | None:
    """A ``-k`` / ``-m`` expression, parsed now as pytest parses it: a bad one (or one
    with no --tests file to select from) fails before the run."""
    if not text or not text.strip():
        return None
    if not tests:
        raise BadInput(f"{flag} selects cases of the --tests files, and none is given")
    from _pytest.mark import expression  # only when asked

    # the parse error's class has moved between pytest versions: whatever it is called
    refused = getattr(expression, "ParseError", None) or Exception
    try:
        expression.Expression.compile(text)
    except refused as exc:
        raise BadInput(f"{flag} {text!r}: not a pytest expression: {exc}") from None
    return text


def run_settings(args: argparse.Namespace) -> RunSettings:
    """The settings the flags ask for; ``BadInput`` for a bad value or a missing extra."""
    if args.jobs is not None and args.jobs < 1:
        raise BadInput("-j must be at least 1")
    if args.timeout <= 0:
        raise BadInput("--timeout must be positive")
    if args.fail_under is not None and not 0 <= args.fail_under <= 100:
        raise BadInput("--fail-under must be between 0 and 100")
    case_time = getattr(args, "case_time", None)
    if case_time is not None and not case_time > 0:
        raise BadInput(f"--case-time must be a positive number of seconds, got {case_time:g}")
    from mutant_gate.engine.modes import resolve_mode

    # A remote sandbox does not run on this machine's GPU: auto is the interpreter there.
    chosen = backend(args.backend)
    remote = chosen.remote and args.mode == "auto"
    mode, auto = ("interpret", True) if remote else resolve_mode(args.mode)
    if args.sanitize and mode != "compiled" and not args.compare_modes:
        found = " (--mode auto found no CUDA device)" if auto else ""
        raise BadInput(f"--sanitize needs --mode compiled (or --compare-modes){found}")
    ray_address = getattr(args, "ray_address", None)
    given = {"contree_image": args.contree_image, "contree_url": args.contree_url}
    check_options(chosen.name, {**given, "ray_address": ray_address})
    settings = RunSettings(
        kernel_path=args.file,
        tests=tuple(args.tests),
        operators=args.operators,
        changed_since=args.changed_since,
        # contree, ray: None lets the sandbox pick (remote runs cost no local cores)
        workers=args.jobs or (None if chosen.remote else os.cpu_count() or 1),
        timeout_s=args.timeout,
        timeout_factor=args.timeout_factor,
        timeout_base_s=args.timeout_base,
        case_time_s=case_time,
        memory_mb=args.memory_mb,
        seed=args.seed,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        fail_under=args.fail_under,
        gate_on=args.gate_on,
        accepted_path=_accepted(args.accepted),
        predict_path=_predict(args.predict),
        writers=writer_settings(args),
        backend=args.backend,
        contree_image=args.contree_image,
        contree_url=args.contree_url,
        ray_address=ray_address,
        mode=mode,
        auto_mode=auto,
        project_root=args.project_root,
        select_tests=not args.no_select,
        keyword=pytest_expression("-k", args.keyword, args.tests),
        marker=pytest_expression("-m", args.marker, args.tests),
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
        tolerance=getattr(args, "tolerance", False),
        poison_undefined=not args.no_poison,
        interpreter=getattr(args, "interpreter", "batched"),
    )
    try:
        session.check_extras(settings)
    except BadInput as exc:
        raise BadInput(f"{exc}{_asked_by_config(args, str(exc))}") from None
    return settings


def _asked_by_config(args: argparse.Namespace, message: str) -> str:
    """Where the configuration asks for the model stage ``message`` is about, or ''."""
    path = getattr(args, "config", None)
    if not path:
        return ""
    table = load_table(path)
    said = []
    if message.startswith("--writer llm") and table.get("writer") == "llm":
        said.append('writer = "llm"')
    if "--stage2" in message.split(" need")[0] and table.get("stage2") is True:
        said.append("stage2 = true")
    return f" ({' and '.join(said)} in [tool.{TABLE}] of {path})" if said else ""
