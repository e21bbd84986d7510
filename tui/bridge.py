"""The one place where the engine meets Textual.

A run of an ``engine.session.Session`` is driven in a named thread worker; every
engine event becomes a Textual message (one ``on_<event>`` method per event type). Threads only call ``post_message``,
which is thread-safe; widgets are touched on the UI thread alone. Progress goes
to the header as a coalescable message (``can_replace``) so a burst of cached
results repaints the header once, not two thousand times. Actions that need the
engine (rerun one mutant, stage 2 on marked survivors, the compile-check and
diff-oracle toggles) go through this module too.

Quitting mid-run closes the sandbox first (jobs in flight end at once and are
not stored), then the event generator in its own thread, then the cache: the
same order as ``mutant-gate run`` on Ctrl-C, so the next run resumes.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial

from textual.app import App
from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import Worker

from mutant_gate.engine.checks import TOGGLED
from mutant_gate.engine.events import Event
from mutant_gate.engine.formats.words import score_phrases
from mutant_gate.engine.records import Mutant
from mutant_gate.engine.report import mutant_row
from mutant_gate.engine.session import Sandbox, Session
from mutant_gate.engine.settings import KEY_VARIABLES, RunSettings, api_key
from mutant_gate.engine.vocabulary import check_name

NEEDS_MODEL = f"no model key: set {' or '.join(KEY_VARIABLES)}"
#: The survivor checks the explorer can toggle, by name.
CHECKS = TOGGLED


def model_key_present() -> bool:
    return api_key() is not None


# -- messages -----------------------------------------------------------------
class EngineMessage(Message):
    """Base of everything the bridge posts (one hook in tests catches them all)."""


class RunBegan(EngineMessage):
    def __init__(self, run_id: str, kernel_path: str, functions: list[str], rows: list[dict]):
        super().__init__()
        self.run_id, self.kernel_path, self.functions, self.rows = (
            run_id,
            kernel_path,
            functions,
            rows,
        )


class BaselineBegan(EngineMessage):
    def __init__(self, timeout_s: float) -> None:
        super().__init__()
        self.timeout_s = timeout_s


class BaselineDone(EngineMessage):
    def __init__(self, duration_s: float, cached: bool, mutant_timeout_s: float) -> None:
        super().__init__()
        self.duration_s, self.cached, self.mutant_timeout_s = duration_s, cached, mutant_timeout_s


class MutantRunning(EngineMessage):
    def __init__(self, mutant_id: str) -> None:
        super().__init__()
        self.mutant_id = mutant_id


class MutantJudged(EngineMessage):
    """A verdict arrived (``rejudged``: a later stage or a rerun changed it)."""

    def __init__(self, row: dict, rejudged: bool = False) -> None:
        super().__init__()
        self.row, self.rejudged = row, rejudged

    @property
    def mutant_id(self) -> str:
        return self.row["id"]


class RunDone(EngineMessage):
    """The engine's report: at the end of the run, and ``again`` after a later action."""

    def __init__(self, report: dict, again: bool = False) -> None:
        super().__init__()
        self.report, self.again = report, again


class EngineNote(EngineMessage):
    """Any other engine event (writers, checks), as one line for the log."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class Progress(EngineMessage):
    """The header's numbers. Coalescable: only the newest one in a queue is painted."""

    def __init__(
        self,
        *,
        phase: str,
        done: int,
        total: int,
        ran: int,
        cached: int,
        running: int,
        started_at: float | None,
        finished_at: float | None = None,
        tokens: dict | None = None,
        phase_since: float | None = None,
        oldest_running: float | None = None,
    ) -> None:
        super().__init__()
        self.phase, self.done, self.total = phase, done, total
        self.ran, self.cached, self.running = ran, cached, running
        self.started_at, self.finished_at, self.tokens = started_at, finished_at, tokens
        #: when the phase began, and when the longest-running job started (monotonic)
        self.phase_since, self.oldest_running = phase_since, oldest_running

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, Progress)

    @property
    def elapsed_s(self) -> float | None:
        if self.started_at is None:
            return None
        return (self.finished_at or time.monotonic()) - self.started_at

    @property
    def jobs_per_s(self) -> float | None:
        elapsed = self.elapsed_s
        return self.ran / elapsed if elapsed and self.ran else None


