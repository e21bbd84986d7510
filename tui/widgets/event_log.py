"""The streaming log: sandbox and writer events as they happen, bounded and scrollable."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import RichLog

#: Older lines drop off the top; the report keeps everything.
MAX_LINES = 2000


class EventLog(RichLog):
    """A ``RichLog`` that keeps the last ``MAX_LINES`` lines, each optionally timestamped."""

    DEFAULT_CSS = """
    EventLog {
        height: 8;
        border-top: solid $panel-lighten-2;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self, *, clock: bool = True, id: str | None = None) -> None:
        super().__init__(max_lines=MAX_LINES, wrap=False, markup=False, highlight=False, id=id)
        self.clock = clock
        self._started = time.monotonic()
        #: Every line written, plain (tests and export read it; bounded like the view).
        self.lines_written: list[str] = []

    def say(self, message: str, style: str = "") -> None:
        prefix = f"{time.monotonic() - self._started:7.1f}s  " if self.clock else ""
        self.lines_written.append(message)
        del self.lines_written[:-MAX_LINES]
        self.write(Text(prefix, style="dim") + Text(message, style=style))
