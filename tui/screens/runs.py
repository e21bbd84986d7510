"""Choose a past run to replay (``mutant-gate replay`` without RUN)."""

from __future__ import annotations

import os
import time

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Label, OptionList
from textual.widgets.option_list import Option


def describe_run(record: dict) -> str:
    report = record.get("report") or {}
    kernel = os.path.basename(record.get("kernel") or report.get("kernel", {}).get("path", "?"))
    when = (
        time.strftime("%Y-%m-%d %H:%M", time.localtime(record["saved_at"]))
        if record.get("saved_at")
        else ""
    )
    if not report:
        return f"{record.get('run_id')}  {kernel}  {when}  interrupted: no report to replay"
    score = report.get("score", {})
    adjusted = score.get("adjusted")
    how = f"{score.get('killed', 0)}/{score.get('total', 0)} killed"
    how += f", adjusted {adjusted:.1f}%" if adjusted is not None else ""
    return f"{record.get('run_id')}  {kernel}  {when}  {how}"


class RunPickerScreen(Screen[dict]):
    """Newest first; a run without a report (interrupted) is shown but cannot be opened."""

    BINDINGS = [Binding("escape,q", "app.quit", "quit")]
    DEFAULT_CSS = """
    RunPickerScreen > Label { padding: 1 1 0 1; text-style: bold; }
    RunPickerScreen > OptionList { height: 1fr; margin: 1; }
    """

    def __init__(self, records: list[dict], cache_dir: str) -> None:
        super().__init__(id="runs")
        self.records = sorted(records, key=lambda r: r.get("saved_at", 0), reverse=True)
        self.cache_dir = cache_dir

    def compose(self) -> ComposeResult:
        yield Label(f"Runs in {self.cache_dir}: choose one to replay (offline)")
        yield OptionList(
            *(
                Option(describe_run(r), id=r["run_id"], disabled=not r.get("report"))
                for r in self.records
            ),
            id="run-list",
        )
        yield Footer()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        record = next(r for r in self.records if r["run_id"] == event.option.id)
        self.dismiss(record)
