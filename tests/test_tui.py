"""The explorer on a replayed run: the real app, driven by Pilot, no sandbox.

The report is a real one (``mutant-gate run examples/layer_norm.py``, probe writer on),
saved with a fixed run id. Assertions are on the app's state and on the messages
it posted (``run_test(message_hook=...)``).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest
from textual.widgets import Input, Markdown, SelectionList

from mutant_gate.cache import Store
from mutant_gate.engine import accepted
from mutant_gate.engine.errors import BadInput
from mutant_gate.engine.session import replay_lookup
from mutant_gate.engine.settings import DEFAULT_BASELINE
from mutant_gate.tui.app import COMMANDS, create_app
from mutant_gate.tui.bridge import Progress
from mutant_gate.tui.model import Filters, RunModel
from mutant_gate.tui.screens.accept import AcceptScreen
from mutant_gate.tui.screens.filter import FilterScreen
from mutant_gate.tui.screens.help import HelpScreen
from mutant_gate.tui.widgets.mutant_grid import MutantGrid

from .conftest import EXAMPLES, run_cli

DATA = Path(__file__).parent / "data"
SIZE = (140, 40)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Textual runs on asyncio


@pytest.fixture
def report() -> dict:
    return json.loads((DATA / "tui_layer_norm_report.json").read_text())


def survivors(report: dict) -> list[str]:
    return [m["id"] for m in report["mutants"] if m["verdict"] == "survived"]


def notifications(app) -> list[str]:
    return [n.message for n in app._notifications]


@pytest.mark.anyio
async def test_replay_shows_every_mutant_and_follows_the_cursor(report):
    app = create_app(report=report)
    seen = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await pilot.pause()
        grid, inspector = app.explorer.grid, app.explorer.inspector
        assert sorted(grid.visible_ids) == sorted(m["id"] for m in report["mutants"])
        assert Counter(app.model.states) == Counter(report["score"]["by_verdict"])
        assert app.model.score.raw == report["score"]["raw"]
        assert app.model.score.adjusted == report["score"]["adjusted"]
        first = grid.current
        assert inspector.mutant_id == first
        await pilot.press("right", "down")
        await pilot.pause()
        assert grid.current not in (None, first)
        assert inspector.mutant_id == grid.current
        moved = [m.mutant_id for m in seen if isinstance(m, MutantGrid.Highlighted)]
        assert moved[-1] == grid.current and len(set(moved)) >= 3
        row = app.model.row(grid.current)
        assert inspector.section_text("diff").startswith("--- a/layer_norm.py")
        assert row["after"].strip() in inspector.section_text("diff")
        # A mouse click selects the cell under it.
        await pilot.click(MutantGrid, offset=(1, 1))
        await pilot.pause()
        assert grid.current == grid.visible_ids[0]
        # The replay is offline: no engine, no sandbox.
        assert app.bridge is None


@pytest.mark.anyio
async def test_inspector_explains_a_kill_with_the_test_that_did_it(report):
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        bounds = next(m for m in report["mutants"] if m["by"] == "bounds")
        own = next(m for m in report["mutants"] if m["by"] == "own-check")
        inspector = app.explorer.inspector
        assert app.explorer.grid.select(bounds["id"])
        await pilot.pause()
        assert "Killed by the bounds check" in inspector.section_text("why")
        assert "out-of-bounds" in inspector.section_text("why")
        assert inspector.section_text("test") == ""  # no test: the bounds check did it
        app.explorer.grid.select(own["id"])
        await pilot.pause()
        assert "torch.testing.assert_close" in inspector.section_text("test")
        survivor = survivors(report)[0]
        app.explorer.grid.select(survivor)
        await pilot.pause()
        assert "Survived" in inspector.section_text("why")
        assert "not distinguished by 24 probes" in inspector.section_text("writers")


@pytest.mark.anyio
async def test_inspector_shows_oracle_compile_and_stage2_when_the_report_has_them(report):
    report = copy.deepcopy(report)
    target = survivors(report)[0]
    row = next(m for m in report["mutants"] if m["id"] == target)
    row["oracle"] = {
        "sentence": "outputs differ in Mean (max abs 0.25); the test passes anyway",
        "launches": 2,
        "identical": False,
        "diffs": [{"argument": "Mean", "max_abs": 0.25, "first_index": [3]}],
        "interpreter_dependent": False,
    }
    row["compile"] = {
        "sm_75": {"ok": True, "message": ""},
        "sm_90": {"ok": False, "message": "unsupported dtype"},
    }
    row["attempts"] = [
        {
            "by": "stage2",
            "why": "passes on the mutant too: it does not kill it",
            "source": "def test_a():\n    assert 1\n",
        }
    ]
    row["novel_field"] = {"from": "a later stage"}
    report["tests"].append(
        {
            "name": "test_mean",
            "origin": "stage2",
            "kills": [target],
            "source": "def test_mean():\n    pass\n",
        }
    )
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.explorer.grid.select(target)
        await pilot.pause()
        inspector = app.explorer.inspector
        assert "outputs differ in Mean" in inspector.section_text("oracle")
        assert "launches compared  2" in inspector.section_text("oracle")
        compile_text = inspector.section_text("compile").splitlines()
        assert compile_text[1].split() == ["sm_75", "compiles", "-", "-"]
        assert compile_text[2].split() == [
            "sm_90",
            "does",
            "not",
            "compile",
            "-",
            "unsupported",
            "dtype",
        ]
        writers = inspector.section_text("writers")
        assert "passes on the mutant too" in writers and "def test_a" in writers
        assert "def test_mean" in inspector.section_text("candidates")
        assert "a later stage" in inspector.section_text("more")
        # Another mutant without those fields hides the sections.
        other = next(m["id"] for m in report["mutants"] if m["verdict"] == "killed")
        app.explorer.grid.select(other)
        await pilot.pause()
        assert "oracle" not in inspector.sections and "compile" not in inspector.sections


@pytest.mark.anyio
async def test_mark_survivors_only(report):
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = app.explorer.grid
        killed = next(m["id"] for m in report["mutants"] if m["verdict"] == "killed")
        grid.select(killed)
        await pilot.press("space")
        await pilot.pause()
        assert app.model.marked == set()
        assert "Only survivors can be marked for stage 2." in notifications(app)
        one, two = survivors(report)[:2]
        grid.select(one)
        await pilot.press("space")
        grid.select(two)
        await pilot.press("space")
        await pilot.pause()
        assert app.model.marked == {one, two}
        assert "[marked for stage 2]" in str(app.explorer.query_one("#inspector-verdict").render())
        await pilot.press("space")  # unmark
        await pilot.pause()
        assert app.model.marked == {one}
        await pilot.press("s", "M")  # survivors only, then mark all shown
        await pilot.pause()
        assert app.model.marked == set(survivors(report))
        await pilot.press("U")
        await pilot.pause()
        assert app.model.marked == set()


@pytest.mark.anyio
async def test_accept_a_survivor_writes_the_baseline_file(report, tmp_path, monkeypatch):
    """``a`` on a survivor asks for a reason and writes the same entry as ``baseline add``;
    the survivor stays a survivor and leaves the adjusted score (never counted killed)."""
    monkeypatch.chdir(tmp_path)
    report["kernel"]["source"] = (EXAMPLES / "layer_norm.py").read_text()
    app = create_app(report=report)
    path = tmp_path / DEFAULT_BASELINE
    one = survivors(report)[0]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = app.explorer.grid
        grid.select(next(m["id"] for m in report["mutants"] if m["verdict"] == "killed"))
        await pilot.press("a")
        await pilot.pause()
        assert "Only survivors can be accepted." in notifications(app)
        grid.select(one)
        await pilot.press("a")
        await pilot.pause()
        assert isinstance(app.screen, AcceptScreen) and DEFAULT_BASELINE in app.screen.path
        await pilot.press("enter")  # no reason: refused on the spot
        await pilot.pause()
        assert isinstance(app.screen, AcceptScreen) and not path.exists()
        app.screen.query_one(Input).value = "the wrapper pads every row"
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, AcceptScreen)
        verdict = str(app.explorer.query_one("#inspector-verdict").render())
        assert verdict.startswith("survived")
        why = app.explorer.inspector.section_text("why")
        assert "Accepted by the team" in why and "the wrapper pads every row" in why
        score = app.model.score
        assert score.accepted == 1 and score.killed == report["score"]["killed"]
        expected = app.model.to_report()["score"]
        assert score.adjusted == expected["adjusted"] != report["score"]["adjusted"]
        assert expected["accepted"] == [{"id": one, "reason": "the wrapper pads every row"}]
        await pilot.press("a")  # once is enough
        await pilot.pause()
        assert any("already accepted" in n for n in notifications(app))
    (entry,) = accepted.load(str(path))
    row = next(m for m in report["mutants"] if m["id"] == one)
    assert entry.hash == accepted.content_hash(report["kernel"]["source"], row)
    assert (entry.id, entry.reason, entry.line) == (one, "the wrapper pads every row", row["line"])


@pytest.mark.anyio
async def test_accept_needs_the_kernel_source(report, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    app = create_app(report=report)  # an old report: no kernel source to hash
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        one = survivors(report)[0]
        app.explorer.grid.select(one)
        assert not app.accept_survivor(one, "fine", str(tmp_path / "b.toml"))
        await pilot.pause()
        assert any("holds no kernel source" in n for n in notifications(app))
        assert app.model.score.accepted == 0 and not (tmp_path / "b.toml").exists()


@pytest.mark.anyio
async def test_filters_search_and_grouping(report):
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        grid = app.explorer.grid
        await pilot.press("s")
        await pilot.pause()
        assert sorted(grid.visible_ids) == sorted(survivors(report))
        assert "verdict survived" in app.explorer.header.filters_text
        await pilot.press("escape")
        await pilot.pause()
        assert len(grid.visible_ids) == len(report["mutants"])
        # Search narrows as you type; Enter keeps it; Escape clears.
        await pilot.press("slash")
        await pilot.press(*"fp16")
        await pilot.pause()
        expected = {m["id"] for m in report["mutants"] if "fp16" in (m["after"] + m["operator"])}
        assert expected and set(grid.visible_ids) == expected
        await pilot.press("enter")
        await pilot.pause()
        assert app.focused is grid and set(grid.visible_ids) == expected
        await pilot.press("escape")
        await pilot.pause()
        assert len(grid.visible_ids) == len(report["mutants"])
        # The filter screen: tick a family.
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, FilterScreen)
        app.screen.query_one("#operators", SelectionList).select("masks")
        await pilot.press("ctrl+s")
        await pilot.pause()
        masks = {m["id"] for m in report["mutants"] if m["family"] == "masks"}
        assert set(grid.visible_ids) == masks
        await pilot.press("escape")
        # Grouping: by function (one here), then by family.
        await pilot.pause()
        assert grid.group_keys == ["_layer_norm_fwd_fused"]
        await pilot.press("g")
        await pilot.pause()
        assert sorted(grid.group_keys) == sorted({m["family"] for m in report["mutants"]})
        assert len(grid.visible_ids) == len(report["mutants"])


@pytest.mark.anyio
async def test_actions_that_need_the_engine_say_why_in_a_replay(report, monkeypatch):
    for key in ("NEBIUS_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # Without a key stage 2 is the probe alone, which a replay cannot run either.
        await pilot.press("2")
        await pilot.pause()
        assert [n for n in notifications(app) if n.startswith("stage 2: this is a replay")]
        monkeypatch.setenv("NEBIUS_API_KEY", "sk-test")
        await pilot.press("2", "r", "c")
        await pilot.pause()
        said = notifications(app)
        assert any(n.startswith("stage 2: this is a replay") for n in said)
        assert any(n.startswith("rerun: this is a replay") for n in said)
        assert any(n.startswith("compile-check: this is a replay") for n in said)


@pytest.mark.anyio
async def test_export_writes_the_report_as_it_stands(report, tmp_path):
    app = create_app(report=report)
    path = tmp_path / "out.json"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        field = app.screen.query_one(Input)
        assert field.value == f"mutant-gate-{report['run_id']}.json"
        field.value = str(path)
        await pilot.press("enter")
        await pilot.pause()
    written = json.loads(path.read_text())
    assert [m["verdict"] for m in written["mutants"]] == [m["verdict"] for m in report["mutants"]]
    assert written["score"] == report["score"]
    assert written["tests"] == report["tests"]
    # the explorer's export is what `report --format json` writes for the same run
    source = tmp_path / "run.json"
    source.write_text(json.dumps(report))
    done = run_cli("report", str(source), "--format", "json", "--out", "cli.json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "cli.json").read_text() == path.read_text()


@pytest.mark.anyio
async def test_help_screen_and_command_palette_entries(report):
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.explorer
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title, _, _ in COMMANDS:
            assert title in titles
        # A palette entry runs the same action as its key.
        survivor = survivors(report)[0]
        app.explorer.grid.select(survivor)
        command = next(
            c for c in app.get_system_commands(app.screen) if c.title.startswith("Mark or")
        )
        await command.callback()
        assert app.model.marked == {survivor}


@pytest.mark.anyio
async def test_progress_messages_coalesce(report):
    app = create_app(report=report)
    handled = []
    async with app.run_test(size=SIZE, message_hook=handled.append) as pilot:
        await pilot.pause()
        header = app.explorer.header
        for done in range(1, 51):  # a burst, as cached results arrive
            header.post_message(
                Progress(
                    phase="mutants",
                    done=done,
                    total=50,
                    ran=0,
                    cached=done,
                    running=0,
                    started_at=None,
                )
            )
        await pilot.pause()
        got = [m for m in handled if isinstance(m, Progress)]
        assert got and len(got) < 50
        assert header.progress is got[-1] and header.progress.done == 50


def test_model_score_matches_the_engine_as_verdicts_change(report):
    model = RunModel.from_report(report)
    target = survivors(report)[0]
    model.apply({**model.row(target), "verdict": "equivalent"})
    exported = model.to_report()["score"]
    assert exported["excluded"] == [{"id": target, "verdict": "equivalent"}]
    assert (model.score.raw, model.score.adjusted) == (exported["raw"], exported["adjusted"])
    assert Filters(verdicts=frozenset({"survived"})).describe() == "verdict survived"


def test_replay_finds_runs_in_a_cache(report, tmp_path):
    cache = tmp_path / "cache"
    with Store(str(cache)) as store:
        store.put_run(
            report["run_id"], {"run_id": report["run_id"], "kernel": "k.py", "report": report}
        )
        store.put_run("20260102-000000-aaaa", {"run_id": "20260102-000000-aaaa", "report": None})
    found, records = replay_lookup(None, str(cache))
    assert found is None and {r["run_id"] for r in records} == {
        report["run_id"],
        "20260102-000000-aaaa",
    }
    found, _ = replay_lookup(report["run_id"][:10], str(cache))
    assert found == report
    with pytest.raises(BadInput, match="stopped before it finished"):
        replay_lookup("20260102", str(cache))
    with pytest.raises(BadInput, match="no run 'nope'"):
        replay_lookup("nope", str(cache))
    with pytest.raises(BadInput, match="no cache at"):
        replay_lookup(None, str(tmp_path / "missing"))
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    assert replay_lookup(str(path), str(cache))[0] == report


@pytest.mark.anyio
async def test_run_list_opens_the_chosen_run(report, tmp_path):
    records = [
        {"run_id": "20260102-000000-aaaa", "kernel": "k.py", "saved_at": 2.0, "report": None},
        {"run_id": report["run_id"], "kernel": "layer_norm.py", "saved_at": 1.0, "report": report},
    ]
    app = create_app(runs=records, cache_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.id == "runs"
        assert app.model.rows == []
        await pilot.press("enter")  # the interrupted run is listed but cannot be opened
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.screen is app.explorer
        assert len(app.explorer.grid.visible_ids) == len(report["mutants"])


def test_cli_replay_and_tui_bad_input_exit_2(tmp_path):
    proc = run_cli("replay", "nope", "--cache-dir", str(tmp_path / "none"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("mutant-gate: error: no cache at")
    proc = run_cli("tui", str(tmp_path / "missing.py"), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_every_engine_event_reads_as_a_sentence_in_the_log():
    """The log speaks one language: each event class of engine/events.py has a sentence
    (no class name, no ``field=value`` repr), built here from real engine objects."""
    import typing

    from mutant_gate.engine import events
    from mutant_gate.engine.job import JobResult, JobStatus
    from mutant_gate.engine.kernel_file import load_kernel_file
    from mutant_gate.engine.mutate import generate_mutants
    from mutant_gate.engine.records import MutantOutcome, Verdict
    from mutant_gate.tui.bridge import describe

    path = str(EXAMPLES / "vector_add.py")
    kernel = load_kernel_file(path)
    mutants = tuple(generate_mutants(kernel.source, path))
    m = mutants[0]
    killed = MutantOutcome(m.id, Verdict.KILLED, "own-check", "AssertionError", 0.2, False)
    samples = [
        events.RunStarted("20261201-x", kernel, mutants, 0.008),
        events.BaselineStarted(120.0),
        events.BaselineProgress("test", "", "collected", 0.0, 0, 110),
        events.BaselineProgress("test", "tests/test_ln.py::test_fwd[4096]", "passed", 3.2, 7, 110),
        events.BaselineFinished(JobResult(JobStatus.PASSED, duration_s=0.12), False, 5.4),
        events.OwnCheckJudged(False, "the null run passed", "it asserts nothing"),
        events.RunEstimated(184, 180, 4, 0, 2, 38.5, 3300.0, ("-k EXPR",)),
        events.MutantStarted(m),
        events.MutantFinished(m, killed, 1, len(mutants)),
        events.MutantUpdated(m, killed),
        events.RunFinished({"score": {"killed": 11, "total": 12, "raw": 91.7, "adjusted": 100}}),
        events.CheckStarted(None, "oracle", total=3),
        events.CheckStarted(m, "compile"),
        events.CheckFinished(m, "oracle", "outputs identical on 2 launches", 1, 3),
        events.CheckFinished(None, "compile", "1 not_compilable (sm_75)", 3, 3),
        events.CheckFinished(None, "claims", "claims check skipped: no claim", 0, 0),
        events.WriterNote("probe", "learned add(x: (4097,))", mutant_id=m.id),
        events.TestAccepted("probe", "test_add.py", ("test_add_size_1025",), m.id, (m.id,)),
        events.TestRejected("stage2", 1, "passes on the mutant too", m.id),
    ]
    covered = {type(e) for e in samples}
    assert covered == set(typing.get_args(events.Event)), "an event class has no sample here"
    for event in samples:
        line = describe(event)
        name = type(event).__name__
        assert line and name not in line and "=" not in line, (name, line)
        assert "object at 0x" not in line and "Mutant(" not in line, (name, line)
    assert describe(samples[8]) == f"{m.id} {m.operator} line {m.line}: killed by own-check (1/12)"
    assert describe(samples[11]) == "diff-oracle: starting on 3 mutants"
    assert describe(samples[15]) == "claims check skipped: no claim"
    assert describe(samples[6]) == (
        "estimate: 184 mutants: 180 to run, about 55 min at 2 workers (the original's 38.5 s "
        "each); to cut it: -k EXPR"
    )
    assert describe(samples[3]) == (
        "the original's case tests/test_ln.py::test_fwd[4096]: passed in 3.20 s (7/110 done)"
    )


AFFINE = Path(__file__).parent / "data" / "tui_affine_oracle_report.json"


@pytest.mark.anyio
async def test_inspector_shows_evidence_as_tables_and_raw_json_one_key_away():
    """A real run's report (the loose affine kernel of test_evidence, with --diff-oracle
    and --compile-check): the oracle's differences, the compiler's answer and the
    writers' claims read as tables and sentences, never as a dict."""
    report = json.loads(AFFINE.read_text())
    rows = {m["id"]: m for m in report["mutants"]}
    differs = next(i for i, m in rows.items() if (m.get("oracle") or {}).get("diffs"))
    masked = next(i for i, m in rows.items() if (m.get("oracle") or {}).get("masked_only"))
    unbuilt = next(i for i, m in rows.items() if m["verdict"] == "not_compilable")
    app = create_app(report=report)
    async with app.run_test(size=(140, 60)) as pilot:
        await pilot.pause()
        inspector = app.explorer.inspector
        for mutant in (differs, masked, unbuilt):
            app.explorer.grid.select(mutant)
            await pilot.pause()
            assert inspector.mutant_id == mutant
            evidence = [k for k in inspector.sections if k not in ("diff", "test", "candidates")]
            shown = "\n".join(inspector.section_text(k) for k in evidence)
            assert not any(c in shown for c in '{}"'), (mutant, shown)
        app.explorer.grid.select(differs)
        await pilot.pause()
        oracle = inspector.section_text("oracle").splitlines()
        assert oracle[1].split() == ["launch", "kernel", "tensor", "elements", "max", "abs",
                                     "max", "rel", "first", "at"]  # fmt: skip
        diff = rows[differs]["oracle"]["diffs"][0]
        assert oracle[2].split()[:4] == ["0", diff["kernel"], diff["argument"], str(diff["count"])]
        assert any(ln.startswith("checks in the oracle's run") for ln in oracle)
        assert inspector.section_text("compile").splitlines()[1].split()[:2] == [
            "sm_75",
            "compiles",
        ]
        await pilot.press("J")
        assert json.loads(inspector.section_text("raw")) == rows[differs]
        await pilot.press("J")
        assert "raw" not in inspector.sections and inspector.section_text("oracle")