# -- the bridge ---------------------------------------------------------------
class EngineBridge:
    """Drives one live run for the app; every engine call of the explorer goes through here."""

    def __init__(
        self,
        app: App,
        settings: RunSettings,
        *,
        sandbox_factory: Callable[[RunSettings], Sandbox] | None = None,
    ) -> None:
        self.app = app
        self.settings = settings
        #: the run's lifecycle: store, sandboxes, driver, close order (engine/session)
        self.session = Session(
            settings,
            sandbox_factory=sandbox_factory,
            warn=lambda text: self._post(EngineNote(text)),
        )
        #: Where Progress goes (the header); the app until one is attached.
        self.progress_target: MessagePump = app
        #: Which checks are on: from the flags, then the user's toggles.
        self.checks = {
            "compile-check": bool(getattr(settings, "compile_check", False)),
            "diff-oracle": bool(getattr(settings, "diff_oracle", False)),
            "tolerance": bool(getattr(settings, "tolerance", False)),
        }
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Event] = []
        self._mutants: dict[str, Mutant] = {}
        self._running: dict[str, float] = {}  # mutant id -> when its job started
        self._phase = "starting"
        self._phase_since = time.monotonic()
        self._done = self._total = self._ran = self._cached = 0
        self._started_at: float | None = None
        self._finished_at: float | None = None
        self.finished = False
        #: survivors the last check turned on started on (None: not started yet)
        self.check_targets: int | None = None
        self.baseline_done = False

    # -- the run --------------------------------------------------------------
    def start(self) -> Worker:
        return self._worker(
            self._drive,
            name="engine-run",
            group="engine",
            description=f"mutant-gate run {self.settings.kernel_path}",
        )

    def _worker(self, work: Callable[[], None], *, name: str, group: str, description: str):
        done = threading.Event()
        self._threads.append(done)

        def body() -> None:
            try:
                work()
            finally:
                done.set()

        return self.app.run_worker(
            body,
            name=name,
            group=group,
            description=description,
            thread=True,
            exit_on_error=False,
        )

    @property
    def sandbox(self) -> Sandbox | None:
        return self.session.sandbox

    def _drive(self) -> None:
        events = self.session.events()
        for name in CHECKS:  # toggled before the run existed
            self.session.set_check(name, self.checks[name])
        try:
            for event in events:
                if self._stopping.is_set():
                    break
                self._post_event(event)
        except Exception:
            if not self._stopping.is_set():
                raise
        finally:
            if self._stopping.is_set():
                self.session.stop()  # first, so jobs in flight end at once (never stored)
            events.close()

    def _post(self, message: Message) -> None:
        if not self._stopping.is_set():
            self.app.post_message(message)

    def _progress(self) -> None:
        if self._stopping.is_set():
            return
        tokens = self.session.tokens()
        with self._lock:
            message = Progress(
                phase=self._phase,
                done=self._done,
                total=self._total,
                ran=self._ran,
                cached=self._cached,
                running=len(self._running),
                phase_since=self._phase_since,
                oldest_running=min(self._running.values(), default=None),
                started_at=self._started_at,
                finished_at=self._finished_at,
                tokens=tokens,
            )
        self.progress_target.post_message(message)

    def _row(self, mutant: Mutant) -> dict:
        return self.session.row(mutant.id)

    def _post_event(self, event: Event | object) -> None:
        """Adapt one engine event (from any engine thread) into messages: the method
        ``on_<event in snake case>`` when there is one, else a log line."""
        name = "on_" + re.sub(r"(?<!^)(?=[A-Z])", "_", type(event).__name__).lower()
        handler = getattr(self, name, None)
        if handler is not None:
            handler(event)
        else:
            self._post(EngineNote(describe(event)))
        self._progress()

    def on_run_started(self, event) -> None:
        self._mutants = {m.id: m for m in event.mutants}
        with self._lock:
            self._total = len(event.mutants)
            self._phase = "loading"
            self._phase_since = time.monotonic()
        rows = [mutant_row(m, None) for m in event.mutants]
        functions = [f.name for f in event.kernel.jit_functions]
        self._post(RunBegan(event.run_id, event.kernel.path, functions, rows))

    def on_baseline_started(self, event) -> None:
        with self._lock:
            self._phase = "original"
            self._phase_since = time.monotonic()
        self._post(BaselineBegan(event.timeout_s))

    def on_baseline_progress(self, event) -> None:
        """A project's suite can run for minutes: each case through is a log line, and
        the header's phase counts the cases."""
        of = f"/{event.total}" if event.total else ""
        with self._lock:
            self._phase = f"original {event.done}{of} cases"
        self._post(EngineNote(describe(event)))

    def on_baseline_finished(self, event) -> None:
        self.baseline_done = True
        with self._lock:
            self._phase = "mutants"
            self._phase_since = time.monotonic()
            self._started_at = time.monotonic()
        self._post(BaselineDone(event.result.duration_s, event.cached, event.mutant_timeout_s))

    def on_mutant_started(self, event) -> None:
        with self._lock:
            self._running[event.mutant.id] = time.monotonic()
        self._post(MutantRunning(event.mutant.id))

    def on_mutant_finished(self, event) -> None:
        with self._lock:
            self._running.pop(event.mutant.id, None)
            self._done = event.done
            if event.outcome.cached:
                self._cached += 1
            else:
                self._ran += 1
        self._post(MutantJudged(self._row(event.mutant)))

    def on_mutant_updated(self, event) -> None:
        with self._lock:
            self._running.pop(event.mutant.id, None)
            if not event.outcome.cached:
                self._ran += 1
        self._post(MutantJudged(self._row(event.mutant), rejudged=True))

    def on_run_finished(self, event) -> None:
        self.finished = True
        with self._lock:
            self._phase = "finished"
            self._phase_since = time.monotonic()
            self._finished_at = time.monotonic()
        self._post(RunDone(event.report))
        directory = getattr(self.settings.writers, "write_tests", None)
        if directory:
            written = self.session.write_tests(directory)
            self._post(EngineNote(f"{len(written)} accepted test files written to {directory}"))

    # -- actions --------------------------------------------------------------
    def rerun(self, mutant_id: str, *, force: bool = False) -> str | None:
        """Judge one mutant again in a worker; returns why not, or None when started."""
        if not self.session.started or not self.baseline_done:
            return "the original has not passed its own check yet"
        if not self.session.judged(mutant_id):
            return "this mutant has no verdict yet; it is still queued"
        how = "in the sandbox" if force else "from the cache"
        rerun = partial(self.session.rerun_mutant, mutant_id, force=force)
        self._worker(
            partial(self._run_stage_events, rerun),
            name=f"rerun-{mutant_id}",
            group="rerun",
            description=f"rerun mutant {mutant_id} {how}",
        )
        return None

    def stage2(self, mutant_ids: list[str], *, model: bool) -> str | None:
        """Stage 2 on the given survivors: the probe writer, then (``model``) the model on
        those it left; without the model the probe goes past the run's own (more
        inputs, every kind, no time limit). Returns why not, or None when started."""
        if not mutant_ids:
            return "mark survivors first (space), then run stage 2 on them"
        if not self.session.started or not self.baseline_done:
            return "the original has not passed its own check yet"
        self._worker(
            partial(
                self._run_stage_events,
                partial(self.session.run_writers, list(mutant_ids), model=model, harder=not model),
            ),
            name="stage2",
            group="stage2",
            description=f"stage 2 on {len(mutant_ids)} survivors",
        )
        return None

    def set_check(self, name: str, on: bool) -> str | None:
        """Turn a survivor check on or off: at once on the mutants it applies to (survivors)
        and for the rest of the run. Returns why not, or None when done."""
        if name not in CHECKS:
            return f"{name} is not connected to this engine"
        self.checks[name] = on
        self.check_targets = None  # how many survivors it started on now, once known
        if not self.session.has_run:
            return None  # set when the run starts
        self.session.set_check(name, on and not self.finished)
        if not on or not self.baseline_done:
            return None
        targets = self.session.check_targets(name)
        self.check_targets = len(targets)
        if targets:
            self._worker(
                partial(self._run_stage_events, partial(self.session.run_check, name, targets)),
                name=f"check-{name}",
                group="checks",
                description=f"{name} on {len(targets)} survivors",
            )
        return None

    def _run_stage_events(self, events: Callable[[], Iterator[Event]]) -> None:
        """Drive a rerun or a stage; once the run is over, the report and the run record
        are rebuilt by the engine so replay shows what the user did here."""
        for event in events():
            if self._stopping.is_set():
                return
            self._post_event(event)
        if self.finished and not self._stopping.is_set():
            self._post(RunDone(self.session.save(), again=True))

    # -- quitting -------------------------------------------------------------
    def stop(self, timeout_s: float = 30.0) -> None:
        """Close the sandbox, let every engine thread close its generator, close the cache.

        Safe to call twice and from any thread but the engine's own.
        """
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.session.stop()  # queued jobs skipped, the sandboxes closed: jobs end at once
        deadline = time.monotonic() + timeout_s
        for done in list(self._threads):
            done.wait(max(0.0, deadline - time.monotonic()))
        self.session.close()  # then the cache

    @property
    def stopped(self) -> bool:
        return self._stopping.is_set()


