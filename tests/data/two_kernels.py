"""Two kernels and a weak own check: its sizes are whole blocks only.

Dropped masks survive the check (no lane is ever out of bounds), and a test with an
odd size kills them by the bounds check. The report, rerun and --changed-since tests
use it.
"""

import torch
import triton
import triton.language as tl

BLOCK = 128


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, out, x.numel(), BLOCK=BLOCK)
    return out


def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), factor, BLOCK=BLOCK)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.rand(256)
    y = torch.rand(256)
    torch.testing.assert_close(add(x, y), x + y)
    torch.testing.assert_close(scale(x, 3.0), x * 3.0)
    print("two_kernels: ok")
