"""The command line's reporter: one method per engine event, found by the event's name."""

from __future__ import annotations

import dataclasses
import inspect
import io

from rich.console import Console

from mutant_gate.cli.reporter import Observer, Reporter, RerunReporter, handler_name
from mutant_gate.engine import events


def event_classes() -> dict[str, type]:
    return {
        name: cls
        for name, cls in inspect.getmembers(events, inspect.isclass)
        if cls.__module__ == events.__name__ and dataclasses.is_dataclass(cls)
    }


def test_handler_names():
    note = events.WriterNote("probe", "hello")
    assert handler_name(note) == "on_writer_note"
    assert handler_name(events.OwnCheckJudged(True, "", "")) == "on_own_check_judged"


def test_every_handler_names_an_event():
    """A renamed event must not leave a handler that is never called."""
    known = {handler_name(cls.__new__(cls)) for cls in event_classes().values()}
    for observer in (Observer, Reporter, RerunReporter):
        handlers = {n for n in dir(observer) if n.startswith("on_")}
        assert handlers <= known, handlers - known


def test_reporter_says_writer_events_and_ignores_the_unknown():
    out = io.StringIO()
    reporter = Reporter(Console(file=out, width=200), quiet=True)
    with reporter:
        reporter.handle(events.WriterNote("probe", "no difference found", level="warning"))
        reporter.handle(events.TestRejected("stage2", 2, "it fails the original", "m0007"))
        reporter.handle(events.BaselineStarted(30.0))  # no method: nothing said
        reporter.handle(object())  # not an engine event at all
        reporter.handle(events.RunFinished({"mutants": []}))
    text = out.getvalue()
    assert "probe: no difference found" in text
    assert "stage2: rejected attempt 2 for m0007: it fails the original" in text
    assert len(text.strip().splitlines()) == 2
    assert reporter.report == {"mutants": []}