def _where(mutant: Mutant | None) -> str:
    return f"{mutant.id} {mutant.operator} line {mutant.line}" if mutant is not None else ""


def describe(event: object) -> str:  # noqa: C901 - listed in tests/test_complexity.py
    """One sentence for any engine event (the log speaks one language: no event is
    shown as its fields). The explorer has views of its own for most of them; this is
    what the log says when it has none."""
    name = type(event).__name__
    get = partial(getattr, event)
    if name == "RunStarted":
        return (
            f"run {get('run_id')}: {len(get('mutants'))} mutants planted in "
            f"{get('kernel').path} ({get('generation_s') * 1000:.0f} ms)"
        )
    if name == "BaselineStarted":
        return f"running the original's checks (limit {get('timeout_s'):g} s)"
    if name == "BaselineProgress":
        if not get("case"):
            return f"the original's {get('check')}: {get('total')} test cases collected"
        of = f"/{get('total')}" if get("total") else ""
        return (
            f"the original's case {get('case')}: {get('status')} in "
            f"{get('duration_s'):.2f} s ({get('done')}{of} done)"
        )
    if name == "BaselineFinished":
        result = get("result")
        how = "from the cache" if get("cached") else f"{result.duration_s:.2f} s"
        return (
            f"the original's checks: {result.status.value} ({how}); mutant limit "
            f"{get('mutant_timeout_s'):.1f} CPU s"
        )
    if name in ("MutantStarted", "MutantFinished", "MutantUpdated"):
        where = _where(get("mutant"))
        if name == "MutantStarted":
            return f"{where}: started"
        outcome = get("outcome")
        by = f" by {outcome.by}" if outcome.by else ""
        verb = "now " if name == "MutantUpdated" else ""
        count = f" ({get('done')}/{get('total')})" if name == "MutantFinished" else ""
        return f"{where}: {verb}{outcome.verdict.value}{by}{count}"
    if name == "RunFinished":
        mine, written = score_phrases(get("report").get("score", {}))
        return f"run finished: {mine}" + (f"; {written}" if written else "")
    if name == "WriterNote":
        where = f" [{get('mutant_id')}]" if get("mutant_id", None) else ""
        return f"{get('writer')}{where}: {get('message')}"
    if name == "TestAccepted":
        kills = get("kills", ())
        return (
            f"{get('origin')} test accepted: {get('file')} "
            f"({len(get('tests', ()))} tests, kills {len(kills)})"
        )
    if name == "RunEstimated":
        return "estimate: " + "; ".join(event.lines())
    if name == "OwnCheckJudged":
        if get("asserts"):
            return f"own check: can see a wrong result: {get('evidence')}"
        return f"own check: {get('note')}; {get('evidence')}"
    if name == "TestRejected":
        where = f" for {get('mutant_id')}" if get("mutant_id", None) else ""
        return f"{get('origin')} test rejected{where} (attempt {get('attempt')}): {get('reason')}"
    if name in ("CheckStarted", "CheckFinished"):
        check = check_name(get("check"))
        mutant = get("mutant")
        if name == "CheckStarted":
            if mutant is None:
                return f"{check}: starting on {get('total')} mutants"
            return f"{check}: {_where(mutant)}"
        summary = get("summary")
        if mutant is None:
            # Whole-run lines already name their check ("compile-check skipped: ...").
            return summary if summary.startswith(check) else f"{check}: {summary}"
        return f"{check}: {_where(mutant)}: {summary} ({get('done')}/{get('total')})"
    return f"engine event {name}"