@pytest.mark.slow
@pytest.mark.anyio
async def test_replay_folds_identical_runs_and_deletes_them(tmp_path):
    """Three runs of the same command (the last two from the cache) are one row with a
    count; ``d`` removes all three from the cache; ``cache clear --run`` removes one."""
    from mutant_gate.engine.session import list_records

    cache = str(tmp_path / "cache")
    args = ["run", str(EXAMPLES / "vector_add.py"), "--operators", "masks", "--writer",
            "none", "-q", "--cache-dir", cache]  # fmt: skip
    for _ in range(3):
        assert run_cli(*args, cwd=tmp_path).returncode == 0
    other = run_cli(*args[:3], "boundaries", *args[4:], cwd=tmp_path)  # other operators
    assert other.returncode == 0
    records = list_records(cache)
    assert len(records) == 4
    app = create_app(runs=records, cache_dir=cache)
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        options = app.screen.query_one("#run-list")
        rows = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert len(rows) == 2, rows
        folded = next(r for r in rows if "×3" in r)
        assert "vector_add.py" in folded and "writer none, interpret" in folded
        assert "3/3 killed" in folded
        options.highlighted = rows.index(folded)
        await pilot.press("d")
        await pilot.pause()
        assert options.option_count == 1
    assert len(list_records(cache)) == 1
    kept = list_records(cache)[0]["run_id"]
    proc = run_cli("cache", "clear", "--run", kept[:12], "--cache-dir", cache, cwd=tmp_path)
    assert proc.returncode == 0 and f"removed run {kept}" in proc.stdout, proc.stderr
    proc = run_cli("replay", "--cache-dir", cache, cwd=tmp_path)
    assert proc.returncode == 2 and "no runs in the cache" in proc.stderr


