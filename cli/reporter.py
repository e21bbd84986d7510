"""The command line's observers of the engine's events: a method per event type.

``Observer.handle(event)`` calls ``on_<the event's class name in snake case>``
(``MutantFinished`` -> ``on_mutant_finished``); an event an observer has no method
for is ignored, so a new event type in ``engine/events.py`` never breaks the command
line. ``Reporter`` shows a ``run`` (progress bar, one line per thing worth saying);
``RerunReporter`` shows a ``rerun`` (one line per mutant judged again).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter

from rich.console import Console
from rich.markup import escape

from mutant_gate.cli import check_lines
from mutant_gate.cli.check_lines import counted
from mutant_gate.engine.events import (
    BaselineFinished,
    BaselineProgress,
    CheckFinished,
    CheckStarted,
    MutantFinished,
    MutantUpdated,
    OwnCheckJudged,
    RunEstimated,
    RunFinished,
    RunStarted,
    TestAccepted,
    TestRejected,
    WriterNote,
)
from mutant_gate.engine.vocabulary import STYLES, check_name

_CAPITAL = re.compile(r"(?<!^)(?=[A-Z])")


def handler_name(event: object) -> str:
    """``MutantFinished`` -> ``on_mutant_finished``."""
    return "on_" + _CAPITAL.sub("_", type(event).__name__).lower()


def took(event: BaselineFinished) -> str:
    """What the original's run took: wall seconds, and the CPU seconds that set the limit."""
    if event.cached:
        return "cached"
    result = event.result
    cpu = f", {result.cpu_s:.2f} CPU s" if result.cpu_s else ""
    return f"{result.duration_s:.2f} s{cpu}"


def limit(event: BaselineFinished) -> str:
    """A mutant's limit, in the CPU seconds it counts: the whole suite's, or where each
    mutant runs only its kernel's cases, the most any could get."""
    if event.selected:
        return (
            f"mutant limit at most {event.mutant_timeout_s:.1f} CPU s "
            "(each from the original's time on the cases it runs)"
        )
    return f"mutant limit {event.mutant_timeout_s:.1f} CPU s"


class Observer:
    """Dispatches each event to ``on_<event name>``; events without a method are ignored."""

    #: the finished report, once ``RunFinished`` arrived
    report: dict | None = None

    def handle(self, event: object) -> None:
        method = getattr(self, handler_name(event), None)
        if method is not None:
            method(event)

    def on_run_finished(self, event: RunFinished) -> None:
        self.report = event.report


