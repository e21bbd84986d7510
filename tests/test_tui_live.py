"""The explorer on real runs: the real app, a real LocalSandbox, a real cache.

Small runs (three mask mutants) keep these short; they are marked slow because
each starts a sandbox pool. Stage 2 talks to the loopback model server.
"""

from __future__ import annotations

import time

import pytest

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
        assert f"stage 2 on {len(chosen)} marked survivors: the probe writer" in log
        assert "stage 2 without the model: the model needs a model" in log
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
            settings=settings(tmp_path / "sum_kernel.py", tmp_path / "cache", writers=writers)
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
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 2
