"""The header: what runs, how far it is, the score, and the speed.

Live numbers arrive as coalescable ``Progress`` messages posted straight to this
widget by the bridge, so a burst of cached results paints the header once. The
score is read from the model at paint time, so it is never behind the grid.
"""

from __future__ import annotations

import os
import time

from rich.text import Text
from textual.widget import Widget

from mutant_gate.tui.bridge import Progress
from mutant_gate.tui.model import RunModel

BAR_WIDTH = 24


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class RunHeader(Widget):
    """Two lines: the run, then progress, score, elapsed, jobs/s, tokens and cost."""

    COMPONENT_CLASSES = {"-title", "-bar-done", "-bar-todo", "-score", "-failed", "-dim"}
    DEFAULT_CSS = """
    RunHeader { height: 2; padding: 0 1; }
    RunHeader > .-title { text-style: bold; }
    RunHeader > .-score { text-style: bold; }
    RunHeader > .-failed { text-style: bold; }
    """

    def __init__(self, model: RunModel, *, live: bool, id: str | None = None) -> None:
        super().__init__(id=id)
        self.model = model
        self.live = live
        self.progress: Progress | None = None
        self.status = "starting" if live else ""
        self.failure: str | None = None
        self.checks: dict[str, bool] = {}
        self.filters_text = ""

    def on_mount(self) -> None:
        if self.live:
            self._ticker = self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self.progress is not None and self.progress.finished_at is None:
            self.refresh()

    def on_progress(self, message: Progress) -> None:
        self.progress = message
        self.status = message.phase
        self.refresh()

    def render(self) -> Text:
        return self._top() + Text("\n") + self._bottom()

    def _top(self) -> Text:
        """The file, the run, live or replay, the toggled checks and the filter."""
        style = self.get_component_rich_style
        model = self.model
        name = os.path.basename(model.kernel_path) or "(loading)"
        top = Text(no_wrap=True, overflow="ellipsis")
        top.append("mutant-gate ", style("-dim"))
        top.append(name, style("-title"))
        if model.run_id:
            top.append(f"  run {model.run_id}", style("-dim"))
        if self.failure:
            top.append("  failed: ", style("-failed"))
            top.append(self.failure, style("-failed"))
        elif self.live:
            top.append("  live: ", style("-dim"))
            top.append(self.status)
            since = self.progress.phase_since if self.progress is not None else None
            if since is not None and self.status != "finished":  # long work shows it is alive
                top.append(f" {clock(time.monotonic() - since)}", style("-dim"))
        else:
            top.append("  replay", style("-dim"))
            top.append("" if model.finished else " (incomplete run)")
        for check, on in self.checks.items():
            top.append(f"  {check} {'on' if on else 'off'}", style("-dim") if not on else "")
        if self.filters_text:
            top.append(f"  filter: {self.filters_text}")
        return top

    def _bottom(self) -> Text:
        """The bar, the counts, the two scores, then the run's pace and tokens."""
        style = self.get_component_rich_style
        model, score = self.model, self.model.score
        bottom = Text(no_wrap=True, overflow="ellipsis")
        total = score.total
        filled = round(BAR_WIDTH * score.done / total) if total else 0
        bottom.append("━" * filled, style("-bar-done"))
        bottom.append("━" * (BAR_WIDTH - filled), style("-bar-todo"))
        bottom.append(f" {score.done}/{total} done", style("-score"))
        bottom.append(f"  killed {score.killed}")
        survived = score.counts.get("survived", 0)
        if survived:
            bottom.append(f"  survived {survived}")
        bottom.append("  your tests raw ")
        bottom.append(percent(score.raw), style("-score"))
        bottom.append(" adjusted ")
        bottom.append(percent(score.adjusted), style("-score"))
        if score.written:
            bottom.append(f"  with written {percent(score.with_written)}")
        if model.marked:
            bottom.append(f"  {len(model.marked)} marked")
        if score.excluded:
            bottom.append(f" ({score.excluded} excluded)", style("-dim"))
        if score.accepted:
            bottom.append(f" ({score.accepted} accepted)", style("-dim"))
        self._pace(bottom)
        return bottom

    def _pace(self, bottom: Text) -> None:
        """Elapsed time, jobs a second, cached and running jobs, tokens spent."""
        style = self.get_component_rich_style
        progress = self.progress
        if progress is not None and progress.elapsed_s is not None:
            bottom.append(f"  {clock(progress.elapsed_s)} elapsed")
            rate = progress.jobs_per_s
            bottom.append(f"  {rate:.1f} jobs/s" if rate else "  - jobs/s", style("-dim"))
            if progress.cached:
                bottom.append(f"  {progress.cached} cached", style("-dim"))
        if progress is not None and progress.running and progress.oldest_running is not None:
            longest = clock(time.monotonic() - progress.oldest_running)
            bottom.append(f"  {progress.running} running, longest {longest}", style("-dim"))
        tokens = (progress.tokens if progress else None) or self.model.report.get("tokens")
        if tokens and (tokens.get("prompt") or tokens.get("completion")):
            used = (tokens.get("prompt") or 0) + (tokens.get("completion") or 0)
            bottom.append(f"  tokens {used:,}")
            if tokens.get("cost_usd") is not None:
                bottom.append(f" ${tokens['cost_usd']:.4f}")
