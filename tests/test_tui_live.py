"""The explorer on real runs: the real app, a real LocalSandbox, a real cache.

Small runs (three mask mutants) keep these short; they are marked slow because
each starts a sandbox pool. Stage 2 talks to the loopback model server.
"""

from __future__ import annotations

import time

import pytest
from textual.widgets import Input

from mutant_gate.cache import Store
from mutant_gate.engine.settings import LLMSettings, RunSettings, WriterSettings
from mutant_gate.tui.app import create_app
from mutant_gate.tui.bridge import (
    BaselineDone,
    EngineMessage,
    MutantJudged,
    MutantRunning,
    Progress,
    RunBegan,
    RunDone,
)

from .conftest import EXAMPLES
from .fake_openai import FakeOpenAI, Reply, python_reply
from .test_writers_llm import GUARDED_SUM_KERNEL, KILLER_TEST, SUM_KERNEL

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
SIZE = (140, 40)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def settings(path, cache, **kw) -> RunSettings:
    kw.setdefault("writers", WriterSettings(writer="none"))
    kw.setdefault("operators", "masks")
    kw.setdefault("workers", 2)
    return RunSettings(kernel_path=str(path), cache_dir=str(cache), **kw)


async def wait_for(pilot, predicate, timeout: float = 240.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            log = "\n".join(pilot.app.explorer.log_view.lines_written[-15:])
            raise AssertionError(f"timed out waiting for {what or predicate}; log:\n{log}")
        await pilot.pause(0.05)


def of(messages, kind):
    return [m for m in messages if isinstance(m, kind)]


async def test_live_run_streams_reruns_one_mutant_and_quits_cleanly(tmp_path):
    app = create_app(settings=settings(EXAMPLES / "vector_add.py", tmp_path / "cache"))
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: of(seen, RunDone), what="the run to finish")
        engine = [type(m) for m in seen if isinstance(m, EngineMessage | MutantRunning)]
        assert engine.index(RunBegan) < engine.index(BaselineDone) < engine.index(MutantJudged)
        # While the original ran, the header's progress knew since when (it shows the time).
        progresses = [m for m in seen if isinstance(m, Progress)]
        assert any(m.phase == "original" and m.phase_since for m in progresses)
        assert any(m.running and m.oldest_running for m in progresses)
        judged = of(seen, MutantJudged)
        assert len(judged) == 3 and not any(m.rejudged for m in judged)
        assert {m.mutant_id for m in of(seen, MutantRunning)} == {m.mutant_id for m in judged}
        report = of(seen, RunDone)[0].report
        # The grid shows what the engine decided, cell by cell.
        assert app.model.states == [m["verdict"] for m in report["mutants"]]
        assert app.model.states == ["killed"] * 3
        header = app.explorer.header
        await wait_for(pilot, lambda: header.progress and header.progress.phase == "finished")
        assert (header.progress.done, header.progress.total) == (3, 3)
        assert len(of(seen, Progress)) <= len(of(seen, EngineMessage))
        # Rerun the mutant under the cursor: from the cache, then forced into the sandbox.
        target = app.explorer.grid.current
        await pilot.press("r")
        await wait_for(pilot, lambda: any(m.rejudged for m in of(seen, MutantJudged)))
        again = [m for m in of(seen, MutantJudged) if m.rejudged]
        assert again[0].mutant_id == target and again[0].row["cached"] is True
        await pilot.press("R")
        await wait_for(pilot, lambda: len([m for m in of(seen, MutantJudged) if m.rejudged]) == 2)
        forced = [m for m in of(seen, MutantJudged) if m.rejudged][1]
        assert forced.row["cached"] is False and forced.row["verdict"] == "killed"
        await wait_for(pilot, lambda: len([m for m in of(seen, RunDone) if m.again]) == 2)
        assert not app.model.row(target)["cached"]
        # A check turned on with no survivor left says so, instead of only "on".
        await pilot.press("c")
        await pilot.pause()
        log = app.explorer.log_view.lines_written
        assert "compile-check on: no survivor left to check in this run" in log[-1]
        run_id = app.model.run_id
        sandbox = app.bridge.sandbox
        await pilot.press("q")
        await pilot.pause()
    assert app.bridge.stopped and sandbox._closed
    with Store(str(tmp_path / "cache")) as store:
        record = store.get_run(run_id)
    assert record["report"]["mutants"][0]["verdict"] == "killed"


async def test_quit_mid_run_closes_the_sandbox_and_the_next_run_resumes(tmp_path):
    cache = tmp_path / "cache"
    run = settings(EXAMPLES / "layer_norm.py", cache, workers=1, operators=None)
    app = create_app(settings=run)
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: len(of(seen, MutantJudged)) >= 2, what="two verdicts")
        await pilot.press("q")
        started = time.monotonic()
        await pilot.pause()
    assert time.monotonic() - started < 30
    assert app.bridge.stopped and app.bridge.sandbox._closed
    assert not of(seen, RunDone)
    finished = {m.mutant_id for m in of(seen, MutantJudged)}
    # The next run serves those from the cache at once.
    resumed = create_app(settings=run)
    again: list = []
    async with resumed.run_test(size=SIZE, message_hook=again.append) as pilot:
        await wait_for(
            pilot, lambda: len(of(again, MutantJudged)) >= len(finished), what="cached verdicts"
        )
        cached = {m.mutant_id for m in of(again, MutantJudged) if m.row["cached"]}
        assert finished <= cached
        await pilot.press("q")
        await pilot.pause()


