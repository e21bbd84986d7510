"""Stage 1 and stage 2 through the real command line, the real ``openai`` client, a
loopback chat-completions server (tests/fake_openai.py) and the real sandbox.

Each whole run checks several things at once (a run costs seconds of sandbox time):
the scripted replies walk through what a model can get wrong.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from .conftest import run_cli
from .fake_openai import FakeOpenAI, Reply, python_reply

pytestmark = pytest.mark.slow

SECRET = "sk-test-secret-4242"

SUM_KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(out_ptr, tl.sum(x, axis=0))


    def total(x):
        out = torch.empty(1)
        sum_kernel[(1,)](x, out, x.numel(), BLOCK=64)
        return out[0]


    if __name__ == "__main__":
        x = torch.randn(64)  # a block multiple: masked lanes never matter here
        torch.testing.assert_close(total(x), x.sum())
""")

WRONG_TEST = """
import torch

from sum_kernel import total


def test_total_plus_one():
    torch.manual_seed(0)
    x = torch.randn(50)
    torch.testing.assert_close(total(x), x.sum() + 1.0)
"""

SECRET_SHA256 = hashlib.sha256(SECRET.encode()).hexdigest()

# The last test looks for the key (by its digest: the test's own text must not hold it)
# in the sandbox's environment and in the environment its process started with.
GOOD_TEST = f"""
import hashlib
import os

import torch

from sum_kernel import total


def test_odd_size():
    torch.manual_seed(0)
    x = torch.randn(50)
    torch.testing.assert_close(total(x), x.sum())


def test_no_key_in_sandbox():
    values = list(os.environ.values())
    try:
        with open("/proc/self/environ", "rb") as fh:
            start = fh.read().decode("utf-8", "replace").split("\\0")
        values += [entry.partition("=")[2] for entry in start]
    except PermissionError:
        pass  # the sandbox's user cannot even read it
    digests = {{hashlib.sha256(v.encode()).hexdigest() for v in values}}
    assert "{SECRET_SHA256}" not in digests
    assert not {{"NEBIUS_API_KEY", "OPENAI_API_KEY"}} & set(os.environ)
"""


def _env() -> dict:
    return {"NEBIUS_API_KEY": SECRET, "OPENAI_API_KEY": ""}


def _report(path) -> dict:
    return json.loads(path.read_text())


def _by_after(report: dict, text: str) -> dict:
    return next(m for m in report["mutants"] if m["after"].endswith(text))


def _kernel(tmp_path):
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    return "sum_kernel.py"


