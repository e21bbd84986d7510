"""The main screen: header, legend, the grid beside the inspector, the log, the footer."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer

from mutant_gate.tui.model import RunModel
from mutant_gate.tui.widgets.event_log import EventLog
from mutant_gate.tui.widgets.inspector import Inspector
from mutant_gate.tui.widgets.legend import Legend
from mutant_gate.tui.widgets.mutant_grid import MutantGrid
from mutant_gate.tui.widgets.run_header import RunHeader
from mutant_gate.tui.widgets.search_bar import SearchBar


class ExplorerScreen(Screen):
    """Widgets only; the app owns the model, the bridge and the actions."""

    #: Escape is the explorer's own (back to the grid, focused): Textual's default would
    #: only shrink the inspector and leave the keyboard in it.
    ESCAPE_TO_MINIMIZE = False

    def __init__(self, model: RunModel, *, live: bool) -> None:
        super().__init__(id="explorer")
        self.model = model
        self.live = live

    def compose(self) -> ComposeResult:
        yield RunHeader(self.model, live=self.live, id="header")
        yield Legend(id="legend")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield MutantGrid(self.model, grouping=self.model.groupings[0], id="grid")
                yield SearchBar(id="search")
            yield Inspector(self.model, id="inspector")
        yield EventLog(clock=self.live, id="log")
        yield Footer()

    def on_mount(self) -> None:
        self.grid.focus()

    # Typed access for the app and the tests.
    @property
    def grid(self) -> MutantGrid:
        return self.query_one("#grid", MutantGrid)

    @property
    def inspector(self) -> Inspector:
        return self.query_one("#inspector", Inspector)

    @property
    def header(self) -> RunHeader:
        return self.query_one("#header", RunHeader)

    @property
    def log_view(self) -> EventLog:
        return self.query_one("#log", EventLog)

    @property
    def search(self) -> SearchBar:
        return self.query_one("#search", SearchBar)

    @on(MutantGrid.Highlighted)
    def _follow_cursor(self, event: MutantGrid.Highlighted) -> None:
        self.inspector.show(event.mutant_id)

    @property
    def away_from_grid(self) -> bool:
        """The inspector is full screen, or the keyboard is elsewhere than the grid."""
        return self.maximized is not None or self.focused is not self.grid

    def back_to_grid(self) -> None:
        """The grid again, full size and focused, its cursor on the cell it was on."""
        if self.maximized is not None:
            self.minimize()
        self.grid.focus()

    @on(MutantGrid.Chosen)
    def _inspect(self, event: MutantGrid.Chosen) -> None:
        """Enter or a double click: the mutant full screen, the keyboard in it (its own
        keys in the footer) until Escape."""
        self.inspector.show(event.mutant_id)
        self.maximize(self.inspector, container=False)
        self.inspector.focus()

    @on(Inspector.Left)
    def _left_inspector(self, event: Inspector.Left) -> None:
        event.stop()
        self.back_to_grid()
