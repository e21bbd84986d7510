"""The explorer in a real terminal: ``mutant-gate tui`` under tmux, driven by keys as a
person drives it (live run, Enter, Escape, mark, stage 2 without a key, export, quit),
then ``mutant-gate replay`` of the same run. What is asserted is what the terminal
shows, read back with ``tmux capture-pane``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

from .test_writers_llm import SUM_KERNEL

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

#: the model's keys: none reaches this run (stage 2 without a key)
KEYS = ("NEBIUS_API_KEY", "OPENAI_API_KEY")


class Terminal:
    """One tmux session of 160 x 45 running a command; keys in, the screen out."""

    def __init__(self, name: str, command: str, cwd: str) -> None:
        self.name = name
        env = {k: v for k, v in os.environ.items() if k not in KEYS and not k.startswith("TMUX")}
        env["TERM"] = "xterm-256color"
        # the command's end keeps the pane open a while, to read what it left
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "45", "-c", cwd,
             f"{command}; echo EXITED $?; sleep 60"],
            check=True, env=env,
        )  # fmt: skip

    def screen(self) -> str:
        done = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        )
        return done.stdout

    def keys(self, *keys: str) -> None:
        for key in keys:
            subprocess.run(["tmux", "send-keys", "-t", self.name, key], check=True)
            time.sleep(0.3)

    def wait(self, predicate, what: str, timeout: float = 240.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if predicate(shown):
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{shown}")
            time.sleep(0.5)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def test_the_explorer_in_a_real_terminal_then_its_replay(tmp_path):
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    cli = f"{shlex.quote(sys.executable)} -m mutant_gate.cli"
    flags = "--operators masks --writer none -j 1 --cache-dir c"  # survivors stay
    live = Terminal(f"mg-live-{os.getpid()}", f"{cli} tui sum_kernel.py {flags}", str(tmp_path))
    try:
        live.wait(lambda s: "done:" in s, "the run's end")
        live.keys("s")  # survivors only: the cursor on the first survivor
        shown = live.wait(lambda s: "back to the grid" not in s, "the grid")
        # Enter opens the mutant: the inspector with its own keys ...
        live.keys("Enter")
        live.wait(lambda s: "back to the grid" in s, "the inspector's keys")
        # ... and Escape gives the keyboard back to the grid, where it was
        live.keys("Escape")
        live.wait(lambda s: "back to the grid" not in s, "the grid again")
        live.keys("Right", "Left")  # the grid's cursor moves again: no key is trapped
        # mark the survivor, stage 2 without a model key
        live.keys("Space", "2")
        shown = live.wait(lambda s: "stage 2" in s and "without the model" in s, "stage 2")
        assert "needs a model" not in shown
        live.wait(lambda s: "probe" in s, "the probe's lines")
        # export: the dialog is on the screen, Enter writes the report
        live.keys("e")
        live.wait(lambda s: "Enter writes" in s, "the export dialog")
        live.keys("Enter")
        live.wait(lambda s: "written to" in s, "the export")
        written = [p for p in tmp_path.glob("mutant-gate-*.json")]
        assert len(written) == 1, sorted(p.name for p in tmp_path.iterdir())
        report = json.loads(written[0].read_text())
        assert report["mutants"] and report["complete"] is True
        live.keys("q")
        live.wait(lambda s: "EXITED 0" in s, "the explorer to quit", timeout=60)
    finally:
        live.close()
    replay = Terminal(
        f"mg-replay-{os.getpid()}", f"{cli} replay latest --cache-dir c", str(tmp_path)
    )
    try:
        shown = replay.wait(lambda s: "sum_kernel.py" in s, "the replayed run")
        assert report["run_id"] in shown or "replay" in shown.lower(), shown
        replay.keys("q")
        replay.wait(lambda s: "EXITED 0" in s, "the replay to quit", timeout=60)
    finally:
        replay.close()
