"""The faces' one door into the engine: everything the CLI, the explorer and ``rerun``
ask of it, so that no face builds a sandbox, looks a run up or sets a driver's field
on its own.

- ``make_sandbox(settings)``: the backend the settings name (contree-sdk is imported
  only when used; a remote sandbox is started so its image's versions key the cache).
- ``check_input(settings)``: bad input fails here, before anything runs (one line); a
  model stage asked for with no key is bad input too.
- ``start_run(settings, sandbox, store)``: a ``Run`` to drive with ``events()``;
  ``start_rerun(report, ...)``: chosen mutants of a past run again, same driver.
- ``find_record`` / ``find_report`` / ``latest_id`` / ``replay_lookup``: a past run
  by id, unique prefix, ``latest`` or a JSON report file.
- ``require`` / ``check_extras``: an optional extra (``[tui]``, ``[llm]``, ``[contree]``)
  that is not installed is one line before anything starts, not an ImportError later.
"""

from __future__ import annotations

import importlib.util
import json
import os

from mutant_gate.cache import Store

from .errors import BadInput
from .sandbox import Sandbox
from .settings import WRITERS, RunSettings

# -- optional extras ------------------------------------------------------------------------
#: module -> (the package that provides it, the mutant-gate extra that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "textual": ("textual", "tui"),
    "openai": ("openai", "llm"),
    "contree_sdk": ("contree-sdk", "contree"),
}


def require(module: str, what: str) -> None:
    """BadInput (one line, exit 2) when ``what`` needs ``module`` and it is not installed."""
    if importlib.util.find_spec(module) is None:
        package, extra = EXTRAS[module]
        raise BadInput(f"{what} needs {package}: pip install 'mutant-gate[{extra}]'")


def check_extras(settings: RunSettings) -> None:
    """Every optional module a run with ``settings`` will import is installed, and the
    model stages it asks for (``--writer llm``, ``--stage2``) have a key to use."""
    from .writers.model import missing_key

    if settings.backend == "contree":
        require("contree_sdk", "--backend contree")
    if settings.writers.writer == "llm":
        require("openai", "--writer llm")
    if settings.writers.stage2:
        require("openai", "--stage2")
    why = missing_key(settings.writers)
    if why is not None:
        raise BadInput(why)


# -- sandboxes ---------------------------------------------------------------------------
def make_sandbox(settings: RunSettings, mode: str | None = None) -> Sandbox:
    """The sandbox ``settings.backend`` names, in ``mode`` (default: the run's)."""
    mode = mode or settings.mode
    if settings.backend == "contree":
        from .sandbox.contree import ContreeSandbox

        box = ContreeSandbox(
            settings.workers, mode, image=settings.contree_image, base_url=settings.contree_url
        )
        box.start()  # its image's torch/triton versions key the cache
        return box
    from .sandbox.local import LocalSandbox

    return LocalSandbox(settings.workers, mode)


# -- runs ----------------------------------------------------------------------------------
def check_input(settings: RunSettings) -> None:
    """Load the kernel file and read the flags as a run would; BadInput if they are wrong."""
    from .pipeline import load

    load(settings)
    if settings.writers.writer not in WRITERS:
        raise BadInput(
            f"--writer must be one of {', '.join(WRITERS)}, not {settings.writers.writer!r}"
        )
    check_extras(settings)


def start_run(settings: RunSettings, sandbox: Sandbox, store: Store | None):
    """A run to drive with ``events()``; ``--compare-modes`` gets its second sandbox here."""
    from .pipeline import Run

    other = None
    if settings.compare_modes:
        other = make_sandbox(settings, "compiled" if settings.mode == "interpret" else "interpret")
    elif settings.auto_mode and settings.mode == "compiled":
        other = make_sandbox(settings, "interpret")  # started when a survivor needs it
    return Run(settings, sandbox, store, other_sandbox=other)


def start_rerun(
    report: dict,
    settings: RunSettings,
    sandbox: Sandbox,
    store: Store | None,
    chosen: list[str],
    *,
    force: bool = False,
    writer: str | None = None,
):
    """Chosen mutants of a past run judged again: the same driver with a rerun plan; its
    ``RunFinished`` report says what changed (``rerun``). ``writer`` (probe | llm) then
    writes tests for those still surviving."""
    from .rerun import start_rerun as rerun

    return rerun(report, settings, sandbox, store, chosen, force=force, writer=writer)


