"""RMS norm over the last dimension: y = x / sqrt(mean(x^2) + eps) * w."""

import torch
import triton
import triton.language as tl

from ..utils import block_for


@triton.jit
def _mean_square(x, n):
    return tl.sum(x * x, axis=0) / n


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, stride, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(_mean_square(x, n) + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    y = x * rstd * w
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    y = torch.empty_like(x2)
    rows, n = x2.shape
    rms_norm_kernel[(rows,)](x2, weight, y, x2.stride(0), n, eps, BLOCK=block_for(n))
    return y.reshape(x.shape)
