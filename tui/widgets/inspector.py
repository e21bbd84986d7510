"""The inspector: everything known about the mutant under the grid's cursor.

Diff, verdict and why, the killing or candidate tests' source, the diff-oracle's
sentence, the tolerance that let a survivor through, compile results per target, and
what the writers claimed and tried (probe, stage 2). A section whose report field is absent is left out, so the
inspector reads the same before and after the writers and checks are switched on.

All sections are one ``Content`` in one ``Static``: a key press then costs one
widget's layout, not two dozen (measured: 3x fewer widgets to arrange per key).
"""

from __future__ import annotations

import json

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Label, Static

from mutant_gate.engine.vocabulary import CHECK_NAMES
from mutant_gate.tui import render
from mutant_gate.tui.model import KIND_WORDS, RunModel, survivor_kind

#: Section keys and titles, in the order they are shown.
SECTIONS = {
    "diff": "diff",
    "test": "killing test",
    "candidates": "tests that kill it too",
    CHECK_NAMES["diff-oracle"]: "diff-oracle",
    CHECK_NAMES["tolerance"]: "tolerance",
    CHECK_NAMES["compile-check"]: "compile-check",
    "writers": "claims and attempts (probe, stage 2)",
    "more": "more",
}


class Inspector(VerticalScroll, can_focus=True):
    """The chosen mutant's sections. Enter on the grid opens it full screen and focused:
    then the arrows scroll it, and Escape (``Left``) gives the keyboard back to the grid."""

    #: Enter opens it full screen (a scrolling container is not maximizable by default).
    ALLOW_MAXIMIZE = True
    BINDINGS = [
        Binding("escape", "leave", "back to the grid"),
        Binding("down", "scroll_down", "scroll", key_display="↑ ↓"),
        Binding("pagedown", "page_down", "page", key_display="pgup pgdn"),
        Binding("J", "app.toggle_raw", "row as JSON"),
    ]
    DEFAULT_CSS = """
    Inspector { padding: 0 1; }
    Inspector > #inspector-title { text-style: bold; width: 1fr; height: auto; }
    Inspector > #inspector-verdict { padding: 0 1; margin: 1 0 0 0; text-style: bold; }
    Inspector > Static { height: auto; width: 1fr; text-wrap: wrap; }
    """

    def __init__(self, model: RunModel, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = model
        self.mutant_id: str | None = None
        #: What each shown section holds (absent: hidden), for tests and the benchmark.
        self.sections: dict[str, Content] = {}
        #: Show the mutant's report row as JSON instead of the sections (``J``).
        self.raw = False
        #: The diff-oracle runs on survivors (the app keeps it as the toggle says).
        self.oracle_on = False

    class Left(Message):
        """Escape in the inspector: the keyboard goes back to the grid."""

    def action_leave(self) -> None:
        self.post_message(self.Left())

    def compose(self) -> ComposeResult:
        yield Static("No mutant selected.", id="inspector-title")
        yield Label("", id="inspector-verdict")
        yield Static("", id="inspector-body")

    def section_text(self, key: str) -> str:
        """A shown section's text ("" when hidden)."""
        content = self.sections.get(key)
        return content.plain if content is not None else ""

    def show(self, mutant_id: str | None) -> None:
        """Fill every section for ``mutant_id`` (None: an empty grid)."""
        self.mutant_id = mutant_id
        title = self.query_one("#inspector-title", Static)
        verdict = self.query_one("#inspector-verdict", Label)
        body = self.query_one("#inspector-body", Static)
        model = self.model
        if mutant_id is None or mutant_id not in model.index:
            title.update("No mutant matches." if model.rows else "No mutants yet.", layout=False)
            verdict.display = False
            self.sections = {}
            body.update("")
            return
        i = model.index[mutant_id]
        row, state = model.rows[i], model.states[i]
        title.update(
            Content.assemble(
                (f"{row['id']}  ", "bold"),
                f"{row.get('operator')} ({row.get('family')}) in {row.get('function')} "
                f"line {row.get('line')}:{row.get('col')}",
            ),
            layout=False,
        )
        stopped = model.stopped if state in ("pending", "running") else None
        verdict.display = True
        verdict.update(self._label(row, state, stopped))
        verdict.set_classes(["-error" if stopped else f"-{state}"])

        if self.raw:
            self.sections = {"raw": Content(json.dumps(row, indent=1, default=str))}
            body.update(self.sections["raw"])
            return
        why = render.why(row, state, oracle_on=self.oracle_on, stopped=stopped)
        self.sections = sections = {"why": Content(why)}
        killer = self._fill(sections, row)
        parts = [sections["why"]]
        for key, heading in SECTIONS.items():
            if key in sections:
                if key == "test" and killer:
                    heading = f"killing test: {killer.get('name')}"
                parts.append(Content.styled(f"\n{heading}", "bold $text-accent"))
                parts.append(sections[key])
        body.update(Content("\n").join(parts))
        if self.scroll_y:
            self.scroll_home(animate=False)

    def _label(self, row: dict, state: str, stopped: object) -> str:
        """The verdict line: the state, who killed it, cached, its survivor kind, marked."""
        label = "not run" if stopped else state.replace("_", " ")
        if state == "killed" and row.get("by"):
            label += f" by {row['by']}"
        if row.get("cached") and state not in ("pending", "running"):
            label += "  (from cache)"
        kind = survivor_kind(row)
        if kind is not None:
            label += f" · {KIND_WORDS[kind]}"
        if row["id"] in self.model.marked:
            label += "  [marked for stage 2]"
        return label

    def _fill(self, sections: dict, row: dict) -> dict | None:
        """The row's sections past its "why" into ``sections``; the killing test, if any."""
        model = self.model
        if row.get("diff"):
            sections["diff"] = render.diff_content(row["diff"])
        killer = model.killing_test(row)
        if killer:
            sections["test"] = render.test_content(killer)
        candidates = model.candidate_tests(row)
        if candidates:
            sections["candidates"] = Content("\n\n").join(
                render.test_content(t) for t in candidates
            )
        if row.get("oracle"):
            sections["oracle"] = render.oracle_content(row["oracle"])
        if row.get("tolerance"):
            test_line = model.tolerance_test_line(row)
            sections["tolerance"] = render.tolerance_content(row["tolerance"], test_line)
        if row.get("compile"):
            sections["compile"] = render.compile_content(row["compile"])
        writers = render.writers_content(row.get("claims"), row.get("attempts"), row.get("probe"))
        if writers.plain:
            sections["writers"] = writers
        extra = {k: v for k, v in row.items() if k not in render.KNOWN_FIELDS}
        if extra:
            sections["more"] = render.fact_lines(list(extra.items()))
        return killer
