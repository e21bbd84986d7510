"""RMS norm and a tanh GELU written the way kernel libraries write them.

Four habits of real libraries that Triton's interpreter does not follow on its own,
so this file is mutant-gate's check that its interpreter-parity shims do:

* ``rsqrt`` and ``tanh`` come from ``triton.language.extra.libdevice`` (CUDA's math
  library; the interpreter has no implementation of its own);
* ``eps`` is an ordinary float argument pinned to fp32 inside the kernel
  (``eps.to(tl.float32)``): compiled, a float argument is an fp32 scalar tensor;
* the normalised row is multiplied by the weight in the weight's dtype, bfloat16
  included (the interpreter alone computes on bfloat16 bit patterns);
* the launch is sized by the SM count that the library's own device helper asks for
  (``getattr(torch, device).get_device_properties(0)``), whatever device it found.

On a GPU it runs as it is; on a CPU, mutant-gate runs it in the interpreter.
"""

import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import rsqrt, tanh

DEVICE = triton.runtime.driver.active.get_active_torch_device()


def infer_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def sm_count() -> int:
    return getattr(torch, infer_device()).get_device_properties(0).multi_processor_count


@triton.jit
def _rms_norm_fwd(X, W, Y, RSTD, stride, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(W + cols, mask=mask, other=0.0)
    var = tl.sum(x * x, axis=0) / n_cols
    rstd = rsqrt(var + eps.to(tl.float32))
    tl.store(RSTD + row, rstd)
    y = (x * rstd).to(w.dtype) * w  # in the weight's dtype (bfloat16 too), as libraries do
    tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _gelu_tanh(X, Y, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for start in tl.range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        y = 0.5 * x * (1.0 + tanh(inner))
        tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    rows, cols = x.shape
    y = torch.empty_like(x)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(cols)
    _rms_norm_fwd[(rows,)](x, weight, y, rstd, x.stride(0), cols, eps, BLOCK=block)
    return y, rstd


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    n = x.numel()
    block = 256
    grid = (min(sm_count(), triton.cdiv(n, block)),)
    _gelu_tanh[grid](x, y, n, BLOCK=block)
    return y


def test_rms_norm():
    torch.manual_seed(0)
    cases = ((7, 100, torch.float32), (5, 64, torch.float16), (6, 80, torch.bfloat16))
    for rows, cols, dtype in cases:
        x = torch.randn(rows, cols, device=DEVICE, dtype=dtype)
        w = torch.rand(cols, device=DEVICE, dtype=dtype) + 0.5
        y, rstd = rms_norm(x, w, eps=1e-3)
        xf = x.float()
        ref_rstd = torch.rsqrt(xf.pow(2).mean(-1) + 1e-3)
        torch.testing.assert_close(rstd, ref_rstd, rtol=1e-5, atol=1e-5)
        ref = (xf * ref_rstd[:, None]).to(dtype) * w
        tol = 1.6e-2 if dtype == torch.bfloat16 else 2e-3  # a bfloat16 ulp is 2**-8
        torch.testing.assert_close(y, ref, rtol=tol, atol=tol)


def test_gelu_tanh():
    torch.manual_seed(0)
    x = 3 * torch.randn(40_000, device=DEVICE)
    ref = torch.nn.functional.gelu(x, approximate="tanh")
    torch.testing.assert_close(gelu_tanh(x), ref, rtol=1e-5, atol=1e-5)
