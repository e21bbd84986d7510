"""The Textual explorer: a live mutant grid, the inspector, actions on survivors, replay.

``create_app`` builds the app for a live run (``settings``), a replayed report
(``report``) or a list of cached runs to choose from (``runs``); the command
line and the tests use the same factory. The app owns the model and the bridge
and turns key presses into actions; widgets only show the model.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import partial

from textual import on
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from mutant_gate.cache import CacheUnavailable, Store
from mutant_gate.engine import accepted, formats, session
from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.session import Sandbox
from mutant_gate.engine.settings import DEFAULT_BASELINE, RunSettings
from mutant_gate.engine.vocabulary import by_words
from mutant_gate.tui.bridge import (
    NEEDS_MODEL,
    BaselineBegan,
    BaselineDone,
    EngineBridge,
    EngineNote,
    MutantJudged,
    MutantRunning,
    RunBegan,
    RunDone,
    model_key_present,
)
from mutant_gate.tui.model import Filters, RunModel
from mutant_gate.tui.screens.accept import AcceptScreen
from mutant_gate.tui.screens.explorer import ExplorerScreen
from mutant_gate.tui.screens.export import ExportScreen
from mutant_gate.tui.screens.filter import FilterScreen
from mutant_gate.tui.screens.help import HelpScreen
from mutant_gate.tui.screens.runs import RunPickerScreen

REPLAY_READ_ONLY = (
    "this is a replay (offline, read-only); open the kernel with `mutant-gate tui FILE` "
    "to do this (finished jobs come from the cache)"
)


class MutantGateApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "mutant-gate"
    BINDINGS = [
        Binding(
            "space",
            "mark",
            "mark",
            tooltip="mark / unmark the survivor under the cursor for stage 2",
        ),
        Binding("M", "mark_all", "mark all shown survivors", show=False),
        Binding(
            "a",
            "accept",
            "accept the survivor (baseline file)",
            show=False,
            tooltip="accept the survivor under the cursor, with a reason, in the baseline file",
        ),
        Binding("U", "unmark_all", "unmark all", show=False),
        Binding(
            "2",
            "stage2",
            "stage 2",
            tooltip="stage 2 on the marked survivors: the probe writer, and the model with a key",
        ),
        Binding(
            "r", "rerun(False)", "rerun", tooltip="judge the mutant again (cached result first)"
        ),
        Binding("R", "rerun(True)", "rerun in the sandbox (skip the cache)", show=False),
        Binding("c", "toggle_check('compile-check')", "compile-check on/off", show=False),
        Binding("o", "toggle_check('diff-oracle')", "diff-oracle on/off", show=False),
        Binding("f", "filter", "filter", tooltip="filter by verdict, operator / family, function"),
        Binding("slash", "search", "search", tooltip="search id, operator, function, code, reason"),
        Binding("s", "survivors", "survivors only on/off", show=False),
        Binding("g", "group", "group", tooltip="group the grid by function or by operator family"),
        Binding("z", "fold", "fold the cursor's group (a library's module)", show=False),
        Binding("Z", "fold(True)", "unfold every group, or fold all but this one", show=False),
        Binding("e", "export", "export", tooltip="write the report as JSON"),
        Binding("L", "toggle_log", "log on/off", show=False),
        Binding("J", "toggle_raw", "the mutant's report row as JSON on/off", show=False),
        Binding("escape", "back", "back / clear filter", show=False),
        Binding("question_mark,f1", "help", "help"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        *,
        settings: RunSettings | None = None,
        report: dict | None = None,
        runs: list[dict] | None = None,
        cache_dir: str | None = None,
        json_path: str | None = None,
        sandbox_factory: Callable[[RunSettings], Sandbox] | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.model = RunModel.from_report(report) if report is not None else RunModel()
        self.runs = runs
        self.cache_dir = cache_dir
        self.json_path = json_path
        self.bridge = (
            EngineBridge(self, settings, sandbox_factory=sandbox_factory) if settings else None
        )
        self.failure: BaseException | None = None

    @property
    def live(self) -> bool:
        return self.bridge is not None

    def get_default_screen(self) -> Screen:
        self._explorer = ExplorerScreen(self.model, live=self.live)
        return self._explorer

    @property
    def explorer(self) -> ExplorerScreen:
        """The main screen (also while a modal screen is on top of it)."""
        return self._explorer

    def on_ready(self) -> None:
        """The explorer is composed: start the run, or show the replay or the run list."""
        explorer = self.explorer
        if self.bridge is not None:
            explorer.header.checks = dict(self.bridge.checks)
            explorer.inspector.oracle_on = self.bridge.checks["diff-oracle"]
            self.bridge.progress_target = explorer.header
            self.bridge.start()
            explorer.log_view.say(f"starting {self.bridge.settings.kernel_path}")
            self._say_accepted_file()
        elif self.runs is not None:
            self.push_screen(RunPickerScreen(self.runs, self.cache_dir or ""), self._open_record)
        else:
            self._replayed()

    def _say_accepted_file(self) -> None:
        """Which accepted-survivors file the run reads (``--accepted``, the
        configuration's, or ``mutant-gate-baseline.toml`` found in this directory)."""
        path = self.settings.accepted_path if self.settings is not None else None
        if path:
            entries = accepted.load(path)
            self.explorer.log_view.say(f"accepted survivors: {path} ({len(entries)} entries)")

    def _open_record(self, record: dict | None) -> None:
        if record and record.get("report"):
            self.model.load(record["report"])
            self.explorer.grid.rebuild(grouping=self.model.groupings[0])
            self.explorer.header.refresh()
            self._replayed()

    def _replayed(self) -> None:
        model = self.model
        settings = model.report.get("settings") or {}
        self.explorer.inspector.oracle_on = bool(settings.get("diff_oracle"))
        self.explorer.inspector.show(self.explorer.inspector.mutant_id)
        self.explorer.log_view.say(
            f"replay of run {model.run_id}: {len(model.rows)} mutants of {model.kernel_path}"
            f"{'' if model.finished else ' (incomplete)'}"
        )

    # -- engine messages ----------------------------------------------------
    @on(RunBegan)
    def _run_began(self, message: RunBegan) -> None:
        self.model.begin(message.run_id, message.kernel_path, message.rows)
        explorer = self.explorer
        explorer.grid.rebuild()
        explorer.header.refresh()
        explorer.log_view.say(
            f"run {message.run_id}: {len(message.rows)} mutants in "
            f"{', '.join(message.functions) or 'no function'}"
        )

    @on(BaselineBegan)
    def _baseline_began(self, message: BaselineBegan) -> None:
        self.explorer.log_view.say(
            f"running the original's own check (limit {message.timeout_s:g} s)"
        )

    @on(BaselineDone)
    def _baseline_done(self, message: BaselineDone) -> None:
        how = "from the cache" if message.cached else f"in {message.duration_s:.2f} s"
        self.explorer.log_view.say(
            f"the original passes its own check ({how}); mutant limit "
            f"{message.mutant_timeout_s:.1f} CPU s"
        )

    @on(MutantRunning)
    def _mutant_running(self, message: MutantRunning) -> None:
        i = self.model.set_state(message.mutant_id, "running")
        self.explorer.grid.update_rows([i])
        row = self.model.rows[i]
        self.explorer.log_view.say(
            f"{row['id']} {row.get('operator')} line {row.get('line')}: started", style="dim"
        )

    @on(MutantJudged)
    def _mutant_judged(self, message: MutantJudged) -> None:
        row = message.row
        i = self.model.apply(row)
        explorer = self.explorer
        explorer.grid.update_rows([i])
        if explorer.inspector.mutant_id == row["id"]:
            explorer.inspector.show(row["id"])
        if message.rejudged or not row.get("cached"):
            explorer.log_view.say(log_line(row, message.rejudged))

    @on(RunDone)
    def _run_done(self, message: RunDone) -> None:
        changed = self.model.finish(message.report)
        explorer = self.explorer
        explorer.grid.update_rows(changed)
        explorer.header.refresh()
        if explorer.inspector.mutant_id:
            explorer.inspector.show(explorer.inspector.mutant_id)
        if message.again:
            return
        score = self.model.score
        cached = sum(1 for row in self.model.rows if row.get("cached"))
        explorer.log_view.say(
            f"done: {score.killed}/{score.total} killed ({score.yours} by your tests), "
            f"{score.counts.get('survived', 0)} survived; {cached} results from the cache"
        )
        if self.json_path:
            self.write_report(self.json_path)

    @on(EngineNote)
    def _engine_note(self, message: EngineNote) -> None:
        self.explorer.log_view.say(message.text)

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        """Every engine worker's failure becomes a visible error, never a traceback."""
        if event.state is not WorkerState.ERROR:
            return
        worker, error = event.worker, event.worker.error
        text = str(error) or type(error).__name__
        if not isinstance(error, BadInput):
            text = f"{type(error).__name__}: {text}"
        explorer = self.explorer
        explorer.log_view.say(f"{worker.description or worker.name} failed: {text}")
        if worker.group == "engine":
            self.failure = error
            explorer.header.failure = text
            explorer.header.refresh()
            self._stopped(text)
            self.notify(text, title="the run stopped", severity="error", timeout=30)
        else:
            self.notify(text, title=worker.description or worker.name, severity="error")

    def _stopped(self, reason: str) -> None:
        """The run stopped: every mutant without a result says why, not "queued"."""
        explorer = self.explorer
        self.model.stop(reason)
        explorer.grid.rebuild()  # every line: the group titles say "not run", not "to go"
        explorer.inspector.show(explorer.inspector.mutant_id)

    # -- actions ------------------------------------------------------------
    def _engine(self, what: str) -> EngineBridge | None:
        if self.bridge is None:
            self.notify(f"{what}: {REPLAY_READ_ONLY}", severity="warning")
        return self.bridge

    def _refresh_mutants(self, ids: Iterable[str]) -> None:
        explorer = self.explorer
        explorer.grid.update_rows([self.model.index[i] for i in ids])
        if explorer.inspector.mutant_id:
            explorer.inspector.show(explorer.inspector.mutant_id)
        explorer.header.refresh()

    def action_mark(self) -> None:
        current = self.explorer.grid.current
        if current is None:
            return
        marked = self.model.toggle_mark(current)
        if marked is None:
            self.notify("Only survivors can be marked for stage 2.", severity="warning")
            return
        self._refresh_mutants([current])

    def action_mark_all(self) -> None:
        grid = self.explorer.grid
        shown = [i for i in grid.visible_ids if self.model.row(i)["verdict"] == "survived"]
        fresh = [i for i in shown if i not in self.model.marked]
        self.model.marked.update(fresh)
        self._refresh_mutants(fresh)
        self.notify(f"{len(self.model.marked)} survivors marked for stage 2.")

    def action_unmark_all(self) -> None:
        was = list(self.model.marked)
        self.model.marked.clear()
        self._refresh_mutants(was)

    def baseline_path(self) -> str:
        """Where ``a`` writes: the run's ``--accepted`` file, else the one the replayed run
        read, else ``mutant-gate-baseline.toml`` in the current directory."""
        if self.settings is not None and self.settings.accepted_path:
            return self.settings.accepted_path
        read = (self.model.report.get("accepted") or {}).get("file")
        return read or DEFAULT_BASELINE

    def action_accept(self) -> None:
        current = self.explorer.grid.current
        if current is None:
            return
        row = self.model.row(current)
        if self.model.states[self.model.index[current]] != "survived":
            self.notify("Only survivors can be accepted.", severity="warning")
            return
        path = self.baseline_path()
        if row.get("accepted"):
            reason = row["accepted"].get("reason", "")
            self.notify(f"{current} is already accepted: {reason}", severity="information")
            return
        what = f"{current} ({row.get('operator')}, {row.get('function')} line {row.get('line')})"

        def chosen(reason: str | None) -> None:
            if reason:
                self.accept_survivor(current, reason, path)

        self.push_screen(AcceptScreen(what, path), chosen)

    def accept_survivor(self, mutant_id: str, reason: str, path: str) -> bool:
        """Write the entry for survivor ``mutant_id`` to ``path`` and show it accepted."""
        report = self.model.to_report()
        row = self.model.row(mutant_id)
        modules = formats.modules
        if modules.is_library(report):  # the entry names the survivor's module, not the library
            record = next(f for f in report["files"] if f["path"] == row.get("file"))
            report = modules.module_report(report, record)
        source = self.bridge.session.kernel_source() if self.bridge is not None else None
        if not (report.get("kernel") or {}).get("source") and source is not None:
            # a live run before its report: the kernel as the run loaded it
            kernel = self.settings.kernel_path if self.settings else self.model.kernel_path
            report["kernel"] = {"path": kernel, "source": source}
        try:
            added, present = accepted.accept(report, [{**row, "verdict": "survived"}], reason, path)
        except BadInput as exc:
            self.notify(str(exc), title="accept", severity="error")
            return False
        entry = (added or present)[0]
        self.model.accept(
            mutant_id,
            {"reason": entry.reason, "hash": entry.hash, "added": entry.added, "file": path},
        )
        self._refresh_mutants([mutant_id])
        said = "accepted" if added else "already accepted (same code)"
        self.explorer.log_view.say(f"{mutant_id} {said} in {path}: {entry.reason}")
        self.notify(f"{mutant_id} {said} in {path}.")
        return True

    def action_stage2(self) -> None:
        """The probe writer on the marked survivors (no key needed), then the model on
        those it left when a key is set and the ``[llm]`` extra is installed."""
        bridge = self._engine("stage 2")
        if bridge is None:
            return
        why_no_model = None
        try:
            session.require("openai", "the model")
        except BadInput as exc:
            why_no_model = str(exc)
        if why_no_model is None and not model_key_present():
            why_no_model = NEEDS_MODEL
        marked = [row["id"] for row in self.model.rows if row["id"] in self.model.marked]
        refused = bridge.stage2(marked, model=why_no_model is None)
        if refused:
            self.notify(refused, title="stage 2", severity="warning")
            return
        say = self.explorer.log_view.say
        if why_no_model is None:
            say(f"stage 2 on {len(marked)} marked survivors: the probe writer, then the model")
            return
        probes = 2 * bridge.settings.writers.probes
        say(
            f"stage 2 on {len(marked)} marked survivors: the probe, harder than the run's "
            f"(up to {probes} inputs each, every kind, no time limit)"
        )
        say(
            f"stage 2 without the model ({why_no_model}): a model would read each "
            "survivor's code and write a test aimed at it"
        )

    def action_rerun(self, force: bool = False) -> None:
        current = self.explorer.grid.current
        bridge = self._engine("rerun")
        if bridge is None or current is None:
            return
        refused = bridge.rerun(current, force=force)
        if refused:
            self.notify(refused, title="rerun", severity="warning")
            return
        how = "in the sandbox" if force else "from the cache (or the sandbox when not cached)"
        self.explorer.log_view.say(f"rerun {current} {how}")

    def action_toggle_check(self, name: str) -> None:
        bridge = self._engine(name)
        if bridge is None:
            return
        turn_on = not bridge.checks[name]
        refused = bridge.set_check(name, turn_on)
        if refused:
            self.notify(refused, title=name, severity="warning")
            return
        header = self.explorer.header
        header.checks = dict(bridge.checks)
        header.refresh()
        inspector = self.explorer.inspector
        inspector.oracle_on = bridge.checks["diff-oracle"]
        inspector.show(inspector.mutant_id)
        say = self.explorer.log_view.say
        if not turn_on:
            say(f"{name} off")
        elif bridge.check_targets:
            say(f"{name} on: checking {bridge.check_targets} survivors now")
        elif bridge.check_targets == 0 and bridge.finished:
            say(f"{name} on: no survivor left to check in this run")
        elif bridge.check_targets == 0:
            say(f"{name} on: no survivor to check yet; it runs on the survivors as they come")
        else:
            say(f"{name} on: it runs on the survivors once the original has passed")

    def apply_filters(self, filters: Filters) -> None:
        explorer = self.explorer
        explorer.grid.rebuild(filters=filters)
        explorer.header.filters_text = filters.describe()
        explorer.header.refresh()
        if filters.active and not explorer.grid.visible_ids:
            self.notify("No mutant matches the filter (escape clears it).", severity="warning")

    def action_filter(self) -> None:
        def chosen(filters: Filters | None) -> None:
            if filters is not None:
                self.apply_filters(filters)

        self.push_screen(FilterScreen(self.model, self.explorer.grid.filters), chosen)

    def action_survivors(self) -> None:
        filters = self.explorer.grid.filters
        only = frozenset({"survived"})
        self.apply_filters(
            replace(filters, verdicts=frozenset() if filters.verdicts == only else only)
        )

    def action_search(self) -> None:
        self.explorer.search.open()

    def on_search_bar_searched(self, event) -> None:
        explorer = self.explorer
        self.apply_filters(explorer.grid.filters.with_text(event.text))
        if event.done:
            explorer.grid.focus()

    def action_back(self) -> None:
        """Escape: back to the grid (from the inspector, full screen or not, or the log),
        else clear the filter."""
        explorer = self.explorer
        if self.screen is explorer and explorer.away_from_grid:
            explorer.back_to_grid()
        elif explorer.grid.filters.active:
            explorer.search.value = ""
            self.apply_filters(Filters())

    def action_group(self) -> None:
        """The next grouping: function, family (a library's: module, function, family)."""
        grid = self.explorer.grid
        groupings = self.model.groupings
        at = groupings.index(grid.grouping) if grid.grouping in groupings else -1
        grouping = groupings[(at + 1) % len(groupings)]
        grid.rebuild(grouping=grouping)
        self.explorer.log_view.say(f"grouped by {grouping}")

    def action_fold(self, every: bool = False) -> None:
        """Fold the cursor's group to its title line (``every``: unfold them all where
        any is folded, else fold all but the cursor's)."""
        grid = self.explorer.grid
        said = grid.fold_all() if every else grid.fold()
        if said:
            self.explorer.log_view.say(said)

    def action_toggle_raw(self) -> None:
        inspector = self.explorer.inspector
        inspector.raw = not inspector.raw
        inspector.show(inspector.mutant_id)

    def action_toggle_log(self) -> None:
        log = self.explorer.log_view
        log.display = not log.display

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(list(self.BINDINGS)))

    def action_export(self) -> None:
        default = f"mutant-gate-{self.model.run_id or 'run'}.json"

        def chosen(path: str | None) -> None:
            if path:
                self.write_report(path)

        self.push_screen(ExportScreen(default), chosen)

    def export_report(self) -> dict:
        """What export writes: the engine's report (a finished run's, as ``mutant-gate
        report RUN --format json`` writes it; a live run's as things stand, built by the
        engine), or the rows shown where the engine has none (a run before its original
        passed)."""
        bridge = self.bridge
        if bridge is not None and not bridge.finished and bridge.session.started:
            report = bridge.session.report()  # a live run, as things stand
        elif self.model.engine_report is not None:
            report = self.model.engine_report  # finished, or a replay: the stored report
        else:
            return self.model.to_report()
        return session.exported(report)[0]

    def write_report(self, path: str) -> bool:
        try:
            formats.write(self.export_report(), "json", path)
        except BadInput as exc:
            self.notify(str(exc), severity="error")
            return False
        self.explorer.log_view.say(f"report written to {path}")
        self.notify(f"Report written to {path}.")
        return True

    async def action_quit(self) -> None:
        """Close the sandbox (and with it the run) before leaving: the cache stays
        consistent and the next run resumes."""
        if self.bridge is not None and not self.bridge.stopped:
            header = self.explorer.header
            header.status = "closing the sandbox…"
            header.refresh()
            await asyncio.to_thread(self.bridge.stop)
        self.exit(return_code=2 if self.failure else 0)

    def on_unmount(self) -> None:
        if self.bridge is not None:
            self.bridge.stop()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for title, help_text, action in COMMANDS:
            yield SystemCommand(title, help_text, partial(self.run_action, action))


