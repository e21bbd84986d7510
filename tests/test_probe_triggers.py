"""The probe's trigger kinds through the real command line and sandbox: each new kind
kills a mutant that the old kinds (sizes, block sizes, tiny sizes, non-power-of-two
sizes, float dtypes, value ranges) leave alive, and the report says which kind killed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from .conftest import run_cli

pytestmark = pytest.mark.slow

# One kernel per trigger kind, each with a mutant that only that kind's inputs show; the
# own check passes on the original and on every such mutant.
TRIGGERS_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, nprog, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for row in tl.range(pid, n_rows, nprog):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, axis=0))


def row_sum(x):
    """A persistent kernel: 8 programs, each looping over its rows."""
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows)
    row_sum_kernel[(8,)](x, out, n_rows, n_cols, 8, BLOCK=16)
    return out


@triton.jit
def strided_scale_kernel(x_ptr, out_ptr, n, stride_x, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride_x, mask=mask)
    tl.store(out_ptr + offs, x + 1.0, mask=mask)


def shifted(x):
    """Reads ``x`` through its stride: any 1-D view works."""
    out = torch.empty(x.shape)
    n = x.numel()
    strided_scale_kernel[(triton.cdiv(n, 32),)](x, out, n, x.stride(0), BLOCK=32)
    return out


@triton.jit
def safe_softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = tl.where(m == -float("inf"), 0.0, e / tl.sum(e, axis=0))
    tl.store(out_ptr + row * n_cols + cols, y, mask=mask)


def safe_softmax(x):
    """Softmax over rows of at most 32 columns; a row all -inf gives zeros."""
    assert x.shape[1] <= 32
    out = torch.empty_like(x)
    safe_softmax_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=32)
    return out


@triton.jit
def threshold_kernel(x_ptr, out_ptr, n, thr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.where(x > thr, x, 0.0), mask=mask)


def threshold(x, thr):
    assert x.dtype == torch.float32
    out = torch.empty_like(x)
    threshold_kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), thr, BLOCK=32)
    return out


@triton.jit
def widen_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.int64)
    tl.store(out_ptr + offs, x + 1, mask=mask)


def widen(x):
    """x + 1 as int64."""
    out = torch.empty(x.shape, dtype=torch.int64)
    widen_kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), BLOCK=32)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.rand(3, 16)
    torch.testing.assert_close(row_sum(x), x.sum(1))
    v = torch.rand(100)
    torch.testing.assert_close(shifted(v), v + 1.0)
    s = torch.rand(4, 32)
    torch.testing.assert_close(safe_softmax(s), torch.softmax(s, 1))
    t = torch.rand(100)
    torch.testing.assert_close(threshold(t, 0.25), torch.where(t > 0.25, t, 0.0))
    i = torch.randint(0, 100, (64,), dtype=torch.int32)
    assert torch.equal(widen(i), i.long() + 1)
'''

OPERATORS = "acc-init-hoist,mul-div,where-drop,compare-gt-ge,int-narrow"
OLD_KINDS = "base,size,block,small,npot,dtype,values"
# (operator, the mutated source) -> the trigger kind that kills it
EXPECTED = {
    ("acc-init-hoist", "acc = tl.zeros((BLOCK,), dtype=tl.float32)"): "more-rows",
    ("mul-div", "offs * stride_x"): "non-contiguous",
    ("where-drop", 'tl.where(m == -float("inf"), 0.0, e / tl.sum(e, axis=0))'): "special-values",
    ("compare-gt-ge", "x > thr"): "boundary-values",
    ("int-narrow", "tl.load(x_ptr + offs, mask=mask).to(tl.int64)"): "int-dtype",
}


def _targets(report: dict) -> dict[str, dict]:
    """The expected trigger kind -> that mutant's report row."""
    found = {}
    for m in report["mutants"]:
        for (operator, before), kind in EXPECTED.items():
            if m["operator"] == operator and before in m["before"]:
                if operator != "where-drop" or m["after"].startswith("e / "):
                    found[kind] = m
    assert set(found) == set(EXPECTED.values()), sorted(found)
    return found


