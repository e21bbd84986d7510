"""The batched executor's chunk size (programs times the elements one program touches), side by
side in one run: which ``MUTANT_GATE_BATCH_ELEMENTS`` runs wide-row kernels fastest.

Run: ``TRITON_INTERPRET=1 python benchmarks/chunk_size.py [--repeat 3]
[--sizes 4194304,1048576,524288,131072]``.

A real library's rows are wide (a vocabulary of 1271 to 32000, a hidden size of 4096): a
program's block is thousands of lanes, and a launch is bound by numpy's work on its elements,
not by the per-program overhead Triton's loop pays. A chunk of millions of elements makes
every intermediate array tens of megabytes, out of the caches; a smaller chunk keeps them in.
Cases (each launch checked bit for bit against the first size's):

- ``rows_loop``: a row kernel looping over 2048-lane column blocks, 2000 rows of 1271 columns
  (a divergence loss's shape);
- ``wide_elementwise``: one program a row, 8192 lanes, 369 rows (a gated MLP's activation);
- ``layer_norm``: examples/layer_norm.py, 4096 rows of 1024.

Each size's time is the median of ``--repeat`` rounds, the sizes interleaved within a round.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if os.environ.get("TRITON_INTERPRET") != "1":
    sys.exit("chunk_size: set TRITON_INTERPRET=1 (Triton reads it at import)")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(ROOT / "examples"))
from layer_norm import _layer_norm_fwd_fused  # noqa: E402

from mutant_gate.engine.harness import batched, shims  # noqa: E402


@triton.jit
def rows_loop(X, Y, Out, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    acc = 0.0
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(X + pid * n_cols + offs, mask=mask, other=float("-inf"))
        y = tl.load(Y + pid * n_cols + offs, mask=mask, other=float("-inf"))
        m = 0.5 * (tl.exp(x) + tl.exp(y))
        term = tl.exp(y) * y + tl.exp(x) * x - 2.0 * m * tl.log(m)
        acc += tl.sum(tl.where(mask, term, 0.0), axis=0)
        tl.store(Out + pid * n_cols + offs, 0.5 * tl.exp(x) * (x - tl.log(m)), mask=mask)
    tl.store(Y + pid * n_cols, acc)


@triton.jit
def wide_elementwise(A, B, C, n_cols, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    a = tl.load(A + pid * n_cols + offs, mask=mask, other=0.0)
    b = tl.load(B + pid * n_cols + offs, mask=mask, other=0.0)
    t = 0.7978845608028654 * (a + 0.044715 * a * a * a)
    e = tl.exp(-2.0 * tl.abs(t))
    th = tl.where(t >= 0, (1.0 - e) / (1.0 + e), (e - 1.0) / (1.0 + e))
    tl.store(C + pid * n_cols + offs, 0.5 * a * (1.0 + th) * b, mask=mask)


def cases() -> dict:
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(2000, 1271, generator=g), torch.randn(2000, 1271, generator=g)
    a, b = torch.randn(369, 4231, generator=g), torch.randn(369, 4231, generator=g)
    xl, w, bl = torch.randn(4096, 1024, generator=g), torch.rand(1024), torch.rand(1024)

    def loop():
        yy, out = y.clone(), torch.empty_like(x)
        rows_loop[(2000,)](x, yy, out, 1271, BLOCK=2048)
        return torch.cat([yy.flatten(), out.flatten()])

    def wide():
        c = torch.empty_like(a)
        wide_elementwise[(369,)](a, b, c, 4231, BLOCK=8192)
        return c

    def norm():
        out, mean, rstd = torch.empty_like(xl), torch.empty(4096), torch.empty(4096)
        _layer_norm_fwd_fused[(4096,)](
            xl, out, w, bl, mean, rstd, xl.stride(0), 1024, 1e-5, BLOCK_SIZE=1024
        )
        return torch.cat([out.flatten(), mean, rstd])

    return {"rows_loop": loop, "wide_elementwise": wide, "layer_norm": norm}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="4194304,1048576,524288,131072")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    shims.install()
    batched.install("batched")
    print(f"# Triton {triton.__version__}, torch {torch.__version__}, {os.cpu_count()} cores")
    print("| case | " + " | ".join(f"{s} elements s" for s in sizes) + " | best | same bits |")
    print("|---|" + "---|" * (len(sizes) + 2))
    for name, case in cases().items():
        times: dict[int, list[float]] = {s: [] for s in sizes}
        outs: dict[int, torch.Tensor] = {}
        for _ in range(args.repeat):
            for s in sizes:
                os.environ["MUTANT_GATE_BATCH_ELEMENTS"] = str(s)
                batched.clear()
                start = time.perf_counter()
                outs[s] = case()
                times[s].append(time.perf_counter() - start)
                assert all(x["executor"] == "batched" for x in batched.launches()), name
        med = {s: statistics.median(v) for s, v in times.items()}
        same = all(torch.equal(outs[s], outs[sizes[0]]) for s in sizes)
        best = min(med, key=med.get)
        cells = " | ".join(f"{med[s]:.3f}" for s in sizes)
        print(f"| {name} | {cells} | {best} | {'yes' if same else 'NO'} |")


if __name__ == "__main__":
    main()