#: The command palette's entries: (title, help, action), the same actions as the keys.
COMMANDS = [
    ("Mark or unmark survivor", "mark the survivor under the cursor for stage 2", "mark"),
    ("Mark all shown survivors", "mark every survivor the grid shows", "mark_all"),
    ("Unmark all", "clear every mark", "unmark_all"),
    ("Run stage 2 on marked survivors", "a model writes killer tests (needs a key)", "stage2"),
    ("Rerun mutant", "judge the mutant under the cursor again (cache first)", "rerun(False)"),
    ("Rerun mutant in the sandbox", "judge it again, skipping the cache", "rerun(True)"),
    ("Toggle compile-check", "compile survivors for CUDA targets", "toggle_check('compile-check')"),
    (
        "Toggle diff-oracle",
        "compare survivors' outputs with the original's",
        "toggle_check('diff-oracle')",
    ),
    ("Filter mutants", "by verdict, operator or family, function", "filter"),
    ("Show survivors only", "toggle a survived-only filter", "survivors"),
    ("Search mutants", "by id, operator, function, code or reason", "search"),
    ("Group by function / family", "switch the grid's grouping (a library's: module)", "group"),
    ("Fold group", "fold or unfold the cursor's group (a library's module)", "fold"),
    ("Unfold every group", "unfold all, or fold all but the cursor's group", "fold(True)"),
    ("Export report JSON", "write the report as it stands", "export"),
    ("Toggle log", "show or hide the event log", "toggle_log"),
    ("Help", "keys and what the grid shows", "help"),
]


