"""The faces' one door into the engine: everything the CLI, the explorer and ``rerun``
ask of it, so that no face builds a sandbox, looks a run up or sets a driver's field
on its own.

- ``make_sandbox(settings)``: the backend the settings name, from the backends' table
  (``sandbox/backends.py``: contree-sdk and ray are imported only when used; a remote
  sandbox is started so its image's versions key the cache, a Ray one so that a node that
  cannot harden jobs is refused up front).
- ``check_input(settings)``: bad input fails here, before anything runs (one line); a
  model stage asked for with no key is bad input too.
- ``Session(settings)``: one run's lifecycle (its store, sandboxes and driver) for every
  face: ``events()`` drives a run, ``rerun(report, ...)`` chosen mutants of a past run.
- ``find_record`` / ``find_report`` / ``latest_id`` / ``replay_lookup``: a past run
  by id, unique prefix, ``latest`` or a JSON report file; ``rerun_report``: the run a
  rerun takes (``latest``: the newest run of the kernel file named, or of the one its
  ``--tests`` belong to).
- ``require`` / ``check_extras``: an optional extra (``[tui]``, ``[llm]``, ``[contree]``, ``[ray]``)
  that is not installed is one line before anything starts, not an ImportError later.
"""

from __future__ import annotations

import importlib.util
import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from mutant_gate.cache import CacheUnavailable, Store

from .errors import BadInput
from .events import Event
from .sandbox import Sandbox
from .sandbox.backends import BACKENDS, backend, open_sandbox
from .settings import WRITERS, RunSettings

# -- optional extras ------------------------------------------------------------------------
#: module -> (the package that provides it, the mutant-gate extra that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "textual": ("textual", "tui"),
    "openai": ("openai", "llm"),
    # the backends' own: engine/sandbox/backends.py
    **{b.extra[0]: b.extra[1:] for b in BACKENDS.values() if b.extra},
}


def require(module: str, what: str) -> None:
    """BadInput (one line, exit 2) when ``what`` needs ``module`` and it is not installed."""
    if importlib.util.find_spec(module) is None:
        package, extra = EXTRAS[module]
        raise BadInput(f"{what} needs {package}: pip install 'mutant-gate[{extra}]'")


def require_backend(name: str) -> None:
    """BadInput when backend ``name`` is unknown or its extra is not installed."""
    chosen = backend(name)
    if chosen.extra:
        require(chosen.extra[0], f"--backend {chosen.name}")


def check_extras(settings: RunSettings) -> None:
    """Every optional module a run with ``settings`` will import is installed, and the
    model stages it asks for (``--writer llm``, ``--stage2``) have a key to use."""
    from .writers.model import missing_key

    require_backend(settings.backend)
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
    return open_sandbox(settings, mode)


