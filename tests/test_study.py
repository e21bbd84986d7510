"""``mutant-gate study``: two kernel files x two models x two repeats through the real
command line, the real ``openai`` client and the loopback model server
(tests/fake_openai.py), then the same study again, served wholly from the cache."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from mutant_gate.cli.main import main

from .conftest import run_cli
from .fake_openai import FakeOpenAI, Reply, python_reply
from .test_site import check_offline
from .test_writers_llm import SUM_KERNEL

DATA = Path(__file__).parent / "data"
MODELS = ("vendor/model-a", "vendor/model-b")

SUM_TEST = """
import torch

from sum_kernel import total


def test_odd_size():
    torch.manual_seed(0)
    x = torch.randn(50)
    torch.testing.assert_close(total(x), x.sum())
"""

TWO_TEST = """
import torch

from two_kernels import add, scale


def test_odd_sizes():
    torch.manual_seed(0)
    x, y = torch.rand(100), torch.rand(100)
    torch.testing.assert_close(add(x, y), x + y)
    torch.testing.assert_close(scale(x, 2.0), x * 2.0)
"""


def answer(body: dict) -> Reply:
    """Model a writes a good test at once; model b first answers in prose."""
    prompt = json.dumps(body["messages"])
    if body["model"] == MODELS[1] and len(body["messages"]) <= 2:
        return Reply("Test odd sizes, they say.")
    return python_reply(SUM_TEST if "sum_kernel" in prompt else TWO_TEST)


@pytest.mark.slow
def test_a_study_and_its_cached_rerun(tmp_path):
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    shutil.copy(DATA / "two_kernels.py", tmp_path / "two_kernels.py")
    env = {"NEBIUS_API_KEY": "sk-study-key-0000", "OPENAI_API_KEY": ""}
    with FakeOpenAI(answer, models=MODELS) as fake:
        args = ["study", "sum_kernel.py", "two_kernels.py", "--models", ",".join(MODELS)]
        args += ["--repeats", "2", "--operators", "mask-drop", "--probes", "2", "-j", "2"]
        args += ["--base-url", fake.base_url, "--cache-dir", "cache"]
        first = run_cli(*args, "--out", "one", cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stdout + first.stderr
        asked = list(fake.requests)
        again = run_cli(*args, "--out", "two", cwd=tmp_path, env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        assert fake.requests == asked, "the second study asks the model nothing"

    # a: one reply per (file, repeat); b: prose, then the test: 4 + 8 chats
    assert len(fake.chats) == 12
    assert {(r["body"]["model"]) for r in fake.chats} == set(MODELS)
    assert "study: 10 runs; 12 model calls made, 0 served from the cache" in first.stdout
    assert "study: 10 runs; 0 model calls made, 12 served from the cache" in again.stdout

    rows = list(csv.DictReader((tmp_path / "one" / "study.csv").open()))
    assert len(rows) == 2 + 2 * 2 * 2  # a probe row per file, then files x models x repeats
    probe = [r for r in rows if r["model"] == "probe (no model)"]
    assert len(probe) == 2 and all(r["model_calls"] == "0" for r in probe)
    for row in rows:
        assert int(row["own"]) <= int(row["own+stage1"]) <= int(row["own+stage1+stage2"])
    by_model = {m: [r for r in rows if r["model"] == m] for m in MODELS}
    assert {r["stage1"] for r in by_model[MODELS[0]]} == {"first try"}
    assert {r["stage1"] for r in by_model[MODELS[1]]} == {"after 1 retries"}
    for r in rows[2:]:
        # the dropped masks the own check cannot see, stage 1's odd sizes kill
        assert int(r["own+stage1"]) > int(r["own"]), r
    assert {r["repeat"] for r in by_model[MODELS[0]]} == {"1", "2"}

    table = (tmp_path / "one" / "study.md").read_text()
    for name in (*MODELS, "probe (no model)", "sum_kernel.py", "two_kernels.py"):
        assert name in table
    data = json.loads((tmp_path / "two" / "study.json").read_text())
    assert all(r["model_calls"] == 0 for r in data["runs"])
    assert [r["killed"] for r in data["runs"]] == [int(r["killed"]) for r in rows]
    page = tmp_path / "one" / "site" / "index.html"
    check_offline(page)
    assert page.read_text(encoding="utf-8").count('class="kernel"') == 10
    assert "sk-study-key-0000" not in page.read_text(encoding="utf-8")


def test_bad_study_input(tmp_path, monkeypatch, capsys):
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    (tmp_path / "taken").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEBIUS_API_KEY", "sk-some-key")
    for argv, says in [
        (["sum_kernel.py", "--models", " , ", "--out", "o"], "--models names no model"),
        (["sum_kernel.py", "--models", "a", "--repeats", "0", "--out", "o"], "--repeats"),
        (["nope.py", "--models", "a", "--out", "o"], "no such file"),
        (["sum_kernel.py", "--models", "a", "--out", "taken"], "not a directory"),
    ]:
        assert main(["study", *argv]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    monkeypatch.setenv("NEBIUS_API_KEY", "")
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert main(["study", "sum_kernel.py", "--models", "a", "--out", "o"]) == 2
    assert "key" in capsys.readouterr().err
    assert not (tmp_path / "o").exists(), "nothing is written before the input is checked"