def log_line(row: dict, rejudged: bool) -> str:
    verdict = row.get("verdict", "?")
    what = f"{row['id']} {row.get('operator')} line {row.get('line')}: {verdict}"
    if verdict == "killed":
        what += f" by {by_words(row.get('by'))}"
    elif verdict in ("error", "not_compilable", "equivalent", "flaky"):
        what += f": {row.get('reason', '')}"
    return ("updated " if rejudged else "") + what


def create_app(
    *,
    settings: RunSettings | None = None,
    report: dict | None = None,
    runs: list[dict] | None = None,
    cache_dir: str | None = None,
    json_path: str | None = None,
    sandbox_factory: Callable[[RunSettings], Sandbox] | None = None,
) -> MutantGateApp:
    """The explorer for a live run (``settings``), a report (``report``) or a run list."""
    if sum(x is not None for x in (settings, report, runs)) != 1:
        raise ValueError("create_app needs exactly one of settings, report, runs")
    return MutantGateApp(
        settings=settings,
        report=report,
        runs=runs,
        cache_dir=cache_dir,
        json_path=json_path,
        sandbox_factory=sandbox_factory,
    )


# -- the command line's entry points ---------------------------------------------
def run_live(
    settings: RunSettings,
    json_path: str | None = None,
    sandbox_factory: Callable[[RunSettings], Sandbox] | None = None,
) -> int:
    """``mutant-gate tui FILE``: bad input fails before the screen changes (exit 2);
    a run that fails later (the original fails its own check) exits 2 after it."""
    if getattr(settings, "compare_modes", False):
        raise BadInput("--compare-modes is not in the explorer yet; use `mutant-gate run`")
    session.check_input(settings)
    if json_path and not os.path.isdir(os.path.dirname(os.path.abspath(json_path))):
        raise BadInput(f"--json: directory does not exist: {os.path.dirname(json_path)}")
    if settings.use_cache:
        try:
            Store(settings.cache_dir).close()
        except CacheUnavailable as exc:
            if getattr(exc, "fatal", True):
                raise
    app = create_app(settings=settings, json_path=json_path, sandbox_factory=sandbox_factory)
    try:
        app.run()
    finally:
        if app.bridge is not None:
            app.bridge.stop()
    if app.failure is not None:
        raise app.failure
    return app.return_code or 0


def run_replay(run: str | None, cache_dir: str) -> int:
    """``mutant-gate replay [RUN]``: offline, no sandbox, no key."""
    report, records = session.replay_lookup(run, cache_dir)
    if report is not None:
        app = create_app(report=report)
    else:
        app = create_app(runs=records, cache_dir=os.path.abspath(cache_dir))
    app.run()
    return app.return_code or 0
