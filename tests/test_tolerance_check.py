"""The tolerance check end to end (engine/checks/tolerance.py over harness/closeness.py): a
real kernel whose test compares with a loose atol lets a mutant through that shifts every
output a little; the check names the test line, proposes a tighter atol, runs the test with
it on the original (three seeds) and on the mutant, and only then calls the survivor
hidden by tolerance. Nothing of it changes a verdict or the score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import run_cli

KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def shift_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 2.0 + 0.001, mask=mask)


def shift(x):
    out = torch.empty_like(x)
    n = x.numel()
    shift_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)
    return out
"""

TESTS = """import torch

from shifted import shift


def test_shift():
    x = torch.rand(200)
    torch.testing.assert_close(shift(x), x * 2.0 + 0.001, atol=0.05, rtol=0)
"""

OWN_CHECK = """

if __name__ == "__main__":
    x = torch.rand(100)
    assert torch.allclose(shift(x), x * 2.0 + 0.001, atol=0.05)
"""


@pytest.mark.slow
def test_a_survivor_a_tighter_checked_atol_kills_is_hidden_by_tolerance(tmp_path: Path):
    (tmp_path / "shifted.py").write_text(KERNEL)
    (tmp_path / "test_shifted.py").write_text(TESTS)
    proc = run_cli(
        "run", "shifted.py", "--tests", "test_shifted.py", "--writer", "none",
        "--no-write-tests", "--tolerance", "--json", "r.json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    rows = {m["id"]: m for m in report["mutants"]}
    survivors = [m for m in rows.values() if m["verdict"] == "survived"]
    assert survivors, "the loose atol lets some mutant through"
    hidden = [
        m for m in survivors if (m.get("survivor") or {}).get("kind") == "hidden_by_tolerance"
    ]
    assert hidden, [m.get("tolerance") for m in survivors]
    for row in hidden:
        section = row["tolerance"]
        assert section["where"] == "test_shifted.py:8"
        assert section["fn"] == "torch.testing.assert_close" and section["atol"] == 0.05
        assert section["checked"] is True and section["hidden"] is True
        p = section["proposal"]["atol"]
        assert section["original"]["atol_needed"] < p < section["mutant"]["atol_needed"]
        assert "fails the mutant and passes the original (checked, 3 seeds)" in section["line"]
    # a mutant that shifts the outputs by 0.002 (+ 0.001 -> - 0.001) is one of them
    assert any(
        m["tolerance"]["mutant"]["max_abs"] == pytest.approx(0.002, rel=0.01) for m in hidden
    )
    # it explains survivors, never judges them: they stay survivors, the score as it was
    assert all(m["verdict"] == "survived" for m in hidden)
    checks = report["checks"]["tolerance"]
    assert checks["hidden"] == len(hidden)
    assert checks["lines"][0]["where"] == "test_shifted.py:8"
    assert sorted(checks["lines"][0]["killed"]) == sorted(m["id"] for m in hidden)


@pytest.mark.slow
def test_a_survivor_of_the_users_tests_keeps_its_line_when_a_written_test_kills_it(tmp_path: Path):
    """The score is the user's: a mutant the probe's written test kills still passed the
    user's assertion, and the row says which and what would have caught it."""
    # an own check the probe learns the call from, as loose as the test
    (tmp_path / "shifted.py").write_text(KERNEL + OWN_CHECK)
    (tmp_path / "test_shifted.py").write_text(TESTS)
    proc = run_cli(
        "run", "shifted.py", "--tests", "test_shifted.py", "--no-write-tests",
        "--json", "r.json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    written = {t["name"].split("::")[-1] for t in report["tests"] if t.get("origin") == "probe"}
    by_written = [
        m for m in report["mutants"]
        if m["verdict"] == "killed" and m["by"].removeprefix("test:") in written
    ]  # fmt: skip
    assert by_written, "the probe kills what the loose atol let through"
    for row in by_written:
        section = row["tolerance"]
        assert section["where"] in ("test_shifted.py:8", "shifted.py:24"), section
        assert section["hidden"] is True
    assert report["score"]["killed"] < report["score"]["with_written"]["killed"]


DRIFTING = """import torch

from shifted import shift


def test_shift():
    x = torch.rand(200)
    drift = 3e-4 * (torch.initial_seed() % 7)  # 0 on the run's seed, more on the next
    torch.testing.assert_close(shift(x), x * 2.0 + 0.001 + drift, atol=0.05, rtol=0)
"""


@pytest.mark.slow
def test_a_proposal_the_original_fails_on_another_seed_is_not_claimed(tmp_path: Path):
    """The original's error moves with the seed: a tolerance under it on the run's seed
    fails the original on the next one, and the survivor is not called hidden."""
    (tmp_path / "shifted.py").write_text(KERNEL)
    (tmp_path / "test_shifted.py").write_text(DRIFTING)
    proc = run_cli(
        "run", "shifted.py", "--tests", "test_shifted.py", "--writer", "none",
        "--no-write-tests", "--json", "r.json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    survivors = [m for m in report["mutants"] if m["verdict"] == "survived"]
    tried = [m for m in survivors if (m.get("tolerance") or {}).get("proposal")]
    assert tried, [m.get("tolerance") for m in survivors]
    for row in tried:
        assert row["tolerance"]["checked"] is False and row["tolerance"]["hidden"] is False
        assert "was tried and did not separate them" in row["tolerance"]["line"]
        assert row["survivor"]["kind"] != "hidden_by_tolerance"
    assert report["checks"]["tolerance"]["hidden"] == 0
    assert report["survivor_kinds"]["hidden_by_tolerance"] == 0
