"""The search line under the grid: filters as you type, Enter keeps it, Escape clears it."""

from __future__ import annotations

from textual import on
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class SearchBar(Input):
    BINDINGS = [Binding("escape", "cancel", "clear search", show=False)]
    DEFAULT_CSS = """
    SearchBar { display: none; dock: bottom; }
    SearchBar.-open { display: block; }
    """

    class Searched(Message):
        """The search text changed (empty: no search)."""

        def __init__(self, text: str, done: bool) -> None:
            super().__init__()
            self.text, self.done = text, done

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder="search id, operator, function, code, reason…", id=id)

    def open(self) -> None:
        self.add_class("-open")
        self.focus()

    def close(self) -> None:
        self.remove_class("-open")

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Searched(event.value, done=False))

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.close()
        self.post_message(self.Searched(event.value, done=True))

    def action_cancel(self) -> None:
        self.value = ""
        self.close()
        self.post_message(self.Searched("", done=True))
