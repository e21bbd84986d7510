"""Tutorial-style files, unmodified: CUDA hard-coded, checks at module level,
benchmarks at the end, checks that assert nothing."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mutant_gate.engine.own_check import NOTHING_ASSERTED, analyse

from .conftest import run_cli

DATA = Path(__file__).resolve().parent / "data"


def test_module_level_check_that_only_prints_asserts_nothing():
    own = analyse((DATA / "tutorial_vector_add.py").read_text())
    assert own.module_level and not own.has_main
    assert own.asserts is False  # `assert x.is_cuda` in the wrapper is a precondition, not a check


def test_test_function_with_parameters_is_called_not_collected():
    own = analyse((DATA / "tutorial_layer_norm.py").read_text())
    assert own.module_level
    assert own.test_functions == ()  # test_layer_norm(M, N, dtype) has no fixtures for pytest
    assert own.asserts is True


@pytest.mark.parametrize(
    ("body", "asserts"),
    [
        ("if __name__ == '__main__':\n    print(f(1))\n", False),
        ("if __name__ == '__main__':\n    torch.testing.assert_close(f(1), 2)\n", True),
        ("if __name__ == '__main__':\n    assert f(1) == 2\n", True),
        ("if __name__ == '__main__':\n    if f(1) != 2:\n        raise SystemExit('bad')\n", True),
        ("def test_f():\n    assert f(1) == 2\n", True),
        ("@pytest.mark.parametrize('n', [1, 2])\ndef test_f(n):\n    print(f(n))\n", False),
    ],
)
def test_asserts_detection(body, asserts):
    source = (
        "def f(x):\n    if x < 0:\n        raise ValueError(x)\n    return x + 1\n\n"
        + textwrap.dedent(body)
    )
    assert analyse(source).asserts is asserts


@pytest.mark.slow
def test_unmodified_tutorial_runs_on_cpu_with_shims_named(tmp_path):
    proc = run_cli(
        "run",
        str(DATA / "tutorial_vector_add.py"),
        "--json",
        "r.json",
        "--writer",
        "none",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert NOTHING_ASSERTED in " ".join(proc.stdout.split())
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["own_check"]["asserts"] is False
    assert report["own_check"]["note"] == NOTHING_ASSERTED
    shims = report["baseline"]["shims"]
    for expected in (
        "device='cuda': cuda -> cpu",
        "Tensor.is_cuda: a CPU tensor says True",
        "torch.cuda.synchronize",
        "triton.testing.perf_report: benchmark not run",
    ):
        assert expected in shims, shims
    verdicts = {m["verdict"] for m in report["mutants"]}
    assert verdicts <= {"killed", "survived", "not_compilable"}, verdicts
    # Printing checks catch nothing by value: what dies, dies by bounds or a crash.
    assert {m["by"] for m in report["mutants"] if m["verdict"] == "killed"} <= {
        "bounds",
        "crash",
        "own-check",
    }
    assert any(m["verdict"] == "survived" and m["operator"] == "add-sub" for m in report["mutants"])


@pytest.mark.slow
def test_tutorial_layer_norm_module_level_check(tmp_path):
    proc = run_cli(
        "run",
        str(DATA / "tutorial_layer_norm.py"),
        "--json",
        "r.json",
        "--writer",
        "none",
        "--operators",
        "arith",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["own_check"]["kinds"] == ["main"]
    assert report["own_check"]["asserts"] is True
    # the tutorial passes eps as a float argument: an fp32 scalar, as compiled
    assert report["baseline"]["shims"] == [
        "device='cuda': cuda -> cpu",
        "scalar float arguments: float32 tensors, as compiled",
    ]
    assert "error" not in {m["verdict"] for m in report["mutants"]}
    assert any(m["by"] == "own-check" for m in report["mutants"])


PRINTS_ONLY = """
import torch
import triton
import triton.language as tl

DEVICE = torch.device("cpu")


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3, mask=mask)


def scale(x):
    out = torch.empty_like(x)
    assert x.device == DEVICE and out.device == DEVICE  # about devices, not the result
    scale_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


if __name__ == "__main__":
    x = torch.rand(100)
    CHECK
"""


@pytest.mark.parametrize(
    ("check", "asserts", "evidence"),
    [
        ("print(torch.max(torch.abs(scale(x) - 3 * x)))", False, "1 kernel launch skipped"),
        ("torch.testing.assert_close(scale(x), 3 * x)", True, "fails when no kernel runs"),
        # a comparison that lets NaN through still sees the (finite) stand-in output
        ("assert not (scale(x) - 3 * x).abs().max() > 1e-5", True, "fails when no kernel runs"),
    ],
)
def test_own_check_is_judged_by_running_it_without_kernels(tmp_path, check, asserts, evidence):
    """Reading the source sees an assert (on devices); running the check with every
    launch skipped and empty outputs NaN shows whether it can see a wrong result."""
    source = PRINTS_ONLY.replace("CHECK", check)
    (tmp_path / "scale.py").write_text(source)
    assert analyse(source).asserts is True
    proc = run_cli(
        "run", "scale.py", "--json", "r.json", "--writer", "none", "--operators", "mask-drop",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    own = json.loads((tmp_path / "r.json").read_text())["own_check"]
    assert own["asserts"] is asserts
    assert evidence in own["evidence"]
    assert (NOTHING_ASSERTED in " ".join(proc.stdout.split())) is not asserts
    assert own["note"] == ("" if asserts else NOTHING_ASSERTED)


AUTOTUNED = """
import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 64})], key=["n"])
@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


def double(x):
    out = torch.empty_like(x)
    double_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out


if __name__ == "__main__":
    x = torch.randn(256)
    torch.testing.assert_close(double(x), x * 2)
"""


@pytest.mark.slow
def test_all_configs_finds_what_the_first_config_hides(tmp_path):
    """With BLOCK=256 one program covers n=256, so dropping the block offset changes
    nothing; with BLOCK=64 four programs all write the first block."""
    (tmp_path / "double.py").write_text(AUTOTUNED)
    base = [
        "run",
        "double.py",
        "--writer",
        "none",
        "--operators",
        "block-offset-drop",
        "--no-cache",
    ]
    first = run_cli(*base, "--json", "first.json", cwd=tmp_path)
    every = run_cli(*base, "--all-configs", "--json", "every.json", cwd=tmp_path)
    assert first.returncode == 0 and every.returncode == 0, first.stderr + every.stderr
    (a,) = json.loads((tmp_path / "first.json").read_text())["mutants"]
    report = json.loads((tmp_path / "every.json").read_text())
    (b,) = report["mutants"]
    assert a["verdict"] == "survived"
    assert (b["verdict"], b["by"]) == ("killed", "own-check")
    assert b["reason"].endswith("(autotune config 2 of 2)")
    assert report["autotune"] == {"configs": 2, "all_configs": True}


@pytest.mark.slow
def test_tutorial_that_sizes_its_grid_from_the_compiled_kernel(tmp_path):
    proc = run_cli(
        "run",
        str(DATA / "tutorial_softmax_warmup.py"),
        "--json",
        "r.json",
        "--writer",
        "none",
        "--operators",
        "boundaries,masks",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    shims = report["baseline"]["shims"]
    for expected in (
        "compiled kernel handle: a stand-in (interpreter)",
        "launch grid given as a list: made a tuple",
        "kernel.asm: no code in the interpreter",
        "driver.active.utils.get_device_properties",
    ):
        assert expected in shims, shims
    assert "error" not in {m["verdict"] for m in report["mutants"]}
    assert report["score"]["killed"] >= 1