@pytest.mark.timeout(900)  # two whole runs with the probe on five survivors
def test_each_new_trigger_kind_kills_what_the_old_kinds_cannot(tmp_path):
    (tmp_path / "triggers.py").write_text(TRIGGERS_KERNEL)
    common = ["run", "triggers.py", "--operators", OPERATORS, "-j", "2", "--cache-dir", "c"]
    # every input of the budget, not as many as the time budget leaves: the kinds are the
    # subject (with the default, a file this small gives the probe a few seconds of jobs,
    # and the survivor that only more rows reveal was seen to say its time ran out first)
    common += ["--probe-time", "0", "-v"]  # -v: the kills by trigger

    old = run_cli(*common, "--probe-triggers", OLD_KINDS, "--json", "old.json", cwd=tmp_path)
    assert old.returncode == 0, old.stdout + old.stderr
    report = json.loads((tmp_path / "old.json").read_text())
    for kind, row in _targets(report).items():
        # the own check and every old kind of input leave it alive, and nothing differed
        assert row["verdict"] == "survived", (kind, row)
        assert row["probe"]["result"].startswith("not distinguished by "), (kind, row)
        assert "trigger" not in row["probe"]
    assert report["writers"]["probe"]["kills_by_trigger"] == {}
    assert set(report["writers"]["probe"]["probes_by_trigger"]) <= set(OLD_KINDS.split(","))
    assert "probe: 0 of 5 survivors killed" in old.stdout

    new = run_cli(*common, "--json", "new.json", cwd=tmp_path)
    assert new.returncode == 0, new.stdout + new.stderr
    report = json.loads((tmp_path / "new.json").read_text())
    for kind, row in _targets(report).items():
        assert row["verdict"] == "killed" and row["by"].startswith("test:"), (kind, row)
        assert row["probe"]["trigger"] == kind, (kind, row["probe"])
        assert row["by"].removeprefix("test:") in row["probe"]["result"]
    summary = report["writers"]["probe"]
    assert summary["survivors"] == 5
    assert summary["kills_by_trigger"] == dict.fromkeys(EXPECTED.values(), 1)
    assert "probe: 5 of 5 survivors killed (by trigger: " in new.stdout
    # each kill is a plain written test whose input says what the trigger did
    tests = {k: t["source"] for t in report["tests"] if t["origin"] == "probe" for k in t["kills"]}
    rows = _targets(report)
    assert "[::2]" in tests[rows["non-contiguous"]["id"]]
    assert 'x[0] = float("-inf")' in tests[rows["special-values"]["id"]]
    assert "torch.iinfo(torch.int" in tests[rows["int-dtype"]["id"]]
    assert "torch.empty((17, 16))" in tests[rows["more-rows"]["id"]]
    assert "0.25" in tests[rows["boundary-values"]["id"]].split("def test_")[1]


LIB = Path(__file__).resolve().parent.parent / "examples" / "kernel_lib"


@pytest.mark.timeout(900)
def test_the_probe_tries_first_what_a_person_tries_first(tmp_path):
    """examples/kernel_lib's rms_norm judged by its own tests/test_rms_norm.py (default
    budget): ``+ eps -> - eps`` and eps dropped (a row or tensor of zeros: the original
    gives 0, both mutants NaN) and the dropped ``.to(tl.float32)`` (float16 values whose
    square overflows float16) survive the project's tests; the probe kills all three with
    tests that import ``rms_norm`` as the project's tests do."""
    root = tmp_path / "kernel_lib"
    shutil.copytree(LIB, root)
    proc = run_cli(
        "run", "src/kernel_lib/ops/rms_norm.py", "--tests", "tests/test_rms_norm.py",
        "--json", "r.json", "--cache-dir", "c", "--write-tests", "written", cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((root / "r.json").read_text())
    rows = {
        "minus eps": next(
            m for m in report["mutants"] if m["operator"] == "add-sub" and "+ eps" in m["before"]
        ),
        "eps dropped": next(m for m in report["mutants"] if m["operator"] == "epsilon-change"),
        "upcast dropped": next(m for m in report["mutants"] if m["operator"] == "upcast-drop"),
    }
    written = {p: p.read_text() for p in (root / "written").glob("test_*.py")}
    for what, row in rows.items():
        # the project's tests let it through: the user's own score does not count it
        assert row["verdict"] == "killed" and row["by"].startswith("test:"), (what, row)
        assert row["probe"]["trigger"] in {"special-values", "values", "dtype"}, row["probe"]
        name = row["by"].removeprefix("test:")
        [source] = [text for text in written.values() if f"def {name}(" in text]
        assert "from kernel_lib.ops.rms_norm import rms_norm" in source
        assert "= rms_norm(" in source.split(f"def {name}(")[1]
    assert "zero" in rows["minus eps"]["probe"]["input"], rows["minus eps"]["probe"]
    assert "float16" in rows["upcast dropped"]["probe"]["input"], rows["upcast dropped"]["probe"]