def test_stage1_retries_rejects_prose_and_a_wrong_test_then_accepts(tmp_path):
    kernel = _kernel(tmp_path)
    script = [
        Reply("upstream overloaded", status=500, headers={"Retry-After": "0"}),
        Reply("You should test odd sizes and negative values. Good luck!"),
        python_reply(WRONG_TEST),
        python_reply(GOOD_TEST),
    ]
    args = ["run", kernel, "--operators", "masks", "--writer", "llm", "--probes", "2"]
    with FakeOpenAI(script) as fake:
        args += ["--base-url", fake.base_url, "--write-tests", "written"]
        proc = run_cli(*args, "--json", "r.json", cwd=tmp_path, env=_env())
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = _report(tmp_path / "r.json")
        first = list(fake.requests)

        # The same run again: every reply comes from the cache, nothing is asked.
        again = run_cli(*args, "--json", "r2.json", cwd=tmp_path, env=_env())
        assert again.returncode == 0, again.stdout + again.stderr
        assert fake.requests == first

    chats = [r for r in first if r["method"] == "POST"]
    assert [r["method"] for r in first].count("GET") == 1  # the model-list check
    assert len(chats) == 4  # the 500, then three replies
    assert all(r["authorization"] == f"Bearer {SECRET}" for r in first)
    assert all(r["body"]["model"] == "nvidia/nemotron-3-super-120b-a12b" for r in chats)
    # The model saw the kernel file and never a mutant.
    prompt = json.dumps(chats[0]["body"]["messages"])
    assert "sum_kernel" in prompt and "other=1.0" not in prompt and "diff" not in prompt
    # The failure on the original went back to the model before the last reply.
    last = chats[-1]["body"]["messages"]
    assert "ORIGINAL" in last[-1]["content"] and "test_total_plus_one" in last[-1]["content"]
    assert "python code block" in last[-3]["content"]  # after the prose reply

    stage1 = report["stage1"]
    assert stage1["accepted"]["file"] == "test_sum_kernel_mg_stage1.py"
    whys = [a["why"] for a in stage1["attempts"]]
    assert whys[0].startswith("no code") and whys[1].startswith("fails the original"), whys
    tests = {t["name"]: t for t in report["tests"]}
    odd = tests["test::test_odd_size"]
    assert odd["origin"] == "stage1" and "x = torch.randn(50)" in odd["source"]
    assert tests["test::test_no_key_in_sandbox"]["status"] == "passed"  # the key stayed out
    assert tests["own-check"]["origin"] == "own"
    # The accepted tests joined every mutant's job: other=1.0 is killed by test_odd_size.
    other_one = _by_after(report, "other=1.0)")
    assert (other_one["verdict"], other_one["by"]) == ("killed", "test:test_odd_size")
    assert other_one["id"] in odd["kills"]
    assert report["tokens"]["calls"] == 3 and report["tokens"]["prompt"] == 300
    # The key reached the endpoint only: not the report, not the cache.
    assert SECRET not in (tmp_path / "r.json").read_text()
    for path in (tmp_path / ".mutant-gate").rglob("*"):
        assert not path.is_file() or SECRET.encode() not in path.read_bytes(), path
    assert report["tokens"]["model"] == "nvidia/nemotron-3-super-120b-a12b"
    again_report = _report(tmp_path / "r2.json")
    assert again_report["tokens"]["prompt"] == 0
    assert again_report["tokens"]["cached_calls"] == 3
    assert [(m["id"], m["verdict"]) for m in again_report["mutants"]] == [
        (m["id"], m["verdict"]) for m in report["mutants"]
    ]

    # Written tests pass under plain pytest against the original file.
    plain = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "written"],
        cwd=tmp_path,
        env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "2 passed" in plain.stdout


FLAKY_TEST = """
import torch

from sum_kernel import total


def test_depends_on_the_seed():
    x = torch.randn(50)
    assert torch.initial_seed() == 0
    torch.testing.assert_close(total(x), x.sum())
"""

SPARING_TEST = """
import torch

from sum_kernel import total


def test_block_multiple_again():
    torch.manual_seed(1)
    x = torch.randn(64)
    torch.testing.assert_close(total(x), x.sum())
"""

KILLER_TEST = """
import torch

from sum_kernel import total


def test_tail_of_a_block():
    torch.manual_seed(2)
    x = torch.randn(37)
    torch.testing.assert_close(total(x), x.sum())
"""


# A defensive ``tl.where`` after a load that already fills masked-off lanes: dropping or
# changing ``other=`` cannot change any output (truly equivalent mutants), while dropping
# the load's mask reads past the end of ``x`` (a real bug).
GUARDED_SUM_KERNEL = SUM_KERNEL.replace(
    "    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)\n",
    "    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)\n    x = tl.where(offs < n, x, 0.0)\n",
)


