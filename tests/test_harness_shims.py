"""GPU-query shims (engine/harness/shims.py): a tutorial-style file runs on CPU
in the real Triton interpreter.  TRITON_INTERPRET must be set before triton is
imported, so the file runs in a subprocess that prints a JSON report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

TUTORIAL = textwrap.dedent(
    """
    import json

    import torch
    import triton
    import triton.language as tl

    from mutant_gate.engine.harness import shims

    try:
        triton.runtime.driver.active
        driver_before = True
    except RuntimeError:
        driver_before = False

    applied = shims.install()
    again = shims.install()
    unused_yet = shims.used()

    # --- tutorial-style module body ---
    DEVICE = triton.runtime.driver.active.get_active_torch_device()
    properties = triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)
    NUM_SM = properties["multiprocessor_count"]
    NUM_REGS = properties["max_num_regs"]
    SIZE_SMEM = properties["max_shared_mem"]
    WARP_SIZE = properties["warpSize"]
    target = triton.runtime.driver.active.get_current_target()
    capability = torch.cuda.get_device_capability()


    CONFIGS = [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})]


    @triton.autotune(configs=CONFIGS, key=["n"])
    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + y, mask=mask)


    x = torch.rand(1000, device=DEVICE)
    y = torch.rand(1000, device=DEVICE)
    out = torch.empty_like(x)
    add_kernel[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, y, out, 1000)

    def layer_norm_bias_grad_error():
        # torch's CPU layer_norm backward in float16 drifts from the exact sum of dy.
        torch.manual_seed(0)
        x = (-2.3 + 0.5 * torch.randn(512, 1024)).half().requires_grad_()
        w = torch.rand(1024).half().requires_grad_()
        b = torch.rand(1024).half().requires_grad_()
        dy = (0.1 * torch.randn(512, 1024)).half()
        torch.nn.functional.layer_norm(x, (1024,), w, b, 1e-5).backward(dy)
        return (b.grad.double() - dy.double().sum(0)).abs().max().item()

    report = {
        "driver_before": driver_before,
        "applied": applied,
        "again": again,
        "unused_yet": unused_yet,
        "device": str(DEVICE),
        "props": [NUM_SM, NUM_REGS, SIZE_SMEM, WARP_SIZE],
        "target": [target.backend, target.arch, target.warp_size],
        "capability": list(capability),
        "ok": bool(torch.allclose(out, x + y)),
        "used": shims.used(),
    }
    report["ln_error_shimmed"] = layer_norm_bias_grad_error()
    shims.uninstall()
    report["ln_error_plain"] = layer_norm_bias_grad_error()
    try:
        triton.runtime.driver.active
        report["driver_after_uninstall"] = True
    except RuntimeError:
        report["driver_after_uninstall"] = False
    print("JSON" + json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    d = tmp_path_factory.mktemp("shims")
    (d / "tutorial.py").write_text(TUTORIAL)
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "tutorial.py"], cwd=d, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("JSON"))
    return json.loads(line[4:])


def test_tutorial_style_file_runs_on_cpu(report):
    if report["driver_before"]:
        pytest.skip("a real GPU driver is active here; the shims leave it alone")
    assert report["applied"] == [
        "driver.active",
        "torch.cuda.get_device_capability",
        "triton.autotune",
        "compiled-kernel-stand-ins",
        "scalar-arguments",
        "libdevice",
        "bfloat16-arithmetic",
        "cuda-as-cpu",
        "no-benchmarks",
    ]
    assert report["again"] == report["applied"]  # idempotent
    assert report["device"] == "cpu"
    assert report["props"] == [108, 65536, 166912, 32]
    assert report["target"] == ["cuda", 80, 32]
    assert report["capability"] == [8, 0]
    assert report["ok"] is True


def test_used_names_the_queries_the_file_called(report):
    if report["driver_before"]:
        pytest.skip("a real GPU driver is active here; the shims leave it alone")
    assert report["unused_yet"] == []
    assert report["used"] == [
        "driver.active.get_active_torch_device",
        "driver.active.utils.get_device_properties",
        "driver.active.get_current_target",
        "torch.cuda.get_device_capability",
        # Autotune never times configs on a CPU: the first one wins, named.
        "triton.autotune: first config (BLOCK: 128, num_warps: 4, num_ctas: 1, num_stages: 3,"
        " maxnreg: None, ir_override: None)",
    ]


def test_half_layer_norm_runs_in_float32_as_on_cuda(report):
    if report["driver_before"]:
        pytest.skip("a real GPU driver is active here; the shims leave it alone")
    # The bias gradient is the column sum of dy: float32 accumulation keeps it within
    # float16 rounding of the exact sum; torch's CPU float16 backward is 10x further off.
    assert report["ln_error_shimmed"] < 0.004
    assert report["ln_error_plain"] > 3 * report["ln_error_shimmed"]


def test_uninstall_restores_the_failing_driver(report):
    if report["driver_before"]:
        pytest.skip("a real GPU driver is active here; the shims leave it alone")
    assert report["driver_after_uninstall"] is False


def test_a_jobs_many_failure_messages_are_fitted_into_its_answer():
    """Hundreds of failing cases of 5 KB of traceback each (a real library's original on a
    CPU) fit the answer: the first failure keeps its whole tail, the others their last lines,
    every case still there with its status."""
    from mutant_gate.engine.harness.runner import MESSAGES_BYTES, TAIL_CHARS, _fitted, tail
    from mutant_gate.engine.job import CheckOutcome

    few = [
        CheckOutcome(f"t::c{i}", "failed", 0.1, tail("a" * 5000 + f"\nE case {i}"))
        for i in range(3)
    ]
    assert _fitted(few) == tuple(few)  # under the budget: untouched
    many = [CheckOutcome("t::ok", "passed", 0.1)] + [
        CheckOutcome(f"t::c{i}", "failed", 0.1, tail("a" * 5000 + f"\nE case {i}"))
        for i in range(400)
    ]
    fitted = _fitted(many)
    assert [(o.name, o.status) for o in fitted] == [(o.name, o.status) for o in many]
    assert fitted[1] == many[1] and len(fitted[1].message) > TAIL_CHARS  # the first failure
    assert sum(len(o.message) for o in fitted) <= MESSAGES_BYTES + TAIL_CHARS + 400 * 3
    assert all(o.message.endswith(f"E case {i}") for i, o in enumerate(fitted[1:]))
