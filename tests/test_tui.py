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
from textual.widgets import Input, SelectionList

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
    from mutant_gate.engine.kernel_file import load_kernel_file
    from mutant_gate.engine.mutate import generate_mutants
    from mutant_gate.engine.records import MutantOutcome, Verdict
    from mutant_gate.engine.sandbox.job import JobResult, JobStatus
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
    assert describe(samples[7]) == f"{m.id} {m.operator} line {m.line}: killed by own-check (1/12)"
    assert describe(samples[10]) == "diff-oracle: starting on 3 mutants"
    assert describe(samples[14]) == "claims check skipped: no claim"
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