def screen_text(app) -> str:
    """What the terminal shows now, as text (the screen's compositor, modal on top)."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def region_text(app, region) -> str:
    """What the terminal shows inside ``region`` (a widget's place on the screen)."""
    lines = screen_text(app).split("\n")[region.y : region.bottom]
    return "\n".join(line[region.x : region.right] for line in lines)


def flat(text: str) -> str:
    """Text with its line breaks and runs of spaces as single spaces (wrapped lines)."""
    return " ".join(text.split())


@pytest.mark.anyio
async def test_enter_opens_the_mutant_and_escape_gives_the_keyboard_back_to_the_grid(report):
    app = create_app(report=report)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        explorer, grid, inspector = app.explorer, app.explorer.grid, app.explorer.inspector
        await pilot.press("right", "right", "down")
        await pilot.pause()
        where = grid.current
        await pilot.press("enter")
        await pilot.pause()
        # the mutant full screen, the keyboard in it, its own keys in the footer
        assert explorer.maximized is inspector and app.focused is inspector
        assert inspector.mutant_id == where
        escape = app.screen.active_bindings["escape"]
        assert escape.node is inspector and escape.binding.description == "back to the grid"
        await pilot.press("down", "right")  # they scroll the inspector, not the grid
        await pilot.pause()
        assert grid.current == where
        await pilot.press("escape")
        await pilot.pause()
        assert explorer.maximized is None and app.focused is grid and grid.current == where
        await pilot.press("right")
        await pilot.pause()
        assert grid.current not in (None, where)
        # the inspector focused without Enter (a click): Escape returns too
        inspector.focus()
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is grid


@pytest.mark.anyio
@pytest.mark.parametrize("size", [(160, 40), (80, 24)])
async def test_the_export_dialog_is_on_screen_and_takes_the_keys_it_shows(
    report, tmp_path, monkeypatch, size
):
    monkeypatch.chdir(tmp_path)
    app = create_app(report=report)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        dialog = app.screen
        field = dialog.query_one(Input)
        box = dialog.query_one("#export-dialog")
        for widget in (box, dialog.query_one("#export-title"), field):
            assert widget.display and widget.visible and widget.region.area > 0
            assert dialog.region.contains_region(widget.region), widget
        assert app.focused is field
        shown = flat(screen_text(app))
        assert "Write the JSON report to:" in shown and field.value in shown
        assert "Enter writes, Escape cancels" in shown
        await pilot.press("x")  # a key typed now is seen in the field
        await pilot.pause()
        assert field.value.endswith(".jsonx") and field.value[-20:] in flat(screen_text(app))
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.explorer
        await pilot.press("s")  # later keys go to the explorer, not to a hidden field
        await pilot.pause()
        assert "verdict survived" in app.explorer.header.filters_text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.anyio
async def test_an_accepted_survivor_keeps_its_mark_when_the_engine_reports_again(
    report, tmp_path, monkeypatch
):
    """After a rerun (or stage 2, a check) the engine's report comes again (``RunDone``
    ``again``) with rows that know nothing of a survivor accepted in this session."""
    from mutant_gate.tui.bridge import RunDone

    monkeypatch.chdir(tmp_path)
    report["kernel"]["source"] = (EXAMPLES / "layer_norm.py").read_text()
    engine_report = copy.deepcopy(report)
    app = create_app(report=report)
    one = survivors(report)[0]
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.accept_survivor(one, "the wrapper pads every row", DEFAULT_BASELINE)
        adjusted = app.model.score.adjusted
        app.post_message(RunDone(engine_report, again=True))
        await pilot.pause()
        assert app.model.row(one)["accepted"]["reason"] == "the wrapper pads every row"
        assert app.model.score.accepted == 1 and app.model.score.adjusted == adjusted
        app.explorer.grid.select(one)
        await pilot.pause()
        assert "Accepted by the team" in app.explorer.inspector.section_text("why")


def test_the_score_lists_accepted_survivors_as_left_out():
    from mutant_gate.engine.report import score

    rows = [
        {"id": "a", "verdict": "killed"},
        {"id": "b", "verdict": "survived", "accepted": {"reason": "fine"}},
        {"id": "c", "verdict": "equivalent"},
    ]
    s = score(rows)
    assert s["adjusted"] == 100.0
    assert {e["id"] for e in s["excluded"]} == {"b", "c"}


@pytest.mark.anyio
async def test_no_diff_oracle_hint_when_it_is_on(report):
    """A survivor's "why" suggests the diff-oracle (o) only where it is off."""
    app = create_app(report=report)  # a run without the diff-oracle
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.explorer.grid.select(survivors(report)[0])
        await pilot.pause()
        assert "turn on the diff-oracle (o)" in app.explorer.inspector.section_text("why")
    oracle_run = json.loads((DATA / "tui_affine_oracle_report.json").read_text())
    assert oracle_run["settings"]["diff_oracle"]
    app = create_app(report=oracle_run)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.explorer.grid.select(survivors(oracle_run)[0])
        await pilot.pause()
        why = app.explorer.inspector.section_text("why")
        assert why.startswith("Survived") and "diff-oracle" not in why


@pytest.mark.anyio
async def test_legend_accept_dialog_and_help_are_whole_at_160_columns(report, tmp_path):
    report["kernel"]["path"] = str(tmp_path / "a" / "long" / "way" / "down" / "layer_norm.py")
    app = create_app(report=report)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        shown = flat(screen_text(app))
        legend = ("equivalent (claimed)", "not compilable", "marked for stage 2")
        for words in (*legend, "click a cell: inspect it, double click: full screen"):
            assert words in shown, words
        app.explorer.grid.select(survivors(report)[0])
        await pilot.press("a")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, AcceptScreen)
        box = dialog.query_one("Vertical").content_region
        for label in dialog.query("Label"):
            text = flat(str(label.render()))
            assert box.contains_region(label.region), text
            assert flat(region_text(app, label.region)) == text
        await pilot.press("escape")
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        source = app.screen.query_one(Markdown).source
        assert "| `/` | search" in source and "| `? / f1` |" in source
        assert "slash" not in source and "question_mark" not in source


