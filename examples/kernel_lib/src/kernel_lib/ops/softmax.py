"""Row-wise softmax over the last dimension, one program per row."""

import torch
import triton
import triton.language as tl

from ..utils import block_for


@triton.jit
def softmax_kernel(x_ptr, y_ptr, stride, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


def softmax_forward(x: torch.Tensor) -> torch.Tensor:
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    y = torch.empty_like(x2)
    rows, n = x2.shape
    softmax_kernel[(rows,)](x2, y, x2.stride(0), n, BLOCK=block_for(n))
    return y.reshape(x.shape)
