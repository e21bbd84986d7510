"""Interpreter parity (engine/harness/parity.py, libdevice.py, shims.py): kernels written
for compiled Triton run in the real interpreter as they would on a GPU: scalar float
arguments are fp32 tensors, libdevice math works, device queries answer, and a launch
that still fails says where. TRITON_INTERPRET must be set before triton is imported,
so the kernels run in a subprocess that prints a JSON report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import run_cli

SCRIPT = textwrap.dedent(
    """
    import json
    import math

    import torch
    import triton
    import triton.language as tl

    from mutant_gate.engine.harness import bounds, libdevice, parity, shims

    bounds.install()
    applied = shims.install()

    from triton.language.extra.libdevice import rsqrt
    from triton.language.extra.cuda import libdevice as cuda_ld
    from triton.language.extra import libdevice as ld

    report = {"applied": applied}

    # -- the issue's minimal case ------------------------------------------------------
    @triton.jit
    def k(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = o < n
        x = tl.load(x_ptr + o, mask=m, other=1.0)
        tl.store(y_ptr + o, rsqrt(x + eps.to(tl.float32)), mask=m)

    x = torch.rand(300) + 0.1
    y = torch.empty_like(x)
    k[(3,)](x, y, 300, 1e-3, BLOCK=128)
    report["minimal_error"] = (y - torch.rsqrt(x + 1e-3)).abs().max().item()

    # -- a scalar float argument is an fp32 tensor: promotion, .dtype, compare ---------
    @triton.jit
    def scalar(x_ptr, y_ptr, flag_ptr, n, eps, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        m = o < n
        x = tl.load(x_ptr + o, mask=m)  # float16
        y = x + eps  # an fp32 scalar tensor promotes the fp16 block, as compiled
        tl.static_assert(y.dtype == tl.float32)
        tl.static_assert(eps.dtype == tl.float32)
        big = eps > 0.5
        tl.store(flag_ptr, big.to(tl.int32))
        tl.store(y_ptr + o, y * (eps * 2.0), mask=m)

    xh = torch.rand(64).half()
    yh = torch.empty(64)
    flag = torch.zeros(1, dtype=torch.int32)
    scalar[(1,)](xh, yh, flag, 64, 0.75, BLOCK=64)
    report["scalar_error"] = (yh - (xh.float() + 0.75) * 1.5).abs().max().item()
    report["scalar_flag"] = int(flag.item())

    # -- libdevice, one kernel per arity ---------------------------------------------
    @triton.jit
    def unary(x_ptr, y_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o, mask=o < n)
        tl.store(y_ptr + o, FN(x), mask=o < n)

    @triton.jit
    def binary(x_ptr, z_ptr, y_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o, mask=o < n)
        z = tl.load(z_ptr + o, mask=o < n)
        tl.store(y_ptr + o, FN(x, z), mask=o < n)

    values = torch.tensor(
        [-3.7, -2.5, -1.5, -0.5, -0.0, 0.0, 0.3, 0.5, 1.5, 2.5, 2.6, 7.0, 1e-3, 30.0,
         float("nan"), float("inf"), -float("inf"), 100.0], dtype=torch.float32)
    positive = values.abs().nan_to_num(nan=2.0, posinf=5.0) + 0.25
    second = torch.linspace(-2.0, 3.0, values.numel())

    def half_away(t):
        return torch.sign(t) * torch.floor(t.abs() + 0.5)

    UNARY = {
        # name: (inputs, torch reference, result dtype)
        "rsqrt": (positive, torch.rsqrt, torch.float32),
        "sqrt": (positive, torch.sqrt, torch.float32),
        "tanh": (values, torch.tanh, torch.float32),
        "erf": (values, torch.erf, torch.float32),
        "exp": (values.clamp(-20, 20), torch.exp, torch.float32),
        "exp2": (values.clamp(-20, 20), torch.exp2, torch.float32),
        "log": (positive, torch.log, torch.float32),
        "log1p": (positive, torch.log1p, torch.float32),
        "fast_expf": (values.clamp(-20, 20), torch.exp, torch.float32),
        "fast_logf": (positive, torch.log, torch.float32),
        "round": (values, half_away, torch.float32),
        "trunc": (values, torch.trunc, torch.float32),
        "floor": (values, torch.floor, torch.float32),
        "ceil": (values, torch.ceil, torch.float32),
        "isnan": (values, lambda t: torch.isnan(t).int(), torch.int32),
        "isinf": (values, lambda t: torch.isinf(t).int(), torch.int32),
        "signbit": (values, lambda t: torch.signbit(t).int(), torch.int32),
        "float2int_rn": (  # CUDA's cvt.rni: half to even, saturated, NaN -> 0
            values, lambda t: torch.round(t.double().nan_to_num(0.0)).clamp(-2**31, 2**31 - 1).int(),
            torch.int32),
    }
    BINARY = {
        "pow": (positive, second, torch.pow),
        "div_rn": (values, second, torch.div),
    }
    results = {}
    for name, (inputs, ref, dtype) in UNARY.items():
        out = torch.empty(inputs.numel(), dtype=dtype)
        unary[(1,)](inputs, out, inputs.numel(), FN=getattr(ld, name), BLOCK=32)
        expected = ref(inputs).to(dtype)
        same = torch.allclose(out.double(), expected.double(), rtol=1e-6, atol=1e-6, equal_nan=True)
        results[name] = same or f"{out.tolist()} != {expected.tolist()}"
    for name, (a, b, ref) in BINARY.items():
        out = torch.empty(a.numel())
        binary[(1,)](a, b, out, a.numel(), FN=getattr(cuda_ld, name), BLOCK=32)
        same = torch.allclose(out.double(), ref(a, b).double(), rtol=1e-6, atol=1e-6, equal_nan=True)
        results[name] = same or f"{out.tolist()} != {ref(a, b).tolist()}"
    report["libdevice"] = results

    # directed rounding: 1/3 rounded down is below rounded up, one ulp apart
    one, three = torch.ones(4), torch.full((4,), 3.0)
    down, up = torch.empty(4), torch.empty(4)
    binary[(1,)](one, three, down, 4, FN=ld.div_rd, BLOCK=4)
    binary[(1,)](one, three, up, 4, FN=ld.div_ru, BLOCK=4)
    report["div_rd_ru"] = [down[0].item(), up[0].item(), torch.nextafter(down[:1], up[:1]).item()]

    # every function of the CUDA module: implemented, or listed as not provided
    report["unaccounted"] = sorted(set(libdevice.missing()) - set(libdevice.NOT_PROVIDED))
    report["smoke_failures"] = []
    report["smoke_ran"] = 0
    import inspect
    for name in sorted(libdevice.IMPLEMENTED):
        real = getattr(cuda_ld, name, None)
        if real is None or len(inspect.signature(real.__wrapped__).parameters) != 2:
            continue  # one argument besides _semantic
        out = torch.empty(positive.numel(), dtype=torch.float64)
        try:
            unary[(1,)](positive, out, positive.numel(), FN=real, BLOCK=32)
            report["smoke_ran"] += 1
        except Exception as exc:
            if not any(t in repr(exc) for t in ("does not match", "Expect one of", "KeyError")):
                report["smoke_failures"].append(f"{name}: {exc!r}")

    # a name only the portable stubs know fails with a line naming it
    stub_only = sorted(n for n in dir(ld) if not n.startswith("_") and not hasattr(cuda_ld, n))
    report["stub_only"] = stub_only
    if stub_only:
        try:
            unary[(1,)](positive, torch.empty(positive.numel()), positive.numel(), FN=getattr(ld, stub_only[0]), BLOCK=32)
        except Exception as exc:
            report["stub_only_error"] = repr(exc)

    # -- bfloat16 arithmetic on values, not on the interpreter's bit patterns -------------
    @triton.jit
    def bf16_ops(a, b, prod, pick, red, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        m = o < n
        x = tl.load(a + o, mask=m, other=0)
        y = tl.load(b + o, mask=m, other=0)
        tl.store(prod + o, x * y, mask=m)
        tl.store(pick + o, tl.where(x < y, x, -y), mask=m)
        tl.store(red, tl.sum(x, axis=0))
        tl.store(red + 1, tl.max(x, axis=0))

    @triton.jit
    def bf16_dot(a, b, c, N: tl.constexpr):
        i = tl.arange(0, N)
        x = tl.load(a + i[:, None] * N + i[None, :])
        y = tl.load(b + i[:, None] * N + i[None, :])
        tl.store(c + i[:, None] * N + i[None, :], tl.dot(x, y))

    torch.manual_seed(0)
    ab, bb = torch.randn(16).bfloat16(), torch.randn(16).bfloat16()
    prod, pick, red = torch.empty_like(ab), torch.empty_like(ab), torch.empty(2, dtype=torch.bfloat16)
    bf16_ops[(1,)](ab, bb, prod, pick, red, 16, BLOCK=16)
    A, B, C = torch.randn(16, 16).bfloat16(), torch.randn(16, 16).bfloat16(), torch.empty(16, 16)
    bf16_dot[(1,)](A, B, C, N=16)
    @triton.jit
    def to_bf16(a, b, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(b + o, tl.load(a + o, mask=o < n).to(tl.bfloat16), mask=o < n)

    wide = torch.randn(512)
    narrow = torch.empty(512, dtype=torch.bfloat16)
    to_bf16[(1,)](wide, narrow, 512, BLOCK=512)
    report["bf16_rounding"] = torch.equal(narrow, wide.bfloat16())  # nearest even, as a GPU
    report["bf16"] = {
        "prod": torch.equal(prod, ab * bb),
        "pick": torch.equal(pick, torch.where(ab < bb, ab, -bb)),
        "sum": (red[0].float() - ab.float().sum()).abs().item(),
        "max": red[1].item() == ab.max().item(),
        "dot": (C - A.float() @ B.float()).abs().max().item(),
    }

    # -- torch's CPU group_norm (the reference a test compares with) as precise as CUDA's ---
    xg = torch.randn(4, 12, 64)
    wg, bg = torch.rand(12), torch.rand(12)
    got = torch.nn.functional.group_norm(xg, 3, wg, bg, 1e-6)
    unshimmed = getattr(torch.nn.functional.group_norm, "__wrapped__", None)
    report["group_norm_exact"] = None  # a CUDA machine: torch's own reference is used
    if unshimmed is not None:
        want = unshimmed(xg.double(), 3, wg.double(), bg.double(), 1e-6)
        report["group_norm_exact"] = torch.equal(got, want.float())

    # -- device queries a library's own device helper makes -------------------------------
    device = "cuda" if torch.cuda.is_available() else "cpu"
    props = getattr(torch, device).get_device_properties(0)
    report["sms"] = props.multi_processor_count
    report["cuda"] = torch.cuda.is_available()
    report["driver_sms"] = triton.runtime.driver.active.utils.get_device_properties(0)["multiprocessor_count"]

    # -- a launch that fails inside the interpreter is recorded with its kernel line -----
    @triton.jit
    def asm(x_ptr, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o, mask=o < n)
        y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
        tl.store(x_ptr + o, y, mask=o < n)

    parity.reset()
    try:
        asm[(1,)](flag, 1, BLOCK=2)
    except Exception as exc:
        report["asm_raised"] = type(exc).__name__
    report["failures"] = parity.failures()
    report["used"] = shims.used()
    print("REPORT" + json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("parity") / "parity_script.py"
    path.write_text(SCRIPT)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT"))
    return json.loads(line[len("REPORT") :])


def test_minimal_case_runs(report):
    assert {"scalar-arguments", "libdevice", "bfloat16-arithmetic"} <= set(report["applied"])
    assert report["minimal_error"] < 1e-6


def test_scalar_float_argument_is_an_fp32_tensor(report):
    assert report["scalar_error"] < 1e-3
    assert report["scalar_flag"] == 1
    assert "scalar float arguments: float32 tensors, as compiled" in report["used"]


def test_libdevice_functions_match_torch(report):
    wrong = {name: why for name, why in report["libdevice"].items() if why is not True}
    assert not wrong
    assert len(report["libdevice"]) == 20


def test_directed_rounding_brackets_the_exact_quotient(report):
    down, up, next_up = report["div_rd_ru"]
    assert down < 1 / 3 < up
    assert next_up == up  # one ulp apart


def test_every_libdevice_function_is_implemented_or_listed(report):
    assert report["unaccounted"] == []
    assert report["smoke_failures"] == []
    assert report["smoke_ran"] > 60
    if report["stub_only"]:  # Triton's stubs list names its CUDA module lacks
        assert "no such function" in report["stub_only_error"]


def test_bfloat16_arithmetic_is_on_values(report):
    bf16 = report["bf16"]
    assert bf16["prod"] and bf16["pick"] and bf16["max"]
    assert bf16["sum"] < 0.02  # one bfloat16 rounding of the float32 sum
    assert bf16["dot"] < 1e-4
    assert report["bf16_rounding"] is True
    assert (
        "bfloat16 arithmetic on values (the interpreter computes on bit patterns)" in report["used"]
    )


def test_group_norm_reference_is_computed_in_float64(report):
    if report["group_norm_exact"] is None:
        pytest.skip("CUDA is available here: the shim leaves torch's CUDA references alone")
    assert report["group_norm_exact"] is True


def test_device_queries_answer_for_the_device_a_library_finds(report):
    if report["cuda"]:
        pytest.skip("a real GPU answers here")
    assert report["sms"] == 108
    assert report["driver_sms"] == 108


def test_interpreter_failure_names_kernel_line(report):
    assert report["asm_raised"] == "InterpreterError"
    (first,) = report["failures"]
    assert first["kernel"] == "asm"
    assert first["exception"].startswith("NotImplementedError")
    assert "inline_asm_elementwise" in first["source"]
    assert first["file"].endswith("parity_script.py")


# -- through the command line -------------------------------------------------------------
MINIMAL = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl
    from triton.language.extra.libdevice import rsqrt


    @triton.jit
    def k(x_ptr, y_ptr, n, eps, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = o < n
        x = tl.load(x_ptr + o, mask=m, other=1.0)
        tl.store(y_ptr + o, rsqrt(x + eps.to(tl.float32)), mask=m)


    def inv_sqrt(x, eps=1e-6):
        y = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), eps, BLOCK=128)
        return y


    def test_inv_sqrt():
        x = torch.rand(1000) + 0.1
        torch.testing.assert_close(inv_sqrt(x), torch.rsqrt(x + 1e-6))
    """
)

ASM = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def ident(x_ptr, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o, mask=o < n)
        y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
        tl.store(x_ptr + o, y + 1, mask=o < n)


    def test_ident():
        x = torch.arange(8, dtype=torch.int32)
        ident[(1,)](x, 8, BLOCK=8)
        assert x.tolist() == list(range(1, 9))
    """
)


@pytest.mark.slow
def test_minimal_case_gets_verdicts(tmp_path):
    (tmp_path / "eps_rsqrt.py").write_text(MINIMAL)
    proc = run_cli(
        "run", "eps_rsqrt.py", "--json", "r.json", "--mode", "interpret", "--writer", "none", "-j", "2", "-q",
        "--cache-dir", str(tmp_path / "c"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    verdicts = {m["verdict"] for m in report["mutants"]}
    assert "killed" in verdicts and "pending" not in verdicts
    shims = report["baseline"]["shims"]
    assert "scalar float arguments: float32 tensors, as compiled" in shims
    assert "libdevice.rsqrt: numpy implementation (interpreter)" in shims


@pytest.mark.slow
def test_interpreter_failure_is_one_line_with_the_way_on(tmp_path):
    (tmp_path / "asm_kernel.py").write_text(ASM)
    proc = run_cli(
        "run", "asm_kernel.py", "--mode", "interpret", "--writer", "none", "-j", "1", "-q",
        "--cache-dir", str(tmp_path / "c"), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "fails inside Triton's interpreter" in line
    assert "NotImplementedError: inline_asm not supported in interpreter mode" in line
    assert "kernel ident at asm_kernel.py:11" in line  # the dedented text starts with a newline
    assert "inline_asm_elementwise" in line
    assert "--mode compiled" in line
    assert "(in test_ident)" in line


def test_the_docs_list_what_the_interpreter_provides():
    import re
    from pathlib import Path

    from mutant_gate.engine.harness import libdevice

    doc = (Path(__file__).resolve().parent.parent / "docs" / "interpreter-parity.md").read_text()
    block = doc.split("Provided (", 1)[1].split("```", 2)[1]
    assert sorted(block.split()) == sorted(libdevice.IMPLEMENTED)
    not_provided = doc.split("Not provided", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`(\w+)`", not_provided)) >= set(libdevice.NOT_PROVIDED)
