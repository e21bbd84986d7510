"""Vector addition: the "hello world" of Triton.

Each program instance adds one BLOCK_SIZE-wide chunk of ``x`` and ``y``; the
last chunk is masked so sizes that are not a multiple of BLOCK_SIZE work.
"""

import torch
import triton
import triton.language as tl

DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    output = torch.empty_like(x)
    assert x.device == y.device == output.device
    n_elements = output.numel()
    grid = (triton.cdiv(n_elements, 1024),)
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


if __name__ == "__main__":
    torch.manual_seed(0)
    for size in (4097, 1000):
        x = torch.rand(size, device=DEVICE)
        y = torch.rand(size, device=DEVICE)
        output_triton = add(x, y)
        output_torch = x + y
        torch.testing.assert_close(output_triton, output_torch)
    print("vector_add: ok")
