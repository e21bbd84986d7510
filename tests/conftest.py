"""Shared fixtures: one warm sandbox pool per session, example paths, a CLI runner."""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def pytest_addoption(parser):
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="also run tests marked slow (whole runs, sandbox pools); CI does",
    )


#: fixtures that start a sandbox pool: a test that uses one is slow
POOLS = frozenset({"sandbox", "either_sandbox"})


def pytest_collection_modifyitems(config, items):
    """The default suite skips `slow` (a few minutes on 2 cores); `gpu` needs CUDA."""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    skip_slow = pytest.mark.skip(reason="slow: run with --run-slow")
    # ``-m`` runs slow tests only when its expression asks for them (``-m slow``), not
    # whenever it is given (``-m "not gpu"``)
    asked = re.search(r"(?<!not )\bslow\b", config.getoption("-m") or "") is not None
    run_slow = config.getoption("--run-slow") or asked
    for item in items:
        if POOLS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)  # it starts a sandbox pool
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)
        elif "slow" in item.keywords and not run_slow and "gpu" not in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(scope="session")
def sandbox():
    from mutant_gate.engine.sandbox.local import LocalSandbox

    box = LocalSandbox(workers=2)
    box.start()
    yield box
    box.close()


@pytest.fixture(scope="module", params=["forked", "warm"])
def either_sandbox(request):
    """The pool both ways: a forked child per job, and the warm runner that compiled
    mode uses (here with the interpreter: the same process, hardening and limits)."""
    from mutant_gate.engine.sandbox.local import LocalSandbox

    box = LocalSandbox(workers=2, warm=request.param == "warm")
    box.start()
    yield box
    box.close()


#: a child's SIGINT as in a terminal, even where the suite runs with it ignored (a
#: background job of a non-interactive shell inherits SIG_IGN, and so would a started run:
#: Ctrl-C tests saw it end with exit 0); ``preexec_fn`` of a started CLI
TERMINAL_SIGINT = functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL)


def start_cli(*args: str, cwd: Path | None = None, environ: dict | None = None):
    """Start the real command line in a subprocess (pipes for its output); ``environ``:
    its whole environment (default this process's). Returns the Popen. It takes SIGINT as
    in a terminal (``TERMINAL_SIGINT``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "mutant_gate.cli", *args],
        cwd=cwd,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=TERMINAL_SIGINT,
    )


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600):
    """Run the real command line in a subprocess; returns CompletedProcess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mutant_gate.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
