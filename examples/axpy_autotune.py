"""AXPY (out = alpha * x + y) with an autotuned block size.

``@triton.autotune`` benchmarks each config the first time it sees a new
``n_elements`` and caches the fastest; the grid is a lambda so it can read the
chosen BLOCK_SIZE.
"""

import time

import torch
import triton
import triton.language as tl

DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _wall_clock_bench(kernel_call, quantiles):
    # Triton's default benchmarker needs a GPU driver; on a CPU-only host
    # (TRITON_INTERPRET=1) just time one call with the wall clock.
    start = time.perf_counter()
    kernel_call()
    ms = (time.perf_counter() - start) * 1e3
    return [ms for _ in quantiles]


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 128}),
        triton.Config({"BLOCK_SIZE": 256}),
    ],
    key=["n_elements"],
    do_bench=None if torch.cuda.is_available() else _wall_clock_bench,
)
@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    out = alpha * x + y
    tl.store(out_ptr + offsets, out, mask=mask)


def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = out.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    axpy_kernel[grid](x, y, out, alpha, n_elements)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    for size in (1000, 3333):
        x = torch.randn(size, device=DEVICE)
        y = torch.randn(size, device=DEVICE)
        out = axpy(2.5, x, y)
        torch.testing.assert_close(out, 2.5 * x + y)
    print("axpy_autotune: ok")
