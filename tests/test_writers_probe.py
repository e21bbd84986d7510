"""The probe writer (no model) through the real command line and sandbox, and the
written tests under plain pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mutant_gate.engine.harness.probe.values import MAX_GOLDEN_ELEMENTS

from .conftest import run_cli
from .test_writers_llm import SUM_KERNEL

pytestmark = pytest.mark.slow


def plain_pytest(directory, kernel_dir) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
        cwd=kernel_dir,
        env={**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(kernel_dir)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_probe_kills_what_a_block_multiple_check_misses_and_writes_plain_tests(tmp_path):
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    args = ["run", "sum_kernel.py", "--operators", "masks", "--probes", "12", "-j", "2"]
    proc = run_cli(*args, "-v", "--write-tests", "written", "--json", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = {m["operator"]: m for m in report["mutants"]}

    # Without a writer all three survive the own check (x of 64 = BLOCK); see
    # test_tests_option. The probe learned total(x: (64,)) and tried nearby sizes.
    drop, change = rows["mask-drop"], rows["other-change"]
    assert drop["verdict"] == "killed" and drop["by"].startswith("test:test_total_size_"), drop
    assert drop["reason"].startswith("bounds: out-of-bounds load"), drop["reason"]
    assert change["verdict"] == "killed" and change["by"].startswith("test:"), change
    probe_tests = [t for t in report["tests"] if t["origin"] == "probe"]
    assert probe_tests and {drop["id"], change["id"]} <= {
        k for t in probe_tests for k in t["kills"]
    }
    for t in probe_tests:
        assert t["file"].startswith("test_sum_kernel_mg_probe_") and "total(x)" in t["source"]

    # other-drop: the masked-off lane is undefined on a GPU; the interpreter fills it with
    # NaN (poisoned lanes), so the probe's size-63 call sees it, with the line to fix.
    undefined = rows["other-drop"]
    assert undefined["verdict"] == "killed" and undefined["by"].startswith("test:"), undefined
    assert "reads undefined lanes: tl.load without other=" in undefined["reason"]
    # (other-change plants other=-float("inf") for this load too: four mutants in all)
    assert report["score"]["by_verdict"] == {"killed": 4}

    # The written test (and its golden file) passes under plain pytest on the original ...
    written = sorted(p.name for p in (tmp_path / "written").iterdir())
    assert any(n.endswith(".json") for n in written) and any(n.endswith(".py") for n in written)
    plain = plain_pytest(tmp_path / "written", tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    # ... and fails on the other=1.0 mutant, by its values alone (no bounds check there).
    mutant_dir = tmp_path / "mutant"
    mutant_dir.mkdir()
    (mutant_dir / "sum_kernel.py").write_text(SUM_KERNEL.replace("other=0.0", "other=1.0"))
    plain = plain_pytest(tmp_path / "written", mutant_dir)
    assert plain.returncode == 1, plain.stdout + plain.stderr
    assert "Mismatched elements" in plain.stdout or "not close" in plain.stdout


def test_probe_learns_the_launch_where_the_own_check_calls_no_public_function(tmp_path):
    """The own check reaches the kernel through a private helper: no public function is
    on the path, so the probe learns the launch itself (arguments, grid, constexprs) and
    varies it: its tensors and grid as recorded, an integer argument equal to their
    extent one short, so the masked-off lane's ``other`` shows."""
    kernel = SUM_KERNEL.replace("def total(x):", "def _total(x):").replace(
        "total(x), x.sum()", "_total(x), x.sum()"
    )
    (tmp_path / "k.py").write_text(kernel)
    proc = run_cli(
        "run", "k.py", "--operators", "other-change", "--json", "r.json", "-v",
        "--write-tests", "written", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 of them kernel launches" in proc.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    rows = report["mutants"]
    assert len(rows) == 2  # other=0.0 changed to 1.0 and to -inf
    for row in rows:
        assert row["verdict"] == "killed", row
        assert row["probe"]["trigger"] == "size"
        assert "n=63 instead of 64" in row["probe"]["input"]
    (test,) = (tmp_path / "written").glob("*.py")
    source = test.read_text()
    assert "from k import sum_kernel" in source
    assert "    sum_kernel[(1,)](x_ptr, out_ptr, 63, BLOCK=64)\n" in source
    assert "result" not in source.split("def test_")[1]  # a launch is a statement


# The vector-add tutorial's shape (98432 = 96 blocks of 1024 + 128), checked only for its
# shape: every candidate near the own check's has more outputs than a golden file holds.
BIG_ADD_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    n = out.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    x, y = torch.rand(98432), torch.rand(98432)
    assert add(x, y).shape == x.shape  # the values are never compared
"""


def test_probe_kills_on_a_big_own_check_with_a_sampled_golden(tmp_path):
    """98432 outputs: more than a golden file holds. The probe keeps the own check's size
    (every program, the tail included) and the test compares a sample of positions."""
    (tmp_path / "big_add.py").write_text(BIG_ADD_KERNEL)
    args = ["run", "big_add.py", "--operators", "add-sub", "-j", "2", "--json", "r.json"]
    proc = run_cli(*args, "-v", "--write-tests", "written", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    (sub,) = [m for m in report["mutants"] if m["before"] == "x + y"]
    assert sub["after"] == "x - y"
    assert sub["verdict"] == "killed" and sub["by"].startswith("test:test_add_"), sub
    assert not [c for m in report["mutants"] for c in m.get("claims", [])]
    (written,) = (tmp_path / "written").glob("*.py")
    golden = json.loads(written.with_suffix(".json").read_text())["result"]
    assert golden["kind"] == "sample"
    assert golden["shape"][0] in (98431, 98432, 98433)  # a size near the own check's
    assert len(golden["values"]) <= MAX_GOLDEN_ELEMENTS
    plain = plain_pytest(tmp_path / "written", tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr


def test_survivors_sharing_a_job_with_big_outputs_die_on_the_learned_call(tmp_path):
    """Four survivors of a print-only check (the vector-add tutorial's shape) share
    compare jobs, each hit keeping a sample of 98432 outputs. Their answers together
    once passed the result limit: the runner was ended as dead, the probe blamed the
    mutant whose marker came last ("crashes") and wrote its test from the wrong input
    (int32 zeros, on which x - y == x + y). Now the first input, the learned call with
    fresh values, kills each, and nothing is run again."""
    (tmp_path / "big_add.py").write_text(BIG_ADD_KERNEL)
    operators = "add-sub,mul-div,program-id-swap,block-offset-drop"
    args = ["run", "big_add.py", "--operators", operators, "-j", "2", "--json", "r.json"]
    proc = run_cli(*args, "-v", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    (sub,) = [m for m in report["mutants"] if m["after"] == "x - y"]
    assert sub["verdict"] == "killed" and sub["probe"]["trigger"] == "base", sub
    assert sub["attempts"] == []  # no test from a wrong input was tried
    probe = report["writers"]["probe"]
    assert probe["spend"]["retried"] == 0, probe["spend"]
    assert set(probe["kills_by_trigger"]) == {"base"}, probe
    assert "the mutant crashes" not in proc.stdout


# Every output is a fixed 70000-element buffer: more than a golden file holds, whatever
# the input's size. The test keeps a sample of positions, where the mutant differs first.
BIG_OUTPUT_KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2.0, mask=mask)


def scaled(x):
    out = torch.zeros(70000)
    scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out


if __name__ == "__main__":
    x = torch.rand(4096)
    assert scaled(x).shape == (70000,)  # the values are never compared
"""


def test_probe_kills_when_every_output_is_bigger_than_a_golden_file(tmp_path):
    (tmp_path / "big_out.py").write_text(BIG_OUTPUT_KERNEL)
    args = ["run", "big_out.py", "--operators", "mul-div", "--probes", "8", "-j", "2"]
    proc = run_cli(*args, "-v", "--json", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    (div,) = [m for m in report["mutants"] if m["before"] == "x * 2.0"]
    assert div["verdict"] == "killed" and div["by"].startswith("test:"), div
    assert div["claims"] == []
    assert "no difference found" not in proc.stdout


# Two kernels: the public wrapper launches only the first; the second is launched by a
# private helper the own check calls (as the layer-norm tutorial's backward kernels are
# launched by autograd, never by the wrapper the probe can call).
TWO_KERNELS = """
import torch
import triton
import triton.language as tl


@triton.jit
def triple_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3.0, mask=mask)


@triton.jit
def halve_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 0.5, mask=mask)


def triple(x):
    out = torch.empty_like(x)
    triple_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


def _halve(x):
    out = torch.empty_like(x)
    halve_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


if __name__ == "__main__":
    x = torch.rand(100)
    assert triple(x).shape == _halve(x).shape  # the values are never compared
"""


def test_probe_reaches_each_kernel_the_way_the_check_does(tmp_path):
    """``triple_kernel`` is reached through the public ``triple``: learned as that call;
    ``halve_kernel`` only through the private ``_halve``: learned as its launch. Both
    mutants die, each by a test that calls the kernel the way the check reached it."""
    (tmp_path / "two.py").write_text(TWO_KERNELS)
    args = ["run", "two.py", "--operators", "mul-div", "--probes", "4", "-j", "2"]
    proc = run_cli(*args, "-v", "--json", "r.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said = " ".join(proc.stdout.split())
    assert "learned 2 wrapper calls (1 of them kernel launches" in said, said
    report = json.loads((tmp_path / "r.json").read_text())
    (tri,) = [m for m in report["mutants"] if "* 3.0" in m["before"]]
    (half,) = [m for m in report["mutants"] if "* 0.5" in m["before"]]
    for row in (tri, half):
        assert row["verdict"] == "killed" and row["by"].startswith("test:"), row
    sources = {t["name"]: t["source"] for t in report["tests"] if t["origin"] == "probe"}
    assert any("result = triple(x)" in s for s in sources.values()), sources
    assert any(
        "    halve_kernel[(2,)](x_ptr, out_ptr, 100, BLOCK=64)" in s for s in sources.values()
    )


@pytest.mark.slow
def test_rerun_writes_probe_tests_for_the_chosen_survivors_only(tmp_path):
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    first = run_cli(
        "run", "sum_kernel.py", "--operators", "masks", "--writer", "none", "-j", "2",
        "--cache-dir", "c", "--json", "r.json", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    rows = {m["operator"]: m for m in json.loads((tmp_path / "r.json").read_text())["mutants"]}
    assert {m["verdict"] for m in rows.values()} == {"survived"}
    chosen = rows["mask-drop"]["id"]
    # No key needed for the probe; with --writer llm and no key: one line, exit 2.
    env = {"NEBIUS_API_KEY": "", "OPENAI_API_KEY": ""}
    refused = run_cli(
        "rerun", "latest", "--mutant", chosen, "--writer", "llm", "--cache-dir", "c",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "mutant-gate: error: --writer llm needs a model key: set NEBIUS_API_KEY or OPENAI_API_KEY"
    ]
    again = run_cli(
        "rerun", "latest", "--mutant", chosen, "--writer", "probe", "--cache-dir", "c",
        "--json", "rr.json", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads((tmp_path / "rr.json").read_text())
    after = {m["operator"]: m for m in report["mutants"]}
    assert after["mask-drop"]["verdict"] == "killed"
    assert after["mask-drop"]["by"].startswith("test:test_total_size_")
    assert f"{chosen} killed by test:test_total_size_" in again.stdout
    # The survivors nobody chose keep their verdict and were not probed.
    for op in ("other-drop", "other-change"):
        assert after[op]["verdict"] == "survived" and not after[op].get("probe"), after[op]
    assert any(t["origin"] == "probe" and chosen in t["kills"] for t in report["tests"])


def test_the_probe_stops_at_its_time_budget_and_says_what_it_left(tmp_path):
    """A survivor no input separates (softmax's loop in steps of 1: slower, the same
    values) runs its first round whatever the time budget; with a budget spent by then
    it stops and says which planned inputs and kinds it left; with no time limit it
    runs its whole --probes budget; by default its budget is the mutants' job seconds."""
    source = os.path.join(os.path.dirname(__file__), "..", "examples", "softmax.py")
    (tmp_path / "softmax.py").write_text(open(source).read())

    def run(*flags):
        args = ["run", "softmax.py", "--operators", "range-step-change", "-j", "2", *flags]
        proc = run_cli(*args, "-v", "--json", "r.json", "--no-cache", cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = json.loads((tmp_path / "r.json").read_text())
        (survivor,) = [m for m in report["mutants"] if m["verdict"] == "survived"]
        return report, survivor

    report, survivor = run("--probe-time", "0.001")
    spend = report["writers"]["probe"]["spend"]
    assert survivor["probe"]["probes"] == 2, survivor["probe"]  # the first round: 2 inputs
    result = survivor["probe"]["result"]
    assert result.startswith("not distinguished by 2 probes (kinds base, "), result
    assert "22 planned inputs left unprobed when the probe's time (0.001 s of jobs, " in result
    assert "--probe-time) ran out (kinds never tried: " in result and "magnitude" in result
    assert spend["budget_s"] == 0.001 and spend["job_s"] > 0.001, spend

    report, survivor = run("--probe-time", "0")
    assert survivor["probe"]["probes"] >= 20, survivor["probe"]  # 24 less what the original rejects
    assert "left unprobed" not in survivor["probe"]["result"]
    assert "budget_s" not in report["writers"]["probe"]["spend"]

    report, survivor = run()
    spend = report["writers"]["probe"]["spend"]
    # the default: 0.8 of the CPU seconds the mutants' jobs took (the own check killed the
    # other one)
    assert [m["by"] for m in report["mutants"] if m["verdict"] == "killed"] == ["own-check"]
    mutants = sum(m["cpu_s"] for m in report["mutants"])
    assert mutants > 0
    assert spend["budget_s"] == pytest.approx(0.8 * mutants, abs=0.01), (spend, mutants)