class Reporter(Observer):
    """``mutant-gate run``: a progress bar with live verdict counts, and a line per event
    worth a line (the kernel, the original's baseline, checks, writers, changed verdicts).
    Use it as a context manager around the event loop (the progress bar lives inside)."""

    def __init__(self, console: Console, quiet: bool = False, verbose: bool = False) -> None:
        self.verbose = verbose
        if quiet:
            self.progress = _NoBar(console)
        elif console.is_terminal:
            self.progress = _bar(console)
        else:  # a log or CI: a bar would be drawn only once, at the end
            self.progress = _LogBar(console, progress_every())
        self.task = self.progress.add_task("loading", total=None, counts="")
        self.counts: Counter[str] = Counter()
        self.verdicts: dict[str, str] = {}  # mutant id -> its verdict so far
        self.baselines = 0
        self.eta: Eta | None = None  # the mutant phase's time left, once estimated

    def __enter__(self) -> Reporter:
        self.progress.start()
        return self

    def __exit__(self, kind: object, *exc: object) -> None:
        if isinstance(self.progress, _LogBar):
            self.progress.stop(said_last=kind is None)  # an error ends it in its own words
        else:
            self.progress.stop()

    def say(self, line: str) -> None:
        self.progress.console.print(line, highlight=False)

    def _show_counts(self) -> None:
        text = " ".join(
            f"[{STYLES[verdict]}]{verdict} {n}[/]"
            for verdict, n in sorted(self.counts.items())
            if n
        )
        self.progress.update(self.task, counts=text)

    # -- the run ----------------------------------------------------------------------
    def on_run_started(self, event: RunStarted) -> None:
        """The kernel, its jit functions and mutants; the bar's total."""
        self.say(
            f"{event.kernel.path}: {counted(len(event.kernel.jit_functions), 'jit function')}, "
            f"{counted(len(event.mutants), 'mutant')} ({event.generation_s * 1000:.0f} ms)"
        )
        self.progress.update(self.task, description="original", total=len(event.mutants))

    def on_own_check_judged(self, event: OwnCheckJudged) -> None:
        """A note when the own check asserts nothing (mutants then die only by a crash)."""
        if not event.asserts:
            self.say(f"[bold yellow]note: {event.note}[/]; {event.evidence}")

    def on_baseline_progress(self, event: BaselineProgress) -> None:
        """The original's test cases as they finish: the bar says how many, and a case
        slower than a second gets a line (the ones that make a suite long)."""
        of = f"/{event.total}" if event.total else ""
        self.progress.update(self.task, description=f"original {event.done}{of} cases")
        if event.case and event.duration_s >= 1.0:
            self.say(
                f"[dim]original: {escape(event.case)} {event.status} in {event.duration_s:.1f} s[/]"
            )

    def on_baseline_finished(self, event: BaselineFinished) -> None:
        """The original passed (its own check, later with the written tests); the timeout."""
        what = "its own check" if not self.baselines else "its own check + written tests"
        self.baselines += 1
        self.say(f"original passes {what} ({took(event)}); {limit(event)}")
        self.progress.update(self.task, description="mutants")

    def on_run_estimated(self, event: RunEstimated) -> None:
        """The mutant phase's estimate (when a job is to run), and what would cut a long
        one; the bar's time left starts from it."""
        if event.to_run:
            for n, line in enumerate(event.lines()):
                self.say(escape(line) if n == 0 else f"[dim]{escape(line)}[/]")
        self.eta = Eta(event.to_run, event.seconds, event.workers)
        self.progress.update(self.task, eta=self.eta)

    def on_mutant_finished(self, event: MutantFinished) -> None:
        """A verdict: the bar advances and the counts change."""
        verdict = event.outcome.verdict.value
        self.counts[verdict] += 1
        self.verdicts[event.mutant.id] = verdict
        if self.eta is not None and not event.outcome.cached:
            self.eta.ran += 1
        self.progress.update(self.task, completed=event.done)
        self._show_counts()

    def on_mutant_updated(self, event: MutantUpdated) -> None:
        """A later stage changed a verdict: the counts move, and a line says so."""
        outcome, mutant_id = event.outcome, event.mutant.id
        if mutant_id in self.verdicts:
            self.counts[self.verdicts[mutant_id]] -= 1
            self.counts[outcome.verdict.value] += 1
            self.verdicts[mutant_id] = outcome.verdict.value
            self._show_counts()
        by = f" by {outcome.by}" if outcome.by else ""
        style = STYLES.get(outcome.verdict.value, "dim")
        self.say(f"[{style}]{mutant_id} {outcome.verdict.value}{by}[/]")

    # -- checks and writers -----------------------------------------------------------
    def on_check_started(self, event: CheckStarted) -> None:
        """A check on the survivors begins: the progress lines name it."""
        if event.mutant is None:
            self.progress.update(self.task, description=check_name(event.check))

    def on_check_finished(self, event: CheckFinished) -> None:
        """The compile-check's or the diff-oracle's line on the run; its line on one
        mutant only with ``-v`` (the survivor lines say it at the end), but for a
        contradiction or a refused claim."""
        loud = event.summary.startswith(("CONTRADICTION", "equivalence claim refused"))
        if self.verbose or event.mutant is None or loud:
            self.say(check_lines.event_line(event))

    def on_writer_note(self, event: WriterNote) -> None:
        """A writer says what it does, or why it stopped; the run is in its phase now.
        A note on one survivor, or on what the probe learned, only with ``-v``."""
        if self.verbose or not detail(event):
            self.say(writer_note_line(event))
        self.progress.update(self.task, description=event.writer)

    def on_test_accepted(self, event: TestAccepted) -> None:
        """A written test proved itself: its file, its tests and what it kills."""
        kills = f", kills {', '.join(event.kills)}" if event.kills else ""
        took = f", {event.duration_s:.2f} s on the original" if event.duration_s is not None else ""
        self.say(
            f"[green]{event.origin}: accepted {event.file}[/] "
            f"({counted(len(event.tests), 'test')}{took}{kills})"
        )

    def on_test_rejected(self, event: TestRejected) -> None:
        """A written test failed its proof, and why."""
        where = f" for {event.mutant_id}" if event.mutant_id else ""
        self.say(
            f"[yellow]{event.origin}: rejected attempt {event.attempt}{where}:[/] "
            f"{escape(event.reason)}"
        )


