"""Accept the survivor under the cursor: one line of reason, Enter writes it to the
baseline file, Escape cancels. An empty reason is refused on the spot."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class AcceptScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "cancel")]
    DEFAULT_CSS = """
    AcceptScreen { align: center middle; }
    AcceptScreen > Vertical {
        width: 80; max-width: 100%; height: auto;
        border: thick $accent; background: $surface; padding: 1 2;
    }
    /* the dialog's width, wrapped: a label as wide as its text runs out of the box */
    AcceptScreen Label { width: 100%; }
    AcceptScreen #accept-problem { color: $error; }
    """

    def __init__(self, what: str, path: str) -> None:
        super().__init__()
        self.what = what
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Accept {self.what} in {self.path}")
            yield Label(
                "It stays a survivor; the CI gate (--accepted) leaves it out of the adjusted "
                "score while its function is unchanged. Why may it survive?"
            )
            yield Input(placeholder="the reason, for the team", id="accept-reason")
            yield Label("", id="accept-problem")

    @on(Input.Submitted)
    def _accept(self, event: Input.Submitted) -> None:
        reason = event.value.strip()
        if not reason:
            self.query_one("#accept-problem", Label).update(
                "A reason is needed: say why this survivor may stay (Escape cancels)."
            )
            return
        self.dismiss(reason)

    def action_cancel(self) -> None:
        self.dismiss(None)
