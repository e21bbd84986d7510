"""Triton's interpreter loop against the batched executor, per launch, side by side in one run.

Run: ``TRITON_INTERPRET=1 python benchmarks/interpreter_speed.py [--programs 64,512,4096]
[--repeat N] [--cases layer_norm,softmax,vector_add,wide_rows]``.

For each case and program count, one process times the same launch four ways, interleaved
round by round, each round starting with the next way (machines here are noisy: read the
ratios), and checks the outputs bit for bit:

- ``stock``: Triton's interpreter untouched (``batched.uninstall()``);
- ``triton``: Triton's loop with its language patched once per launch
  (``MUTANT_GATE_INTERPRETER=triton``);
- ``batched``: every program at once (``MUTANT_GATE_INTERPRETER=batched``), with the executor
  each launch had and any fallback's reason counted;
- ``old memory``: batched, with every load and store by Triton's ``_native.load`` /
  ``_native.store`` instead of numpy where it can (``batched_memory.numpy_gather`` and
  ``numpy_scatter``) and every chunk's proof by the exact maps instead of the written
  ranges first (``batched_memory._apart``): the last column is those gains.

Cases: ``layer_norm`` (examples/layer_norm.py, N = 1024 columns, BLOCK_SIZE 1024: one program a
row), ``softmax`` (a row softmax, one program a row, two loops over 256-column blocks, N = 1024),
``vector_add`` (examples/vector_add.py, 1024 elements a program), ``wide_rows`` (an elementwise
loss over a 32,000-column row a program in two 16,384-lane blocks, as a vocabulary's losses
are: every lane stored). The median of ``--repeat``
rounds (default 3; a stock figure over 20 s is taken once).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SLOW_ONCE_S = 20.0

if os.environ.get("TRITON_INTERPRET") != "1":
    sys.exit("interpreter_speed: set TRITON_INTERPRET=1 (Triton reads it at import)")

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(ROOT / "examples"))
import layer_norm  # noqa: E402
import vector_add  # noqa: E402

from mutant_gate.engine.harness import batched, batched_memory  # noqa: E402

GATHER_MIN = batched_memory.GATHER_MIN
QUICK_PROOF = batched_memory._apart


@triton.jit
def row_softmax(X, Y, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for off in range(0, n_cols, BLOCK):
        m = tl.maximum(m, tl.load(X + row * n_cols + off + cols, mask=off + cols < n_cols,
                                  other=-float("inf")))  # fmt: skip
    top = tl.max(m, axis=0)
    acc = tl.zeros([BLOCK], tl.float32)
    for off in range(0, n_cols, BLOCK):
        x = tl.load(X + row * n_cols + off + cols, mask=off + cols < n_cols, other=-float("inf"))
        acc += tl.exp(x - top)
    total = tl.sum(acc, axis=0)
    for off in range(0, n_cols, BLOCK):
        x = tl.load(X + row * n_cols + off + cols, mask=off + cols < n_cols, other=-float("inf"))
        tl.store(Y + row * n_cols + off + cols, tl.exp(x - top) / total, mask=off + cols < n_cols)


@triton.jit
def row_loss(P, Q, Out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    for off in range(0, n_cols, BLOCK):
        keep = off + cols < n_cols
        p = tl.load(P + row * n_cols + off + cols, mask=keep, other=0.0)
        q = tl.load(Q + row * n_cols + off + cols, mask=keep, other=1.0)
        tl.store(Out + row * n_cols + off + cols, q * (tl.log(q) - p), mask=keep)


def make_case(name: str, programs: int):
    g = torch.Generator().manual_seed(0)
    if name == "layer_norm":
        x = torch.randn(programs, 1024, generator=g)
        w, b = torch.rand(1024, generator=g), torch.rand(1024, generator=g)
        return lambda: layer_norm.layer_norm(x, (1024,), w, b, BLOCK_SIZE=1024)
    if name == "softmax":
        x = torch.randn(programs, 1024, generator=g)

        def softmax():
            y = torch.empty_like(x)
            row_softmax[(programs,)](x, y, 1024, BLOCK=256)
            return y

        return softmax
    if name == "vector_add":
        x, y = torch.rand(programs * 1024, generator=g), torch.rand(programs * 1024, generator=g)
        return lambda: vector_add.add(x, y)
    if name == "wide_rows":
        p = torch.randn(programs, 32000, generator=g)
        q = torch.rand(programs, 32000, generator=g) + 0.01

        def wide():
            out = torch.empty_like(p)
            row_loss[(programs,)](p, q, out, 32000, BLOCK=16384)
            return out

        return wide
    sys.exit(
        f"interpreter_speed: unknown case {name!r} (layer_norm, softmax, vector_add, wide_rows)"
    )


def timed(mode: str, fn) -> tuple[float, torch.Tensor]:
    if mode == "stock":
        batched.uninstall()
    else:
        batched.install("batched" if mode == "old memory" else mode)
    old = mode == "old memory"
    batched_memory.GATHER_MIN = 1 << 62 if old else GATHER_MIN
    batched_memory._apart = (lambda reads, writes: False) if old else QUICK_PROOF
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def bench(name: str, programs: int, repeat: int) -> dict:
    fn = make_case(name, programs)
    times: dict[str, list[float]] = {"stock": [], "triton": [], "batched": [], "old memory": []}
    outs: dict[str, torch.Tensor] = {}
    batched.clear()
    modes = list(times)
    for round_ in range(repeat):  # each round starts one mode later: no mode always first
        for mode in modes[round_ % len(modes) :] + modes[: round_ % len(modes)]:
            if mode == "stock" and times["stock"] and times["stock"][0] > SLOW_ONCE_S:
                continue
            seconds, outs[mode] = timed(mode, fn)
            times[mode].append(seconds)
    records = [r for r in batched.launches() if r["executor"] == "batched" or r["reason"]]
    fallbacks = [
        r for r in records if r["executor"] == "triton" and r["reason"] != "interpreter=triton"
    ]
    med = {m: statistics.median(t) for m, t in times.items()}
    return {
        "case": name,
        "programs": programs,
        **med,
        "equal": all(torch.equal(outs["stock"], o) for o in outs.values()),
        "fallbacks": len(fallbacks),
        "reasons": sorted({r["reason"] for r in fallbacks}),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default="64,512,4096")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="layer_norm,softmax,vector_add")
    a = ap.parse_args()
    try:
        sizes = [int(s) for s in a.programs.split(",") if s.strip()]
    except ValueError:
        sys.exit(f"interpreter_speed: --programs wants integers, got {a.programs!r}")
    if a.repeat < 1 or not sizes or min(sizes) < 1:
        sys.exit("interpreter_speed: --repeat and --programs must be at least 1")
    print(f"# Triton {triton.__version__}, torch {torch.__version__}, {os.cpu_count()} cores")
    head = "| case | programs | stock s | triton (patched once) s | batched s "
    print(
        head + "| stock/triton | stock/batched | bit-identical | fallbacks | old memory/batched |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in [c.strip() for c in a.cases.split(",") if c.strip()]:
        for n in sizes:
            r = bench(name, n, a.repeat)
            why = f" ({'; '.join(r['reasons'])})" if r["reasons"] else ""
            print(
                f"| {name} | {n} | {r['stock']:.3f} | {r['triton']:.3f} | {r['batched']:.4f} "
                f"| {r['stock'] / r['triton']:.2f}x | {r['stock'] / r['batched']:.1f}x "
                f"| {'yes' if r['equal'] else 'NO'} | {r['fallbacks']}{why} "
                f"| {r['old memory'] / r['batched']:.2f}x |",
                flush=True,
            )


if __name__ == "__main__":
    main()