async def test_stage2_without_a_key_probes_the_marked_survivors(tmp_path, monkeypatch):
    for name in ("NEBIUS_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)  # its check: x of 64, a block
    app = create_app(settings=settings(tmp_path / "sum_kernel.py", tmp_path / "cache"))
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: of(seen, RunDone), what="the run")
        # mask-drop, other-drop and other-change (to 1.0 and to -inf): all survive x of 64
        assert app.model.states == ["survived"] * 4
        chosen = [r["id"] for r in app.model.rows if r["operator"] in ("mask-drop", "other-change")]
        for mutant in chosen:
            app.explorer.grid.select(mutant)
            await pilot.press("space")
        await pilot.press("2")
        await wait_for(pilot, lambda: any(m.again for m in of(seen, RunDone)), what="stage 2")
        log = "\n".join(app.explorer.log_view.lines_written)
        assert (
            f"stage 2 on {len(chosen)} marked survivors: the probe, harder than the run's "
            "(up to 48 inputs each, every kind, no time limit)"
        ) in log
        assert "stage 2 without the model (no model key: set NEBIUS_API_KEY" in log
        assert "needs a model" not in log
        assert f"probing {len(chosen)} survivors (up to 48 inputs each)" in log
        for mutant in chosen:
            row = app.model.row(mutant)
            assert row["verdict"] == "killed" and row["by"].startswith("test:test_total_size_")
        app.explorer.grid.select(chosen[0])
        await pilot.pause()
        assert "def test_total_size_" in app.explorer.inspector.section_text("test")
        # The survivor nobody marked was not probed.
        other = next(r for r in app.model.rows if r["operator"] == "other-drop")
        assert other["verdict"] == "survived" and not other.get("probe")
        await pilot.press("q")
        await pilot.pause()