def detail(event: WriterNote) -> bool:
    """A writer's note that is a detail of its work (``-v``): an info note on one
    survivor (what the probe tried), or what it learned of the file's calls."""
    return event.level == "info" and (
        event.mutant_id is not None or event.message.startswith("learned ")
    )


def writer_note_line(event: WriterNote) -> str:
    """A writer's note: what it does, or why it stopped (warnings and errors stand out)."""
    style = {"error": "bold red", "warning": "yellow"}.get(event.level, "dim")
    where = f" {event.mutant_id}" if event.mutant_id else ""
    return f"[{style}]{event.writer}{where}: {escape(event.message)}[/]"


class Eta:
    """The mutant phase's time left: from the estimate (``to_run`` mutants in
    ``seconds`` over ``workers``) until as many mutants as workers ran, then at the pace
    of those that ran (cached results come at once: they are not counted)."""

    def __init__(self, to_run: int, seconds: float, workers: int) -> None:
        self.to_run, self.seconds, self.workers = to_run, seconds, max(1, workers)
        self.started = time.monotonic()
        self.ran = 0

    def left(self, now: float | None = None) -> float | None:
        """Seconds left, or None when nothing is left to run."""
        if self.ran >= self.to_run:
            return None
        elapsed = (time.monotonic() if now is None else now) - self.started
        if self.ran < self.workers:
            return max(0.0, self.seconds - elapsed)
        return elapsed / self.ran * (self.to_run - self.ran)

    def words(self) -> str:
        """``eta 3:05`` (empty when nothing is left to run)."""
        left = self.left()
        if left is None:
            return ""
        minutes, seconds = divmod(int(left + 0.5), 60)
        hours, minutes = divmod(minutes, 60)
        return (
            f"eta {hours}:{minutes:02d}:{seconds:02d}" if hours else f"eta {minutes}:{seconds:02d}"
        )


def _bar(console: Console):
    """The run's progress bar (rich's ``Progress``, imported only when a bar is shown)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class EtaColumn(ProgressColumn):
        """The mutant phase's time left (``Eta``), repainted with the bar."""

        def render(self, task) -> Text:
            eta = task.fields.get("eta")
            return Text(eta.words() if eta is not None else "", style="progress.remaining")

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        EtaColumn(),
        console=console,
        transient=False,
    )