# -- past runs -----------------------------------------------------------------------------
def open_cache(directory: str) -> Store:
    if not os.path.isdir(directory):
        raise BadInput(f"no cache at {directory}: run `mutant-gate run FILE` first")
    return Store(directory)


def resolve_run_id(store: Store, ref: str) -> str:
    """A run id from an id, a unique prefix of one, or ``latest``."""
    ids = store.list_runs()
    if not ids:
        raise BadInput(f"no runs in the cache at {store.directory}")
    if ref == "latest":
        return max(ids)  # ids start with their start time
    matches = [i for i in ids if i == ref] or [i for i in ids if i.startswith(ref)]
    if not matches:
        raise BadInput(f"no run {ref!r} in {store.directory}; newest: {', '.join(ids[-3:])}")
    if len(matches) > 1:
        raise BadInput(f"run {ref!r} is ambiguous: {', '.join(matches[:5])}")
    return matches[0]


def latest_id(ref: str | None, directory: str) -> str | None:
    """``latest`` as the newest run's id; anything else unchanged."""
    if ref != "latest" or not os.path.isdir(directory):
        return ref
    with open_cache(directory) as store:
        return resolve_run_id(store, ref)


def read_report_file(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
    except (OSError, ValueError) as exc:
        raise BadInput(f"{path}: not a readable JSON report ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("mutants"), list):
        raise BadInput(f"{path}: not a mutant-gate report (no mutants list)")
    return report


def is_report_file(ref: str | None) -> bool:
    return bool(ref) and ref.endswith(".json") and os.path.isfile(ref)  # type: ignore[union-attr]


def find_record(ref: str, directory: str) -> dict:
    """The run record for ``ref`` (a JSON report file is wrapped as one)."""
    if is_report_file(ref):
        report = read_report_file(ref)
        return {"run_id": report.get("run_id"), "report": report}
    with open_cache(directory) as store:
        run_id = resolve_run_id(store, ref)
        record = store.get_run(run_id)
    if not record:
        raise BadInput(f"run {run_id}: its record is unreadable")
    return record


def find_report(ref: str, directory: str) -> dict:
    """The finished report of ``ref``; BadInput for a run that stopped before its end."""
    record = find_record(ref, directory)
    if not record.get("report"):
        raise BadInput(
            f"run {record.get('run_id')} stopped before it finished: it has no report "
            "(`mutant-gate run` or `tui` on the same file resumes it from the cache)"
        )
    return record["report"]


def site_reports(refs: list[str], directory: str) -> list[dict]:
    """The finished reports ``refs`` name, for the replay site: ids, unique prefixes,
    JSON report files, or ``latest`` (the newest finished run of each kernel file in
    the cache). A run named twice is shown once."""
    reports: dict[str, dict] = {}
    for ref in refs:
        if ref != "latest":
            report = find_report(ref, directory)
            reports.setdefault(str(report.get("run_id")), report)
            continue
        newest: dict[str, dict] = {}
        for record in list_records(directory):  # oldest first: the last one wins
            report = record.get("report")
            if report:
                newest[(report.get("kernel") or {}).get("path") or "?"] = report
        if not newest:
            raise BadInput(f"no finished run in the cache at {os.path.abspath(directory)}")
        for report in sorted(newest.values(), key=lambda r: str(r.get("run_id"))):
            reports.setdefault(str(report.get("run_id")), report)
    return list(reports.values())


def list_records(directory: str) -> list[dict]:
    """Every readable run record, oldest first."""
    with open_cache(directory) as store:
        ids = store.list_runs()
        if not ids:
            raise BadInput(f"no runs in the cache at {store.directory}")
        return [r for r in (store.get_run(i) for i in ids) if r]


def delete_runs(refs: list[str], directory: str) -> list[str]:
    """Remove the runs ``refs`` name (ids, unique prefixes, ``latest``) from the cache;
    the ids removed. An unknown or ambiguous ref is ``BadInput`` before anything goes."""
    with open_cache(directory) as store:
        ids = [resolve_run_id(store, ref) for ref in refs]
        return [i for i in dict.fromkeys(ids) if store.delete_run(i)]


def replay_lookup(ref: str | None, directory: str) -> tuple[dict | None, list[dict]]:
    """``replay [RUN]``: (report, []) for one run, or (None, records) to choose from."""
    if ref is None:
        return None, list_records(directory)
    return find_report(ref, directory), []
