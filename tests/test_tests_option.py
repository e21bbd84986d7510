"""Own checks written as test_* functions, and extra tests from --tests, named in kills."""

from __future__ import annotations

import json
import textwrap

import pytest

from .conftest import run_cli

pytestmark = pytest.mark.slow

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

ODD_SIZE_TEST = textwrap.dedent("""
    import torch

    from sum_kernel import total


    def test_odd_size():
        x = torch.randn(50)
        torch.testing.assert_close(total(x), x.sum())
""")


def test_extra_tests_kill_what_the_own_check_misses(tmp_path):
    (tmp_path / "sum_kernel.py").write_text(SUM_KERNEL)
    (tmp_path / "test_sum.py").write_text(ODD_SIZE_TEST)
    base = ["run", "sum_kernel.py", "--operators", "masks", "--writer", "none"]
    alone = run_cli(*base, "--json", "alone.json", cwd=tmp_path)
    assert alone.returncode == 0, alone.stderr
    both = run_cli(*base, "--tests", "test_sum.py", "--json", "both.json", cwd=tmp_path)
    assert both.returncode == 0, both.stderr
    before = json.loads((tmp_path / "alone.json").read_text())
    after = json.loads((tmp_path / "both.json").read_text())
    assert [t["name"] for t in after["tests"]] == ["own-check", "test::test_odd_size"]
    change = {m["after"]: m for m in after["mutants"] if m["operator"] == "other-change"}
    other_one = "tl.load(x_ptr + offs, mask=offs < n, other=1.0)"
    assert other_one in change, list(change)
    assert next(m for m in before["mutants"] if m["after"] == other_one)["verdict"] == "survived"
    assert (change[other_one]["verdict"], change[other_one]["by"]) == (
        "killed",
        "test:test_odd_size",
    )
    assert after["score"]["killed"] > before["score"]["killed"]


KERNEL_WITH_TEST_FUNCTIONS = textwrap.dedent("""
    import pytest
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


    def scale(x, factor):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 32),)](x, out, x.numel(), factor, BLOCK=32)
        return out


    @pytest.mark.parametrize("n", [32, 50])
    def test_scale(n):
        x = torch.randn(n)
        torch.testing.assert_close(scale(x, 3.0), x * 3.0)
""")


def test_own_check_as_test_functions(tmp_path):
    kernel = tmp_path / "scale.py"
    kernel.write_text(KERNEL_WITH_TEST_FUNCTIONS)
    proc = run_cli(
        "run", str(kernel), "--writer", "none", "--json", str(tmp_path / "r.json"), cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert [t["name"] for t in report["tests"]] == [
        "own-check::test_scale[32]",
        "own-check::test_scale[50]",
    ]
    killed = [m for m in report["mutants"] if m["verdict"] == "killed"]
    assert killed and {m["by"] for m in killed} <= {"own-check", "bounds"}
    mul_div = next(
        m for m in report["mutants"] if m["operator"] == "mul-div" and "/ factor" in m["after"]
    )
    assert (mul_div["verdict"], mul_div["by"]) == ("killed", "own-check")
    assert "test_scale" in mul_div["reason"]