# -- a run's lifecycle ----------------------------------------------------------------------
class Session:
    """One run's lifecycle, owned whole, for every face (``run``, ``rerun``, ``study``,
    the explorer): the cache store, every sandbox it opens (the run's, and the second
    one ``--compare-modes`` or ``--mode auto`` on a GPU asks for), the driver, and the
    close order: the sandboxes first (jobs in flight end at once and are never stored),
    then the run's events, then the store (so the next run resumes from the cache).

    A face drives it with ``events()`` (again for another run on the same sandbox: the
    study) or ``rerun(...)``, acts on it (``rerun_mutant``, ``run_writers``,
    ``set_check``, ``run_check``), reads snapshots the engine builds (``row``,
    ``report``, ``tokens``) and ends it with ``close()`` (or ``with``). ``warn`` hears
    what the face should say: a cache it cannot use, cache writes that failed.
    """

    def __init__(
        self,
        settings: RunSettings,
        *,
        sandbox_factory: Callable[[RunSettings], Sandbox] | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self._factory = sandbox_factory or make_sandbox
        self._warn = warn or (lambda text: None)
        self.store: Store | None = None
        self._store_opened = False
        self.sandbox: Sandbox | None = None
        self._others: list[Sandbox] = []
        self._run: Any = None  # the driver (``pipeline.Run``): faces never see it
        self._events: list[Iterator[Event]] = []
        self._lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- starting ----------------------------------------------------------------------------
    def _open(self, settings: RunSettings) -> None:
        if not self._store_opened:
            self._store_opened = True
            if settings.use_cache:
                try:
                    self.store = Store(settings.cache_dir)
                except CacheUnavailable as exc:
                    if exc.fatal:
                        raise
                    self._warn(f"warning: {exc}; running without the cache")
        if self.sandbox is None:
            self.sandbox = self._factory(settings)

    def events(self, settings: RunSettings | None = None, plan: Any = None) -> Iterator[Event]:
        """Start a run (``settings``: another run of this session on the same sandbox and
        cache, as the study and a library run make) and yield its events; the last is
        ``RunFinished``. ``plan``: which mutants it judges (``pipeline.Plan``; a library's
        module: ``library.LibraryPlan``)."""
        from .pipeline import Run

        settings = settings or self.settings
        self._open(settings)
        assert self.sandbox is not None
        other = None
        if settings.compare_modes:
            other = self._other(
                settings, "compiled" if settings.mode == "interpret" else "interpret"
            )
        elif settings.auto_mode and settings.mode == "compiled":
            other = self._other(settings, "interpret")  # started when a survivor needs it
        self._run = Run(settings, self.sandbox, self.store, other_sandbox=other, plan=plan)
        return self._drive(self._run.events())

    def rerun(
        self, report: dict, chosen: list[str], *, force: bool = False, writer: str | None = None
    ) -> Iterator[Event]:
        """Chosen mutants of a past run judged again (its ``RunFinished`` report says what
        changed: ``rerun``); ``writer`` (probe | llm) then writes tests for those still
        surviving."""
        from .rerun import start_rerun

        self._open(self.settings)
        assert self.sandbox is not None
        self._run = start_rerun(
            report, self.settings, self.sandbox, self.store, chosen, force=force, writer=writer
        )
        return self._drive(self._run.events())

    def _other(self, settings: RunSettings, mode: str) -> Sandbox:
        box = make_sandbox(settings, mode)
        self._others.append(box)
        return box

    def _drive(self, events: Iterator[Event]) -> Iterator[Event]:
        with self._lock:
            self._events.append(events)
        return events

    # -- acting on the run ---------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """The run exists and the original passed (what every action needs)."""
        run = self._run
        return run is not None and run.ctx is not None and run.ctx.baseline is not None

    @property
    def cancel(self) -> threading.Event:
        return self._run.cancel if self._run is not None else threading.Event()

    @property
    def has_run(self) -> bool:
        return self._run is not None

    def kernel_source(self) -> str | None:
        """The kernel file's text as the run loaded it (None before it did)."""
        run = self._run
        return run.kernel.source if run is not None and run.ctx is not None else None

    def judged(self, mutant_id: str) -> bool:
        return self._run is not None and self._run.ledger.outcome(mutant_id) is not None

    def rerun_mutant(self, mutant_id: str, *, force: bool = False) -> Iterator[Event]:
        return self._driver().rerun_mutant(mutant_id, force=force)

    def run_writers(
        self, mutant_ids: list[str], *, model: bool, harder: bool = False
    ) -> Iterator[Event]:
        """The probe, then (``model``) stage 2 on chosen survivors; ``harder``: the probe
        past the run's own (``pipeline.Run.run_writers``)."""
        return self._driver().run_writers(list(mutant_ids), model=model, harder=harder)

    def set_check(self, name: str, on: bool) -> None:
        """Turn a survivor check on or off for the rest of the run (``check_targets``:
        the mutants it applies to now, ``run_check`` runs it on them)."""
        self._driver().set_check(name, on)

    def check_targets(self, name: str) -> list[str]:
        """The mutants check ``name`` applies to now (none before the original passed)."""
        run = self._driver()
        if not self.started:
            return []
        return [m.id for m in run.stage_named(name).targets(run.ctx)]

    def run_check(self, name: str, mutant_ids: list[str]) -> Iterator[Event]:
        run = self._driver()
        return run.run_stage(run.stage_named(name), list(mutant_ids))

    def _driver(self) -> Any:
        if self._run is None:
            raise RuntimeError("the session has no run yet: start one with events()")
        return self._run

    # -- snapshots -----------------------------------------------------------------------------
    def row(self, mutant_id: str) -> dict:
        """A mutant's report row as things stand (``engine/report.mutant_row``)."""
        run = self._driver()
        mutant = next(m for m in run.mutants if m.id == mutant_id)
        return run.row(mutant)

    def report(self) -> dict:
        """The report as things stand (``engine/report.build_report``)."""
        return self._driver().report()

    def save(self, report: dict | None = None) -> dict:
        """The run record rebuilt and stored (replay shows what a face did after the
        run's end: a rerun, stage 2, a check turned on); the report saved."""
        run = self._driver()
        report = report if report is not None else run.report()
        run.save(report)
        return report

    def tokens(self) -> dict | None:
        return self._run.ledger.sections().get("tokens") if self._run is not None else None

    @property
    def driver(self) -> Any:
        """The newest run's driver, as an opaque handle: a library's module keeps its own
        (its runs overlap) to hand back to ``write_tests``."""
        return self._run

    def accepted_tests(self) -> tuple:
        return self._run.accepted_tests() if self._run is not None else ()

    def write_tests(self, directory: str, driver: Any = None) -> Any:
        """Every accepted test (and its data files) of the newest run (or of ``driver``, a
        handle ``driver`` gave) written to ``directory``, each runnable under plain pytest
        (``writers/on_disk``): a ``Written`` (paths, counts, command)."""
        from .writers.on_disk import write_tests

        run = driver if driver is not None else self._run
        ctx = run.ctx if run is not None else None
        kernel = ctx.kernel if ctx is not None else None
        poison = self.settings.poison_undefined
        accepted = run.accepted_tests() if run is not None else ()
        return write_tests(accepted, kernel, directory, self.settings.mode, poison)

    # -- ending ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """The first half of ``close``: queued jobs are skipped and every sandbox closes,
        so jobs in flight end at once (their results are never stored). A face that
        drives events in other threads waits for them between ``stop`` and ``close``."""
        if self._run is not None:
            self._run.cancel.set()
        for box in [self.sandbox, *self._others]:
            if box is not None:
                box.close()

    def close(self) -> None:
        """Sandboxes first (``stop``), then every event stream the session handed out,
        then the store. Safe to call twice, from any thread but one driving the events."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            events, self._events = self._events, []
        self.stop()
        for stream in events:
            try:
                stream.close()
            except ValueError:  # still running in another thread: it ends with the sandbox
                pass
        if self.store is not None:
            self.store.close()
            if self.store.write_failures:
                self._warn(
                    f"warning: {len(self.store.write_failures)} cache writes failed "
                    f"({self.store.write_failures[-1]}); those results were not saved"
                )


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


def rerun_report(
    ref: str, directory: str, kernel: str | None = None, tests: tuple[str, ...] = ()
) -> tuple[dict, str]:
    """The finished report ``rerun`` judges again, and the line that says which run
    ``latest`` took ("" when there was nothing to choose). ``ref``: an id, a unique
    prefix, a JSON report file, ``latest`` (the newest run of ``kernel``, else of the
    kernel file the ``tests`` belong to: ``rerun.latest_run``), or a kernel file (its
    newest run). A run of another file than ``kernel`` is bad input."""
    from .rerun import latest_run, same_file

    if kernel is None and ref.endswith(".py") and os.path.isfile(ref):
        ref, kernel = "latest", ref
    if ref == "latest":
        where = f"the cache at {os.path.abspath(directory)}"
        record, said = latest_run(list_records(directory), kernel, list(tests), where)
        return record["report"], said
    report = find_report(ref, directory)
    ran = (report.get("kernel") or {}).get("path")
    if kernel is not None and not same_file(ran, kernel):
        raise BadInput(f"run {report.get('run_id')} is a run of {ran}, not of {kernel}")
    return report, ""


def exported(report: dict) -> tuple[dict, str | None]:
    """A finished report as every face writes it out (``report``, the site, the
    explorer's export): its prediction file's state as of now (``file_now``), and the
    line to say when that file changed after the run stored it (else None)."""
    section = report.get("predictions")
    if not isinstance(section, dict):
        return report, None
    from . import predictions

    section = {**section, "file_now": predictions.file_now(section)}
    said = None
    if section["file_now"] != "same":
        said = next(ln for ln in predictions.lines(section) if "prediction file" in ln)
    return {**report, "predictions": section}, said


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
