"""Compiled-mode throughput, side by side in one run: the warm runners sharing one Triton
cache (cold, then again warm as a second command on the machine finds it), the warm
runners each with its own cache, a forked child per job (a context, driver build and
cold Triton cache each), and the interpreter, on the same mutant jobs at the same
parallelism. The shared cache is emptied before its first row.

Run on a CUDA machine from the repo root: ``python benchmarks/compiled.py [-j N]
[--sample K] [FILES...]`` (default: every example). For each pool it prints the fixed
cost (the pool's start: imports, and for the warm runner its context), mutants/s over
the jobs, and the per-mutant job time (median and mean, as the worker measured it),
then the ratios. Only ratios measured in one run mean much on a shared machine.
Verdict statuses are printed too: the three pools must agree except where the
interpreter cannot run a file (Triton 3.6's interpreter fails on some).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from mutant_gate.engine.harness.isolation import shared_triton_cache
from mutant_gate.engine.job import Job
from mutant_gate.engine.kernel_file import load_kernel_file
from mutant_gate.engine.mutate import generate_mutants
from mutant_gate.engine.sandbox.local import LocalSandbox

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))
POOLS = (  # label, mode, warm runner, shared Triton cache
    ("warm, shared cache, cold", "compiled", True, True),
    ("warm, shared cache, again", "compiled", True, True),
    ("warm, cache per runner", "compiled", True, False),
    ("compiled, fork per job", "compiled", False, False),
    ("interpreter", "interpret", False, False),
)


def mutant_jobs(paths: list[Path], mode: str, every: int) -> list[Job]:
    jobs = []
    for path in paths:
        kernel = load_kernel_file(str(path))
        for mutant in generate_mutants(kernel.source, kernel.path)[::every]:
            jobs.append(
                Job(
                    files=kernel.files(mutant.source), checks=kernel.checks, mode=mode, timeout_s=60
                )
            )
    return jobs


def measure(
    label: str, mode: str, warm: bool, shared: bool, paths: list[Path], workers: int, every: int
):
    jobs = mutant_jobs(paths, mode, every)
    start = time.perf_counter()
    with LocalSandbox(workers, mode, warm=warm, shared_cache=shared) as box:
        box.start()  # returns with the first ready worker: the rest start as jobs run
        started = time.perf_counter()
        results = [r for _, r in box.run_many(jobs)]
        ran = time.perf_counter() - started
    fixed = started - start
    times = [r.duration_s for r in results]
    row = {
        "label": label,
        "jobs": len(jobs),
        "fixed_s": fixed,
        "jobs_s": ran,
        "per_s": len(jobs) / ran,
        "median_job_s": statistics.median(times),
        "mean_job_s": statistics.fmean(times),
        "statuses": Counter(r.status.value for r in results),
    }
    print(
        f"  {label:<24} start {fixed:5.1f} s   {row['per_s']:6.2f} mutants/s over "
        f"{len(jobs)} jobs ({ran:.1f} s)   job median {row['median_job_s']:.3f} s, "
        f"mean {row['mean_job_s']:.3f} s   {dict(row['statuses'])}",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sample", type=int, default=1, help="every Nth mutant of each file")
    parser.add_argument("files", nargs="*", type=Path)
    args = parser.parse_args()
    paths = args.files or EXAMPLES
    print(
        f"{len(paths)} files, -j {args.j}, every {args.sample}th mutant; python {sys.version.split()[0]}"
    )
    shared_dir, _ = shared_triton_cache()
    if shared_dir:
        print(f"emptying the shared Triton cache {shared_dir}")
        for name in os.listdir(shared_dir):
            shutil.rmtree(os.path.join(shared_dir, name), ignore_errors=True)
    rows = [measure(*pool, paths, args.j, args.sample) for pool in POOLS]
    cold, again, own, forked, interp = rows
    if not all(r["per_s"] and r["median_job_s"] for r in rows):
        return
    print(
        f"  ratios: shared cold / own cache {cold['per_s'] / own['per_s']:.2f}x mutants/s, "
        f"{own['median_job_s'] / cold['median_job_s']:.2f}x per-job time; shared again / "
        f"own cache {again['per_s'] / own['per_s']:.2f}x mutants/s; own cache / fork "
        f"{own['per_s'] / forked['per_s']:.1f}x mutants/s, "
        f"{forked['median_job_s'] / own['median_job_s']:.1f}x per-job time; "
        f"own cache / interpreter {own['per_s'] / interp['per_s']:.1f}x mutants/s"
    )


if __name__ == "__main__":
    main()
