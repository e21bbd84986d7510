"""The tool's whole original run of a check, every harness check on, against Triton's
interpreter running the same check plainly (issue 45's second done-when).

Run: ``python benchmarks/harness_speed.py [--rows 2048] [--repeat 3] [--against DIR]``.

The check: examples/layer_norm.py's kernel on a (rows, 1024) input, one program a row,
against torch. Each figure comes from a fresh process, imports left out (torch, triton, and
the modules a check loads lazily that the tool's warm runner loads before any job):

- ``plain``: the check under Triton's interpreter, untouched (``runpy``);
- ``tool triton`` / ``tool batched``: the sandbox side of the original's baseline job
  (``harness/runner.run_checks``: bounds checks, poisoned masked lanes, the race hint, the
  line trace, the shims), with ``interpreter`` "triton" (Triton's loop) or "batched";
- ``oracle batched``: the same run with the diff-oracle's value trace on top (lane digests
  and every launch's arguments handed to a sink);
- ``against-tool`` (with ``--against DIR``, an install of another version of the tool, e.g.
  ``pip install --no-deps --target DIR`` of an older commit): ``tool batched`` with DIR first
  on the path, in the same rounds, so two versions are compared side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHECK = """
import torch
import triton
import triton.language as tl

{kernel}

if __name__ == "__main__":
    torch.manual_seed(0)
    rows, n = {rows}, 1024
    x, w, b = torch.randn(rows, n), torch.rand(n), torch.rand(n)
    y, mean, rstd = torch.empty_like(x), torch.empty(rows), torch.empty(rows)
    _layer_norm_fwd_fused[(rows,)](x, y, w, b, mean, rstd, x.stride(0), n, 1e-5, BLOCK_SIZE=1024)
    ref = torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5)
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)
"""

CHILD = r"""
import json, os, sys, time
import torch, triton  # imports left out of the figure
# and the modules a check loads lazily on first use (torch.testing.assert_close pulls in
# torch.distributed.tensor): the tool's warm runner loads them once before any job
import importlib
from mutant_gate.engine.harness import worker
# an older version's list (--against) where it had none of its own
LAZY = ("torch.distributed.tensor", "torch.testing._comparison", "numpy.random")
for name in getattr(worker, "LAZY_MODULES", LAZY):
    importlib.import_module(name)
how, path = sys.argv[1], sys.argv[2]
if how == "plain":
    import runpy
    start = time.perf_counter()
    runpy.run_path(path, run_name="__main__")
    print("SECONDS", time.perf_counter() - start)
    sys.exit(0)
from mutant_gate.engine.harness import batched, runner, trace
from mutant_gate.engine.job import Check, CheckKind, Job
source = open(path).read()
mode, oracle = how.split("-")
job = Job(files=(("kernel.py", source),), checks=(Check(CheckKind.MAIN, "kernel.py", "own"),),
          trace_races=True, trace_lines=True, interpreter=mode)
work = os.path.join(os.path.dirname(path), how)
os.makedirs(work, exist_ok=True)
os.chdir(work)
runner.prepare()
if oracle == "oracle":
    trace.start("values", sink=lambda header, tensors: [trace.snapshot(t) for _, t in tensors])
start = time.perf_counter()
result = runner.run_checks(job, work)
seconds = time.perf_counter() - start
assert result.status.value == "passed", result.error
print("SECONDS", seconds)
print("INTERPRETER", json.dumps(result.extra.get("interpreter")))
"""


def kernel_source() -> str:
    text = (ROOT / "examples" / "layer_norm.py").read_text()
    start = text.index("@triton.jit")
    end = text.index("\n\n\n", start)
    return text[start:end]


def measure(how: str, path: Path, against: str | None = None) -> tuple[float, str]:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    if how == "against-tool":
        how = "batched-tool"
        env["PYTHONPATH"] = os.pathsep.join([against or "", env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, how, str(path)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        sys.exit(f"harness_speed: {how} failed:\n{proc.stderr[-2000:]}")
    lines = dict(ln.split(" ", 1) for ln in proc.stdout.splitlines() if " " in ln)
    return float(lines["SECONDS"]), lines.get("INTERPRETER", "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", help="another install of the tool, timed beside this one")
    args = parser.parse_args()
    if args.against and not (Path(args.against) / "mutant_gate").is_dir():
        sys.exit(f"harness_speed: --against {args.against}: no mutant_gate package there")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "check.py"
        path.write_text(CHECK.format(kernel=kernel_source(), rows=args.rows))
        hows = ("plain", "triton-tool", "batched-tool", "batched-oracle")
        hows += ("against-tool",) if args.against else ()
        times: dict[str, list[float]] = {h: [] for h in hows}
        said = {}
        for _ in range(args.repeat):
            for how in hows:
                seconds, interp = measure(how, path, args.against)
                times[how].append(seconds)
                said[how] = interp
    plain = statistics.median(times["plain"])
    print(f"# layer norm, {args.rows} programs, medians of {args.repeat} (imports left out)")
    print("| run | s | plain / run |")
    print("|---|---|---|")
    for how in hows:
        s = statistics.median(times[how])
        print(f"| {how} | {s:.3f} | {plain / s:.1f}x |")
    for how in hows[1:]:
        print(f"{how}: {json.loads(said[how]) if said[how] else None}")


if __name__ == "__main__":
    main()