def test_stage2_rejects_flaky_and_sparing_tests_accepts_a_killer_and_weighs_claims(tmp_path):
    assert "tl.where" in GUARDED_SUM_KERNEL
    (tmp_path / "sum_kernel.py").write_text(GUARDED_SUM_KERNEL)
    asked: dict[str, int] = {}

    def answer(body: dict) -> Reply:
        diff = body["messages"][1]["content"]
        if "+    x = tl.load(x_ptr + offs)\n" in diff:  # mask-drop
            key = "mask-drop"
            replies = [
                python_reply(FLAKY_TEST),
                Reply("I cannot decide; the kernel looks fine to me."),
                python_reply(KILLER_TEST),
            ]
        elif "other=1.0" in diff:
            key = "other-change"
            replies = [
                python_reply(SPARING_TEST),
                Reply("EQUIVALENT: the tl.where puts 0.0 back on every masked-off lane."),
            ]
        else:  # other-drop, and other-change to -inf
            key = "other-drop"
            replies = [Reply("EQUIVALENT: masked-off lanes are replaced by the tl.where.")]
        n = asked.get(key, 0)
        asked[key] = n + 1
        return replies[min(n, len(replies) - 1)]

    with FakeOpenAI(answer) as fake:
        proc = run_cli(
            "run",
            "sum_kernel.py",
            "--operators",
            "mask-drop,other-drop,other-change",
            "--writer",
            "none",
            "--stage2",
            "--base-url",
            fake.base_url,
            "--json",
            "r.json",
            "--no-diff-oracle",  # claims are weighed by execution even with it off
            cwd=tmp_path,
            env=_env(),
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = _report(tmp_path / "r.json")
    rows = {m["operator"] + ("-inf" if "inf" in m["after"] else ""): m for m in report["mutants"]}
    assert set(rows) == {"mask-drop", "other-drop", "other-change", "other-change-inf"}
    # mask-drop: a flaky test and prose, each rejected with why; then a killer, proved on
    # the original (every seed) and the mutant.
    drop = rows["mask-drop"]
    whys = [a["why"] for a in drop["attempts"]]
    assert len(whys) == 2, whys
    assert whys[0].startswith("flaky on the original: passed 1 of 3 runs (fresh seeds)"), whys
    assert whys[1] == "no code and no EQUIVALENT in the reply"
    assert drop["attempts"][1]["reply"].startswith("I cannot decide")
    assert "initial_seed" in drop["attempts"][0]["source"]
    assert all(a["by"] == "stage2" for a in drop["attempts"])
    assert (drop["verdict"], drop["by"]) == ("killed", "test:test_tail_of_a_block")
    assert drop["reason"].startswith("bounds: out-of-bounds load")
    killer = next(t for t in report["tests"] if t["name"] == "test::test_tail_of_a_block")
    assert killer["origin"] == "stage2" and killer["kills"] == [drop["id"]]
    # other-change: a test that spares it is rejected; then the model's EQUIVALENT is a
    # claim, and execution backs it: the oracle (run without --diff-oracle) finds every
    # output identical, poisoned lanes included, and the probe (run for the claim, since
    # --writer none ran none) finds no difference.
    change = rows["other-change"]
    assert [a["why"] for a in change["attempts"]] == [
        "passes on the mutant too: it does not kill it"
    ]
    assert report["settings"]["diff_oracle"] is False
    for operator, reason in (
        ("other-change", "the tl.where puts 0.0 back on every masked-off lane."),
        ("other-drop", "masked-off lanes are replaced by the tl.where."),
        ("other-change-inf", "masked-off lanes are replaced by the tl.where."),
    ):
        same = rows[operator]
        assert same["verdict"] == "equivalent" and same["by"] is None, same
        assert same["reason"].startswith(f"claimed by the model (stage 2): {reason}")
        model_claims = [c for c in same["claims"] if c["by"] == "stage2"]
        assert [(c["claim"], c["reason"]) for c in model_claims] == [("equivalent", reason)]
        evidence = model_claims[0]["evidence"]
        assert evidence["backed"] is True, evidence
        assert evidence["probe"].startswith("not distinguished by"), evidence
        assert same["probe"]["probes"] > 0 and not same["probe"].get("differs")
        assert same["oracle"]["identical"] is True and same["oracle"]["launches"] > 0
        assert [c["stage"] for c in same["changes"]][-1] == "claims"
    excluded = sorted(e["id"] for e in report["score"]["excluded"])
    claimed = ("other-change", "other-drop", "other-change-inf")
    assert excluded == sorted(rows[k]["id"] for k in claimed)
    assert report["checks"]["claims"]["backed"] == 3
    # the one kill is the model's test: yours kill none, with the written test 1 of 4
    assert report["score"]["raw"] == 0.0 and report["score"]["adjusted"] == 0.0
    written = report["score"]["with_written"]
    assert written["raw"] == round(100 * 1 / 4, 2) and written["adjusted"] == 100
    assert report["tokens"]["calls"] == sum(asked.values())


def test_reply_naming_another_model_stops_the_stage_not_the_run(tmp_path):
    kernel = _kernel(tmp_path)
    script = [python_reply(GOOD_TEST) for _ in range(3)]
    for reply in script:
        reply.model = "meta-llama/Llama-3.3-70B-Instruct"
    with FakeOpenAI(script) as fake:
        proc = run_cli(
            "run",
            kernel,
            "--operators",
            "other-change",
            "--writer",
            "llm",
            "--probes",
            "2",
            "--base-url",
            fake.base_url,
            "--json",
            "r.json",
            cwd=tmp_path,
            env=_env(),
        )
        chats = fake.chats
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(chats) == 1  # stopped at the first substituted reply
    out = " ".join(proc.stdout.split())
    assert "names model 'meta-llama/Llama-3.3-70B-Instruct', not the requested" in out
    report = _report(tmp_path / "r.json")
    assert report["stage1"]["accepted"] is None
    assert report["writers"]["notes"][0]["level"] == "error"
    assert not any(t["origin"] == "stage1" for t in report["tests"])


def test_bad_key_and_unknown_model_are_one_line(tmp_path):
    kernel = _kernel(tmp_path)
    with FakeOpenAI(models_status=401) as fake:
        proc = run_cli(
            "run", kernel, "--writer", "llm", "--base-url", fake.base_url, cwd=tmp_path, env=_env()
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "refused the API key (401)" in lines[0], proc.stderr
    assert "original passes" not in proc.stdout  # checked before the baseline ran

    with FakeOpenAI(models=("nvidia/Nemotron-3-Super-120B-A12B", "other/model")) as fake:
        proc = run_cli(
            "run", kernel, "--stage2", "--base-url", fake.base_url, cwd=tmp_path, env=_env()
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "not in the model list" in lines[0]
    assert "did you mean nvidia/Nemotron-3-Super-120B-A12B" in lines[0]
    assert "original passes" not in proc.stdout


def test_no_key_is_one_line_and_the_run_never_starts(tmp_path):
    """Asked for and no key: exit 2 with one line (it used to go on with the probe and
    pass CI); nothing runs, no report is written."""
    kernel = _kernel(tmp_path)
    env = {"NEBIUS_API_KEY": "", "OPENAI_API_KEY": ""}
    proc = run_cli(
        "run",
        kernel,
        "--operators",
        "other-change",
        "--writer",
        "llm",
        "--json",
        "r.json",
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        "mutant-gate: error: --writer llm needs a model key: set NEBIUS_API_KEY or "
        "OPENAI_API_KEY (or use --writer probe)"
    )
    assert not (tmp_path / "r.json").exists() and not (tmp_path / ".mutant-gate").exists()


def test_run_stage2_on_chosen_survivors_for_the_tui(tmp_path, sandbox, monkeypatch):
    """The API the explorer calls on marked survivors: run.run_stage(stage 2, ids) after a
    run."""
    from mutant_gate.cache import Store
    from mutant_gate.engine.events import MutantUpdated, RunFinished, TestAccepted
    from mutant_gate.engine.pipeline import Run
    from mutant_gate.engine.settings import LLMSettings, RunSettings, WriterSettings

    monkeypatch.setenv("NEBIUS_API_KEY", SECRET)
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    with FakeOpenAI(lambda body: python_reply(KILLER_TEST)) as fake:
        settings = RunSettings(
            kernel_path=str(tmp_path / "sum_kernel.py"),
            operators="other-change",
            cache_dir=str(tmp_path / "cache"),
            writers=WriterSettings(writer="none", llm=LLMSettings(base_url=fake.base_url)),
        )
        with Store(settings.cache_dir) as store:
            run = Run(settings, sandbox, store)
            events = list(run.events())
            assert isinstance(events[-1], RunFinished)
            judged = [m for m in run.mutants if run.ledger.outcome(m.id) is not None]
            assert len(judged) == 2  # other=0.0 changed to 1.0 and to -inf
            (survivor,) = [m for m in judged if "other=1.0" in m.after]
            assert {r["verdict"] for r in events[-1].report["mutants"]} == {"survived"}
            assert events[-1].report["tokens"]["calls"] == 0  # no model before it was asked
            got = list(run.run_stage(run.stage_named("stage2"), [survivor.id]))
            report = run.report()
    accepted = [e for e in got if isinstance(e, TestAccepted)]
    # Written for the chosen survivor; once proved, it kills every survivor it fails:
    # the -inf fill's mutant too.
    assert [(e.origin, e.mutant_id) for e in accepted] == [("stage2", survivor.id)], got
    assert set(accepted[0].kills) == {m.id for m in judged}, got
    assert any(isinstance(e, MutantUpdated) and e.mutant.id == survivor.id for e in got)
    row = next(r for r in report["mutants"] if r["id"] == survivor.id)
    assert (row["verdict"], row["by"]) == ("killed", "test:test_tail_of_a_block")
    assert report["tokens"]["calls"] == 1, got
    assert [t["origin"] for t in report["tests"]] == ["own", "stage2"]
    assert len(fake.chats) == 1, got
