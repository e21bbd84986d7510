"""Where to write the report: one line, prefilled, Enter writes, Escape cancels.

The dialog is a box of fixed parts (a title, the field, a hint) sized to the terminal
(never wider than it, never taller than its content), on its own layer above the
explorer, with the field focused as it opens: what the user types is where the user
sees it, and a key pressed while it is open never goes to a field that is not shown.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class ExportScreen(ModalScreen[str | None]):
    AUTO_FOCUS = "#export-path"
    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    ExportScreen { align: center middle; }
    ExportScreen > #export-dialog {
        width: 70; max-width: 100%; height: auto; max-height: 100%;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    ExportScreen Label { width: 100%; }
    ExportScreen #export-path { width: 100%; }
    ExportScreen #export-hint { color: $text-muted; }
    """

    def __init__(self, default_path: str) -> None:
        super().__init__()
        self.default_path = default_path

    def compose(self) -> ComposeResult:
        with Vertical(id="export-dialog"):
            yield Label("Write the JSON report to:", id="export-title")
            yield Input(self.default_path, id="export-path", select_on_focus=False)
            yield Label("Enter writes, Escape cancels", id="export-hint")

    @on(Input.Submitted)
    def _write(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
