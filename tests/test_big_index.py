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


def _run(
    tmp_path, source: str, name: str = "row_scale.py", operators: str = "int64-cast-drop"
) -> tuple[dict, str]:
    (tmp_path / name).write_text(source)
    proc = run_cli(
        "run", name, "--operators", operators, "--writer", "none",
        "--json", "r.json", "-v", cwd=tmp_path,  # -v: the check's line on each mutant
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
    # ... and the survivor's own reason says the check did not judge it
    assert "not judged by the big-index check: the original's offsets wrap" in mutant["reason"]
    assert mutant["big_index"] == {"not_judged": summary["skipped"]}


# A row-wise norm: the row offset is cast to int64 (the fix of a real overflow bug), and
# the row stride equals the weight's length (hidden size 64, a weight of 64 elements).
# Scaling every integer equal to some tensor's length would scale the stride too, and the
# original's replay would leave its tensors: the stride must stay, the row count grow.
NORM = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def norm_kernel(x_ptr, w_ptr, y_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(AXIS).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        rms = tl.sqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        tl.store(y_ptr + row * stride + cols, x / rms * w, mask=mask)


    def norm(x, w, eps=1e-6):
        y = torch.empty_like(x)
        block = triton.next_power_of_2(x.shape[1])
        grid = (x.shape[0], 1) if AXIS == 0 else (1, x.shape[0])
        norm_kernel[grid](x, w, y, x.stride(0), x.shape[1], eps, BLOCK=block)
        return y


    if __name__ == "__main__":
        x, w = torch.randn(32, 64), torch.randn(64)
        ref = x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
        torch.testing.assert_close(norm(x, w), ref, rtol=1e-4, atol=1e-4)
""")


@pytest.mark.parametrize("axis", [0, 1])
def test_a_norm_whose_stride_equals_the_weight_length(tmp_path, axis):
    source = NORM.replace("AXIS", str(axis)).replace("import torch\n", "import torch\nAXIS = 0\n")
    source = source.replace("AXIS = 0", f"AXIS = {axis}")
    report, _ = _run(tmp_path, source, "norm.py", "int64-cast-drop,int-narrow")
    rows = [m for m in report["mutants"] if "program_id" in m["before"]]
    assert {m["operator"] for m in rows} == {"int64-cast-drop", "int-narrow"}, rows
    for m in rows:
        assert (m["verdict"], m["by"]) == ("killed", "big-index"), m
        assert f"along axis {axis}" in m["reason"], m["reason"]
    (kept,) = [r for r in report["checks"]["big_index"]["original"] if r["axis"] == axis]
    assert kept["wrapped"] is None
    assert kept["scaled"] == ["n_cols"]  # the stride (= the weight's length) left as it is


# A gather: the row offset comes from a loaded index. The replay reads loads as zeros,
# so it never reaches a big offset there, and it says so instead of "all checks passed".
GATHER = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def gather_kernel(x_ptr, idx_ptr, y_ptr, stride, n_cols, BLOCK: tl.constexpr):
        pid = tl.program_id(0).to(tl.int64)
        src = tl.load(idx_ptr + pid).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + src * stride + cols, mask=mask, other=0.0)
        tl.store(y_ptr + pid * stride + cols, x, mask=mask)


    def gather(x, idx):
        y = torch.empty((idx.numel(), x.shape[1]), dtype=x.dtype)
        block = triton.next_power_of_2(x.shape[1])
        gather_kernel[(idx.numel(),)](x, idx, y, x.stride(0), x.shape[1], BLOCK=block)
        return y


    if __name__ == "__main__":
        x, idx = torch.randn(50, 100), torch.randint(0, 50, (40,), dtype=torch.int32)
        torch.testing.assert_close(gather(x, idx), x[idx.long()])
""")


def test_offsets_from_loaded_indices_are_not_judged_and_say_so(tmp_path):
    report, stdout = _run(tmp_path, GATHER, "gather.py")
    rows = {m["before"]: m for m in report["mutants"]}
    loaded = rows["tl.load(idx_ptr + pid).to(tl.int64)"]
    assert loaded["verdict"] == "survived", loaded
    assert "not judged by the big-index check: gather_kernel loads integers" in loaded["reason"]
    assert "not judged by the big-index check" in stdout
