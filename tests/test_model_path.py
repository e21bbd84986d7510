"""The model path as a user meets it: a model stage asked for with no key, a model the
endpoint does not list, and what the prompts tell the model about the file.

Runs go through the real command line (``sys.executable -m mutant_gate.cli``) and the
real ``openai`` client against the loopback server of tests/fake_openai.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from mutant_gate.cache import Store
from mutant_gate.engine.kernel_file import load_kernel_file
from mutant_gate.engine.settings import KEY_VARIABLES
from mutant_gate.engine.writers import prompts
from mutant_gate.engine.writers.reading import static_problem

from .conftest import EXAMPLES, ROOT
from .fake_openai import FakeOpenAI

NO_KEY = (
    "mutant-gate: error: --writer llm needs a model key: set NEBIUS_API_KEY or "
    "OPENAI_API_KEY (or use --writer probe)"
)


def cli(*args: str, cwd, key: str | None = None, timeout: float = 120):
    """The real command line, with no key variable at all (or ``key`` as NEBIUS_API_KEY)."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    if key is not None:
        env["NEBIUS_API_KEY"] = key
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "mutant_gate.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc, time.monotonic() - start


def one_line(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def nothing_ran(cache_dir) -> None:
    """No job result and no run record: the original never ran."""
    if not os.path.isdir(cache_dir):
        return
    with Store(str(cache_dir)) as store:
        counts = store.counts()
    assert counts["results"] == 0 and counts["runs"] == 0, counts


@pytest.fixture
def kernel(tmp_path):
    shutil.copy(EXAMPLES / "vector_add.py", tmp_path / "vector_add.py")
    return "vector_add.py"


# -- (a) asked for, no key: one line, exit 2, before anything runs ---------------------
def test_writer_llm_without_a_key_is_one_line_before_anything_runs(tmp_path, kernel):
    proc, took = cli(
        "run", kernel, "--no-config", "--writer", "llm", "--cache-dir", "c2", cwd=tmp_path
    )
    assert one_line(proc) == NO_KEY
    assert proc.stdout == ""  # no run started, no sandbox
    assert not (tmp_path / "c2").exists()
    assert took < 30, took  # a few seconds: nothing but the flags is read


def test_stage2_and_a_config_that_asks_for_the_model_are_the_same_rule(tmp_path, kernel):
    proc, _ = cli("run", kernel, "--no-config", "--writer", "none", "--stage2", cwd=tmp_path)
    assert one_line(proc) == (
        "mutant-gate: error: --stage2 needs a model key: set NEBIUS_API_KEY or "
        "OPENAI_API_KEY (or leave out --stage2)"
    )
    (tmp_path / "pyproject.toml").write_text('[tool.mutant-gate]\nwriter = "llm"\n')
    proc, _ = cli("run", kernel, "--cache-dir", "c", cwd=tmp_path)
    line = one_line(proc)
    assert line.startswith(NO_KEY), line
    assert 'writer = "llm" in [tool.mutant-gate] of ' in line and "pyproject.toml" in line
    assert not (tmp_path / "c").exists()
    # The explorer reads the same flags: refused the same way, before its screen opens.
    proc, _ = cli("tui", kernel, "--writer", "probe", "--stage2", "--no-config", cwd=tmp_path)
    assert "--stage2 needs a model key" in one_line(proc)


# -- (b) a model the endpoint does not list: exit 2 before the baseline ------------------
def test_unknown_model_and_refused_key_end_the_run_before_the_baseline(tmp_path, kernel):
    with FakeOpenAI(models=("other/model", "nvidia/Nemotron-3-Super-120B-A12B")) as fake:
        proc, _ = cli(
            "run",
            kernel,
            "--no-config",
            "--writer",
            "llm",
            "--base-url",
            fake.base_url,
            "--cache-dir",
            "c",
            cwd=tmp_path,
            key="sk-test",
        )
        asked = list(fake.requests)
    line = one_line(proc)
    assert "'nvidia/nemotron-3-super-120b-a12b' is not in the model list" in line
    assert "did you mean nvidia/Nemotron-3-Super-120B-A12B" in line
    assert [r["method"] for r in asked] == ["GET"]  # the list, and no chat
    assert "original passes" not in proc.stdout, proc.stdout
    nothing_ran(tmp_path / "c")

    with FakeOpenAI(models_status=401) as fake:
        proc, _ = cli(
            "run",
            kernel,
            "--no-config",
            "--writer",
            "none",
            "--stage2",
            "--base-url",
            fake.base_url,
            "--cache-dir",
            "c",
            cwd=tmp_path,
            key="sk-wrong",
        )
    assert "refused the API key (401)" in one_line(proc)
    assert "original passes" not in proc.stdout, proc.stdout
    nothing_ran(tmp_path / "c")


# -- (c) what the prompts say about the file ---------------------------------------------
def _tutorial(tmp_path, name: str = "01-vector-add.py") -> str:
    """examples/vector_add.py with its check at module level, tutorial style."""
    head, main = (EXAMPLES / "vector_add.py").read_text().split('if __name__ == "__main__":\n')
    path = tmp_path / name
    path.write_text(head + textwrap.dedent(main))
    return str(path)


def _snippet(prompt: str) -> str:
    match = re.search(r"exactly like this.*?```python\n(.*?)```", prompt, re.S)
    assert match, prompt
    return match.group(1)


def test_a_tutorial_file_named_like_01_vector_add_gets_an_import_that_works(tmp_path):
    kernel = load_kernel_file(_tutorial(tmp_path))
    assert kernel.module_check and not kernel.has_main and not kernel.test_functions
    system, user = prompts.stage1_messages(kernel)
    prompt = user["content"]
    assert "from 01-vector-add import" not in prompt and "import 01-vector-add" not in prompt
    assert "test_* functions" not in prompt
    assert "Its own check is top-level module code" in prompt
    assert "asserts nothing" not in prompt  # this one does assert (assert_close)
    snippet = _snippet(prompt)
    assert "importlib.import_module('01-vector-add')" in snippet, snippet
    test = snippet + textwrap.dedent("""
        import torch


        def test_small():
            torch.manual_seed(0)
            x, y = torch.rand(37), torch.rand(37)
            torch.testing.assert_close(add(x, y), x + y)
        """)
    assert static_problem(test, kernel.module) is None
    (tmp_path / "test_snippet.py").write_text(test)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_snippet.py"],
        cwd=tmp_path,
        env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_a_check_that_asserts_nothing_is_said_plainly_in_both_stages(tmp_path):
    shutil.copy(ROOT / "tests" / "data" / "tutorial_vector_add.py", tmp_path / "02-prints.py")
    kernel = load_kernel_file(str(tmp_path / "02-prints.py"))
    assert not kernel.asserts
    stage1 = prompts.stage1_messages(kernel)[1]["content"]
    stage2 = prompts.stage2_messages(kernel, "-a\n+b\n", "survived", "")[1]["content"]
    for prompt in (stage1, stage2):
        assert "That check asserts nothing: it only prints" in prompt
        assert "Your tests must assert on the outputs." in prompt
        assert "top-level module code" in prompt and "test_* functions" not in prompt
        assert "from 02-prints import" not in prompt
        assert "add = importlib.import_module('02-prints').add" in _snippet(prompt)
        # What the sandbox refuses, and what a kill rests on.
        for word in ("open", "Path.read_text", "inspect", "linecache", "__file__", ".src", ".fn"):
            assert word in prompt, word
        assert "touch the test harness" in prompt and "refused before they run" in prompt
        assert "counts as a kill only\n  when the outputs change" in prompt
        assert "plain PyTorch reference" in prompt


def test_a_main_block_file_is_described_as_one_and_imported_plainly():
    kernel = load_kernel_file(str(EXAMPLES / "vector_add.py"))
    prompt = prompts.stage1_messages(kernel)[1]["content"]
    assert 'Its own check is its `if __name__ == "__main__":` block.' in prompt
    assert "asserts nothing" not in prompt and "top-level module code" not in prompt
    assert _snippet(prompt) == "from vector_add import add\n"
