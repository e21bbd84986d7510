"""Choose a past run to replay (``mutant-gate replay`` without RUN).

Identical runs (the same kernel file, settings and verdicts: a cached rerun of the same
command) fold into one row with a count; ``d`` removes a row's runs from the cache.
"""

from __future__ import annotations

import json
import os
import time

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Label, OptionList
from textual.widgets.option_list import Option

#: Settings that do not change what a run decides (where it ran, how wide).
_INCIDENTAL = {"workers", "cache_dir", "use_cache", "fail_under"}


def fold_key(record: dict) -> str:
    """Records with the same key are the same run repeated; a run without a report
    (interrupted) is its own."""
    report = record.get("report")
    if not report:
        return f"run {record.get('run_id')}"
    settings = {k: v for k, v in (report.get("settings") or {}).items() if k not in _INCIDENTAL}
    verdicts = [(m.get("id"), m.get("verdict"), m.get("by")) for m in report.get("mutants", [])]
    kernel = (report.get("kernel") or {}).get("sha256")
    return json.dumps([kernel, settings, verdicts], sort_keys=True, default=str)


def fold(records: list[dict]) -> list[list[dict]]:
    """Groups of identical runs, newest group first, each newest first."""
    groups: dict[str, list[dict]] = {}
    for record in sorted(records, key=lambda r: r.get("saved_at", 0), reverse=True):
        groups.setdefault(fold_key(record), []).append(record)
    return list(groups.values())


def describe_run(record: dict, count: int = 1) -> str:
    """kernel, date, score, writer and mode of a run (``×N`` for N identical runs)."""
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
    mine = "your tests " if "with_written" in score else ""
    how = f"{mine}{score.get('killed', 0)}/{score.get('total', 0)} killed"
    how += f", adjusted {adjusted:.1f}%" if adjusted is not None else ""
    settings = report.get("settings") or {}
    writer = (settings.get("writers") or {}).get("writer", "?")
    mode = settings.get("mode", "?")
    times = f"  ×{count}" if count > 1 else ""
    return f"{record.get('run_id')}  {kernel}  {when}  {how}  writer {writer}, {mode}{times}"


class RunPickerScreen(Screen[dict]):
    """Newest first; a run without a report (interrupted) is shown but cannot be opened."""

    BINDINGS = [
        Binding("escape,q", "app.quit", "quit"),
        Binding("d,delete", "delete", "delete from the cache"),
    ]
    DEFAULT_CSS = """
    RunPickerScreen > Label { padding: 1 1 0 1; text-style: bold; }
    RunPickerScreen > OptionList { height: 1fr; margin: 1; }
    """

    def __init__(self, records: list[dict], cache_dir: str) -> None:
        super().__init__(id="runs")
        self.groups = {group[0]["run_id"]: group for group in fold(records)}
        self.cache_dir = cache_dir

    def compose(self) -> ComposeResult:
        yield Label(f"Runs in {self.cache_dir}: choose one to replay (offline)")
        yield OptionList(
            *(
                Option(describe_run(g[0], len(g)), id=key, disabled=not g[0].get("report"))
                for key, g in self.groups.items()
            ),
            id="run-list",
        )
        yield Footer()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.groups[event.option.id][0])

    def action_delete(self) -> None:
        """Remove the highlighted row's runs (all of a folded row) from the cache."""
        from mutant_gate.engine.session import delete_runs

        options = self.query_one("#run-list", OptionList)
        if options.highlighted is None:
            return
        key = options.get_option_at_index(options.highlighted).id
        assert key is not None
        gone = delete_runs([r["run_id"] for r in self.groups.pop(key)], self.cache_dir)
        options.remove_option(key)
        self.notify(f"removed {len(gone)} run{'s' if len(gone) != 1 else ''} from the cache")
