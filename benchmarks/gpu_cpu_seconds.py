"""Does a compiled job's CPU time follow its kernels' GPU time? (GPU; the device tool)

Run: ``python benchmarks/gpu_cpu_seconds.py [SECONDS ...]``.

A mutant's limit counts the CPU seconds of its job's processes (issue 48). On a GPU a
mutant that hangs spins inside a kernel, and the host thread waits for it in
``torch.cuda.synchronize``: if that wait costs CPU time (CUDA's default schedule spins or
yields while the device is busy), the CPU rule also bounds GPU time; if it sleeps, a hung
kernel would run to the wall-clock backstop. This launches one kernel that loops for about
each given number of seconds (default 1, 4), then prints per launch: the GPU time (CUDA
events), the wall time of launch and wait, and the process's CPU time over it, with the
ratio CPU / GPU.
"""

from __future__ import annotations

import sys
import time

import torch
import triton
import triton.language as tl


@triton.jit
def spin(out, n, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(n):
        acc = acc * 0.999 + i
    tl.store(out + tl.arange(0, BLOCK), acc)


def launch(out: torch.Tensor, n: int) -> tuple[float, float, float]:
    """(GPU s, wall s, CPU s) of one launch of ``spin`` and its wait."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    wall, cpu = time.perf_counter(), time.process_time()
    start.record()
    spin[(1,)](out, n, BLOCK=128)
    end.record()
    torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return start.elapsed_time(end) / 1000, wall, cpu


def main() -> None:
    targets = [float(a) for a in sys.argv[1:]] or [1.0, 4.0]
    out = torch.empty(128, device="cuda")
    gpu, _, _ = launch(out, 10**6)  # compiles, then a measured rate
    gpu, _, _ = launch(out, 10**6)
    per_iter = gpu / 10**6
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    print("| asked s | GPU s | wall s | CPU s | CPU / GPU |")
    print("|---|---|---|---|---|")
    for seconds in targets:
        g, w, c = launch(out, int(seconds / per_iter))
        print(f"| {seconds:g} | {g:.2f} | {w:.2f} | {c:.2f} | {c / g:.2f} |")


if __name__ == "__main__":
    main()