class _NoBar:
    """What ``Reporter`` asks of its bar, with none shown (``-q``): lines still go to the
    console, and rich's progress module (6 ms of a cached rerun's start) is not imported."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def add_task(self, description: str, **fields: object) -> int:
        return 0

    def update(self, task: int, **fields: object) -> None:
        pass

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


#: seconds between progress lines when the output is not a terminal (a log, CI)
PROGRESS_S = 10.0
#: the environment variable that sets another interval (tests set it small)
PROGRESS_ENV = "MUTANT_GATE_PROGRESS_S"


def progress_every() -> float:
    """The interval between progress lines: ``$MUTANT_GATE_PROGRESS_S`` when it is a
    positive number of seconds, else ``PROGRESS_S``."""
    try:
        every = float(os.environ.get(PROGRESS_ENV, ""))
    except ValueError:
        return PROGRESS_S
    return every if every > 0 else PROGRESS_S


class _LogBar:
    """What ``Reporter`` asks of its bar, as plain lines for output that is not a
    terminal (a pipe, a CI log), where a bar is drawn only once, at the end: a line at
    each phase change and every ``every`` seconds in between (phase, mutants done of
    the total, the verdicts so far, the time), so a long run is seen to move."""

    def __init__(self, console: Console, every: float) -> None:
        self.console, self.every = console, every
        self.fields: dict = {"description": "", "completed": 0, "total": None, "counts": ""}
        self.phase = ""
        self.started = self.said = 0.0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._ticker: threading.Thread | None = None

    def add_task(self, description: str, **fields: object) -> int:
        self.fields.update(fields, description=description)
        self.phase = _phase(description)
        return 0

    def update(self, task: int, **fields: object) -> None:
        """New fields; a new phase (the description's first word) is said at once."""
        with self._lock:
            self.fields.update(fields)
            phase = _phase(str(self.fields["description"]))
            changed, self.phase = phase != self.phase, phase
        if changed and self._ticker is not None:
            self.say()

    def line(self) -> str:
        """``mutants: 7/25 done, killed 5 survived 1 (40 s)``."""
        with self._lock:
            f = dict(self.fields)
        total = "?" if f["total"] is None else f["total"]
        counts = f", {f['counts']}" if f["counts"] else ""
        elapsed = time.monotonic() - self.started
        eta = f.get("eta")
        left = f", {eta.words()}" if eta is not None and eta.words() else ""
        return (
            f"{f['description']}: {f['completed']}/{total} mutants done{counts} "
            f"({elapsed:.0f} s{left})"
        )

    def say(self) -> None:
        self.said = time.monotonic()
        self.console.print(self.line(), highlight=False)

    def _tick(self) -> None:
        """A line whenever ``every`` seconds passed without one."""
        wait = self.every
        while not self._done.wait(wait):
            quiet = time.monotonic() - self.said
            if quiet >= self.every:
                self.say()
            wait = self.every - quiet if quiet < self.every else self.every

    def start(self) -> None:
        self.started = self.said = time.monotonic()
        self._ticker = threading.Thread(target=self._tick, name="progress-lines", daemon=True)
        self._ticker.start()

    def stop(self, said_last: bool = True) -> None:
        """End the lines; ``said_last``: one more with where the run ended."""
        self._done.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
            if said_last:
                self.say()


def _phase(description: str) -> str:
    """``original 3/10 cases`` -> ``original``: the part of the run it is in."""
    return description.split(" ", 1)[0]


class RerunReporter(Observer):
    """``mutant-gate rerun``: what is judged again, the original's baseline, and one line
    per mutant (none with ``quiet``)."""

    def __init__(self, console: Console, of_run: str | None, tests: tuple[str, ...], quiet: bool):
        self.console, self.of_run, self.tests, self.quiet = console, of_run, tests, quiet

    def say(self, line: str) -> None:
        self.console.print(line, highlight=False, soft_wrap=True)

    def on_run_started(self, event: RunStarted) -> None:
        names = ", ".join(os.path.basename(t) for t in self.tests) or "none"
        n = len(event.mutants)
        self.say(
            f"rerun of {self.of_run}: {n} mutant{'s' if n != 1 else ''} of "
            f"{event.kernel.path} (extra tests: {names})"
        )

    def on_baseline_finished(self, event: BaselineFinished) -> None:
        self.say(f"original passes its checks ({took(event)}); {limit(event)}")

    def on_run_estimated(self, event: RunEstimated) -> None:
        if event.to_run:
            for line in event.lines():
                self.say(escape(line))

    def on_mutant_finished(self, event: MutantFinished) -> None:
        if self.quiet:
            return
        outcome = event.outcome
        self.say(
            f"[dim]{event.done}/{event.total}[/] {event.mutant.id} {outcome.verdict.value}"
            + (f" by {escape(outcome.by)}" if outcome.by else "")
        )

    def on_mutant_updated(self, event: MutantUpdated) -> None:
        """A writer (``--writer``) changed a verdict."""
        outcome = event.outcome
        by = f" by {escape(outcome.by)}" if outcome.by else ""
        style = STYLES.get(outcome.verdict.value, "dim")
        self.say(f"[{style}]{event.mutant.id} {outcome.verdict.value}{by}[/]")

    # ``--writer``: the same lines as a run's
    def on_writer_note(self, event: WriterNote) -> None:
        self.say(writer_note_line(event))

    on_test_accepted = Reporter.on_test_accepted
    on_test_rejected = Reporter.on_test_rejected