@pytest.mark.slow
def test_run_reads_the_default_accepted_file_and_names_what_it_leaves_out(tmp_path):
    """``accept`` (and the explorer's ``a``) write ``mutant-gate-baseline.toml`` here by
    default; ``run`` without ``--accepted`` reads it, says so, and its score line names
    the accepted survivor among what the adjusted score leaves out."""
    import shutil

    kernel = tmp_path / "two_kernels.py"
    shutil.copy(DATA / "two_kernels.py", kernel)
    run = ["run", str(kernel), "--operators", "mask-drop", "--writer", "none"]
    run += ["--cache-dir", str(tmp_path / "cache")]
    first = run_cli(*run, "--json", str(tmp_path / "1.json"), cwd=tmp_path)
    assert "accepted survivors:" not in first.stderr
    one = json.loads((tmp_path / "1.json").read_text())["mutants"][0]["id"]
    add = run_cli("accept", "latest", one, "--reason", "pads", "--cache-dir", str(tmp_path / "cache"), cwd=tmp_path)  # fmt: skip
    assert add.returncode == 0 and (tmp_path / DEFAULT_BASELINE).is_file(), add.stderr
    second = run_cli(*run, "--json", str(tmp_path / "2.json"), cwd=tmp_path)
    assert f"accepted survivors: {DEFAULT_BASELINE} (1 entries)" in second.stderr
    report = json.loads((tmp_path / "2.json").read_text())
    assert report["score"]["accepted"] == [{"id": one, "reason": "pads"}]
    score_line = next(ln for ln in second.stdout.splitlines() if ln.startswith("your tests:"))
    assert "excluded: none" not in score_line and one in score_line, score_line


