"""The big-index check: an int32-overflow mutant told from the original on the CPU,
through the real command line, sandbox and interpreter (no 2^31-element tensor)."""

from __future__ import annotations

import json
import textwrap

import pytest

from .conftest import run_cli

pytestmark = pytest.mark.slow

ROW_SCALE = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def row_scale_kernel(x_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
        tl.store(y_ptr + row * stride + cols, x * 2.0, mask=mask)


    def row_scale(x):
        y = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[1])
        row_scale_kernel[(x.shape[0],)](x, y, x.stride(0), x.shape[1], BLOCK=block)
        return y


    if __name__ == "__main__":
        x = torch.randn(64, 100)
        torch.testing.assert_close(row_scale(x), x * 2)
""")


def _run(tmp_path, source: str) -> tuple[dict, str]:
    (tmp_path / "row_scale.py").write_text(source)
    proc = run_cli(
        "run", "row_scale.py", "--operators", "int64-cast-drop", "--writer", "none",
        "--json", "r.json", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return json.loads((tmp_path / "r.json").read_text()), proc.stdout


def test_a_dropped_int64_cast_of_a_row_index_is_killed_past_2_31_elements(tmp_path):
    report, stdout = _run(tmp_path, ROW_SCALE)
    (mutant,) = report["mutants"]
    assert mutant["after"] == "tl.program_id(0)", mutant["after"]
    # The own check cannot see it (64 rows); the replay past 2^31 elements does.
    assert (mutant["verdict"], mutant["by"]) == ("killed", "big-index"), mutant
    assert mutant["reason"].startswith("differs only past 2^31 elements: in row_scale_kernel")
    assert "addresses outside every tensor argument" in mutant["reason"]
    (change,) = mutant["changes"]
    assert (change["stage"], change["was"], change["now"]) == ("big_index", "survived", "killed")
    assert change["evidence"].startswith("the original's replay of row_scale_kernel stays inside")
    (replay,) = mutant["big_index"]["replays"]
    assert replay["grid"][0] * 100 > 2**31 and replay["programs"] == 8
    assert replay["wrapped"]["line"] == 12  # the load's line in the file
    # The original's own replay of the same launch stays inside its tensors.
    summary = report["checks"]["big_index"]
    (original,) = summary["original"]
    assert original["kernel"] == "row_scale_kernel" and original["wrapped"] is None
    assert original["factor"] == replay["factor"]
    assert summary["killed"] == 1
    assert "differ only past 2^31 elements" in stdout


def test_no_kill_when_the_original_wraps_too(tmp_path):
    # The cast sits on the column offsets, not the row index: the original's row offset
    # wraps at the same size, so the replay judges nothing and says why.
    source = ROW_SCALE.replace("tl.program_id(0).to(tl.int64)", "tl.program_id(0)").replace(
        "cols = tl.arange(0, BLOCK)", "cols = tl.arange(0, BLOCK).to(tl.int64)"
    )
    report, _ = _run(tmp_path, source)
    (mutant,) = report["mutants"]
    assert mutant["verdict"] == "survived", mutant
    summary = report["checks"]["big_index"]
    assert summary["original_wraps"] == ["row_scale_kernel"]
    assert "wrap past 2^31 elements too" in summary["skipped"]
    assert summary["killed"] == 0
