"""Throughput of the warm sandbox pool against a fresh process per job, side by side.

Run: ``python benchmarks/throughput.py [-j N] [--sample K]``. It prints
ratios measured in one run (machines here are noisy, so only ratios mean much):

1. mutant generation time per example file (median of 20);
2. the same mutant jobs run two ways at equal parallelism: the warm pool
   (fork per job) and a fresh ``python`` process per job running the mutated
   file as a shell loop would (``TRITON_INTERPRET=1 python kernel.py``);
3. a cold pipeline run of every example against a fully cached rerun.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mutant_gate.cache import Store
from mutant_gate.engine.job import Job
from mutant_gate.engine.kernel_file import load_kernel_file
from mutant_gate.engine.mutate import generate_mutants
from mutant_gate.engine.pipeline import Run
from mutant_gate.engine.sandbox.local import LocalSandbox, worker_env
from mutant_gate.engine.settings import RunSettings

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))


def generation_times() -> None:
    print("mutant generation (median of 20):")
    for path in EXAMPLES:
        source = path.read_text()
        times = []
        for _ in range(20):
            start = time.perf_counter()
            mutants = generate_mutants(source, str(path))
            times.append(time.perf_counter() - start)
        print(
            f"  {path.name:<20} {len(mutants):>3} mutants  {statistics.median(times) * 1000:6.1f} ms"
        )


def sample_jobs(every: int) -> list[Job]:
    jobs = []
    for path in EXAMPLES:
        kernel = load_kernel_file(str(path))
        for mutant in generate_mutants(kernel.source, kernel.path)[::every]:
            jobs.append(Job(files=kernel.files(mutant.source), checks=kernel.checks, timeout_s=60))
    return jobs


def fresh_process(job: Job) -> int:
    """What a shell loop does: a new interpreter per mutant, running its own check."""
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in job.files:
            Path(tmp, rel).write_text(text)
        proc = subprocess.run(
            [sys.executable, job.checks[0].path],
            cwd=tmp,
            env=worker_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=job.timeout_s,
        )
        return proc.returncode


def pool_vs_fresh(workers: int, every: int) -> None:
    jobs = sample_jobs(every)
    print(
        f"\n{len(jobs)} mutant jobs (every {every}th mutant of each example), {workers} in parallel:"
    )
    start = time.perf_counter()
    with LocalSandbox(workers) as box:
        box.start()
        started = time.perf_counter()
        statuses = [r.status.value for _, r in box.run_many(jobs)]
        pool_s = time.perf_counter() - start
        pool_warm_s = time.perf_counter() - started
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        codes = list(pool.map(fresh_process, jobs))
    fresh_s = time.perf_counter() - start
    print(
        f"  warm pool      {len(jobs) / pool_s:6.2f} jobs/s  ({pool_s:.1f} s incl. {pool_s - pool_warm_s:.1f} s start)"
    )
    print(f"  fresh process  {len(jobs) / fresh_s:6.2f} jobs/s  ({fresh_s:.1f} s)")
    print(
        f"  ratio pool/fresh: {fresh_s / pool_s:.1f}x   (pool: {statuses.count('passed')} passed; "
        f"fresh: {codes.count(0)} exited 0)"
    )


def cold_vs_cached(workers: int) -> None:
    print(f"\nwhole runs of all {len(EXAMPLES)} examples, {workers} workers:")
    with tempfile.TemporaryDirectory() as cache_dir:
        timings = {}
        for label in ("cold", "cached"):
            start = time.perf_counter()
            total = cached = 0
            with LocalSandbox(workers) as box, Store(cache_dir) as store:
                for path in EXAMPLES:
                    settings = RunSettings(
                        kernel_path=str(path), workers=workers, cache_dir=cache_dir
                    )
                    for event in Run(settings, box, store).events():
                        report = getattr(event, "report", None)
                    total += len(report["mutants"])
                    cached += sum(m["cached"] for m in report["mutants"])
            timings[label] = time.perf_counter() - start
            print(f"  {label:<7} {timings[label]:7.2f} s  {total} mutants, {cached} from cache")
        print(f"  ratio cold/cached: {timings['cold'] / timings['cached']:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--sample", type=int, default=4, help="take every Nth mutant for pool vs fresh"
    )
    args = parser.parse_args()
    generation_times()
    pool_vs_fresh(args.j, args.sample)
    cold_vs_cached(args.j)


if __name__ == "__main__":
    main()