async def test_stage2_on_marked_survivors_probe_then_model_and_the_oracle_toggle(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("NEBIUS_API_KEY", "sk-test-tui")
    # other-drop and other-change are truly equivalent there (a tl.where guards the lanes)
    (tmp_path / "sum_kernel.py").write_text(GUARDED_SUM_KERNEL)

    def answer(body: dict) -> Reply:
        if "+    x = tl.load(x_ptr + offs)\n" in body["messages"][1]["content"]:
            return python_reply(KILLER_TEST)  # mask-drop: never asked, the probe kills it
        return Reply("EQUIVALENT: the tl.where puts 0.0 back on masked-off lanes.")

    with FakeOpenAI(answer) as fake:
        writers = WriterSettings(writer="none", llm=LLMSettings(base_url=fake.base_url))
        app = create_app(
            settings=settings(
                tmp_path / "sum_kernel.py", tmp_path / "cache", writers=writers, diff_oracle=False
            )  # off at the start: the toggle turns it on below
        )
        seen: list = []
        async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
            await wait_for(pilot, lambda: of(seen, RunDone), what="the run")
            assert app.model.states == ["survived"] * 4
            # Stage 2 needs marked survivors.
            await pilot.press("2")
            await pilot.pause()
            assert any("mark survivors first" in n.message for n in app._notifications)
            ids = {r["operator"]: r["id"] for r in app.model.rows}
            for op in ("mask-drop", "other-drop"):
                app.explorer.grid.select(ids[op])
                await pilot.press("space")
            await pilot.press("2")
            await wait_for(
                pilot,
                lambda: any(m.again for m in of(seen, RunDone)),
                what="stage 2 to finish",
            )
            # The probe kills mask-drop (reads past the end of x at size 63) ...
            row = app.model.row(ids["mask-drop"])
            assert (row["verdict"], row["by"][:21]) == ("killed", "test:test_total_size_")
            assert ids["mask-drop"] not in app.model.marked  # no longer a survivor
            # ... and the model is asked only about what the probe left: other-drop.
            asked = [r["body"]["messages"][1]["content"] for r in fake.chats]
            assert asked and all("+    x = tl.load(x_ptr + offs)\n" not in c for c in asked)
            app.explorer.grid.select(ids["other-drop"])
            await pilot.pause()
            writers_text = app.explorer.inspector.section_text("writers")
            assert "probe: not distinguished by" in writers_text  # the probe's result ...
            assert "EQUIVALENT" in writers_text  # ... beside the model's claim
            # The diff-oracle, turned on now, runs at once on the survivors.
            dones = len(of(seen, RunDone))
            await pilot.press("o")
            await wait_for(pilot, lambda: len(of(seen, RunDone)) > dones, what="the oracle")
            assert app.bridge.checks["diff-oracle"] is True
            left = [
                r for r, s in zip(app.model.rows, app.model.states, strict=True) if s == "survived"
            ]
            assert all(r.get("oracle") for r in left)
            await pilot.press("q")
            await pilot.pause()


async def test_a_failing_original_is_shown_and_becomes_the_exit_code(tmp_path):
    kernel = tmp_path / "broken.py"
    kernel.write_text(SUM_KERNEL.replace("x.sum())", "x.sum() + 1.0)"))
    app = create_app(settings=settings(kernel, tmp_path / "cache"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.failure is not None, what="the failure")
        assert "the original fails its own check" in app.explorer.header.failure
        assert any("fails its own check" in n.message for n in app._notifications)
        # every cell says why it has no result, not "queued"
        await pilot.pause()
        why = app.explorer.inspector.section_text("why")
        assert why.startswith("Not run: the run stopped") and "fails its own check" in why
        verdict = str(app.explorer.query_one("#inspector-verdict").render())
        assert verdict.startswith("not run")
        assert "not run" in app.explorer.grid._group_title("sum_kernel", [0])
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 2


async def test_stage2_without_a_key_probes_past_the_runs_own_probe(tmp_path, monkeypatch):
    """The run's probe left other-drop alive (truly equivalent here); stage 2 without a
    key does not run that probe again: more inputs, or a line that there is none."""
    for name in ("NEBIUS_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "sum_kernel.py").write_text(GUARDED_SUM_KERNEL)
    writers = WriterSettings(writer="probe", probes=6)
    app = create_app(
        settings=settings(tmp_path / "sum_kernel.py", tmp_path / "cache", writers=writers)
    )
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: of(seen, RunDone), what="the run")
        target = next(r for r in app.model.rows if r["operator"] == "other-drop")
        assert app.model.row(target["id"])["verdict"] == "survived"
        before = app.model.row(target["id"])["probe"]["probes"]
        app.explorer.grid.select(target["id"])
        await pilot.press("space", "2")
        await wait_for(pilot, lambda: any(m.again for m in of(seen, RunDone)), what="stage 2")
        log = "\n".join(app.explorer.log_view.lines_written)
        assert "probing 1 survivor (up to 12 inputs each)" in log, log
        row = app.model.row(target["id"])
        assert row["verdict"] == "survived"
        more = row["probe"]["probes"] > before
        said = f"nothing more to try: no input beyond the {before} the run's probe tried" in log
        assert more or said, (before, row["probe"], log)
        await pilot.press("q")
        await pilot.pause()


async def test_an_accepted_survivor_survives_a_rerun_and_the_next_tui_reads_the_file(
    tmp_path, monkeypatch
):
    from mutant_gate.cli.config import apply_config
    from mutant_gate.cli.flags import run_settings
    from mutant_gate.cli.main import build_parser
    from mutant_gate.engine.settings import DEFAULT_BASELINE

    monkeypatch.chdir(tmp_path)
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    app = create_app(settings=settings(tmp_path / "sum_kernel.py", tmp_path / "cache"))
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: of(seen, RunDone), what="the run")
        one = app.model.rows[0]["id"]
        app.explorer.grid.select(one)
        # Enter and Escape in a live run: the keyboard comes back to the same cell
        await pilot.press("enter", "escape")
        await pilot.pause()
        assert app.focused is app.explorer.grid and app.explorer.grid.current == one
        await pilot.press("a")
        await pilot.pause()
        app.screen.query_one(Input).value = "the wrapper pads"
        await pilot.press("enter")
        await pilot.pause()
        assert app.model.score.accepted == 1
        await pilot.press("r")
        await wait_for(pilot, lambda: any(m.again for m in of(seen, RunDone)), what="the rerun")
        assert app.model.row(one)["accepted"]["reason"] == "the wrapper pads"
        assert app.model.score.accepted == 1
        await pilot.press("q")
        await pilot.pause()
    assert (tmp_path / DEFAULT_BASELINE).is_file()
    # `mutant-gate tui` without --accepted now reads the file in this directory
    argv = ["tui", "sum_kernel.py", "--writer", "none", "--operators", "masks"]
    argv += ["--cache-dir", str(tmp_path / "cache")]
    parser = build_parser()
    run = run_settings(apply_config(parser, parser.parse_args(argv), argv))
    assert run.accepted_path == DEFAULT_BASELINE
    app = create_app(settings=run)
    again: list = []
    async with app.run_test(size=SIZE, message_hook=again.append) as pilot:
        await wait_for(pilot, lambda: of(again, RunDone), what="the second run")
        log = app.explorer.log_view.lines_written
        assert f"accepted survivors: {DEFAULT_BASELINE} (1 entries)" in log
        assert app.model.row(one)["accepted"]["reason"] == "the wrapper pads"
        report = of(again, RunDone)[0].report
        assert {"id": one, "verdict": "survived", "accepted": True} in report["score"]["excluded"]
        await pilot.press("q")
        await pilot.pause()