def test_a_killing_test_is_said_in_words():
    """The inspector says where a test came from as a person would ("the kernel file's
    own check"), not as the report's field (``origin own, status passed``)."""
    from mutant_gate.tui import render

    text = render.test_content({"name": "check", "origin": "own", "status": "passed"}).plain
    assert "the kernel file's own check" in text and "passed on the original" in text
    assert "origin own" not in text and "status passed" not in text


@pytest.mark.anyio
@pytest.mark.parametrize("width", [100, 160])
async def test_the_full_screen_inspector_wraps_long_lines_instead_of_cutting_them(report, width):
    """Enter opens the inspector full screen: it is the screen's width, and a section's
    long line (the why, a probe's note) wraps, so every word of it is on screen."""
    target = next(m for m in report["mutants"] if m["verdict"] == "survived")
    target["novel_field"] = "a note " + " ".join(f"word{i:03d}" for i in range(60))
    app = create_app(report=report)
    async with app.run_test(size=(width, 120)) as pilot:
        await pilot.pause()
        app.explorer.grid.select(target["id"])
        app.explorer.grid.focus()
        await pilot.press("enter")
        await pilot.pause()
        inspector = app.explorer.inspector
        assert inspector.size.width <= width
        strips = app.screen._compositor.render_strips()
        shown = ["".join(segment.text for segment in strip) for strip in strips]
        on_screen = set(" ".join(shown).split())
        words = {w for content in inspector.sections.values() for w in content.plain.split()}
        assert "word059" in words
        assert words <= on_screen, sorted(words - on_screen)[:10]
