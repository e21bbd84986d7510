"""Per-job overhead of ``--backend ray`` against the local pool, side by side in one run.

Run: ``python benchmarks/ray_overhead.py [-j 2] [--rounds 3] [--address local]``. Both
sandboxes are started first (start-up is reported, not counted), then the same mutant
jobs (every mutant of ``vector_add.py`` and ``softmax.py``) run on each in turn, round
after round, so machine noise falls on both alike. Printed per backend: the jobs' own
time (the worker's measure of each job), the wall time per job on a worker
(``wall * workers / jobs``), and the overhead per job (the difference): what the backend
adds to each job, the figure to size a cluster with. Only the ratios mean much on a
shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from mutant_gate.engine.job import Job, JobStatus
from mutant_gate.engine.kernel_file import load_kernel_file
from mutant_gate.engine.mutate import generate_mutants
from mutant_gate.engine.sandbox.local import LocalSandbox
from mutant_gate.engine.sandbox.ray import RaySandbox

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FILES = ("vector_add.py", "softmax.py")


def mutant_jobs(mode: str = "interpret") -> list[Job]:
    """Every mutant's job of the files, as a run makes them (own check, 60 s limit)."""
    jobs = []
    for name in FILES:
        kernel = load_kernel_file(str(EXAMPLES / name))
        for mutant in generate_mutants(kernel.source, kernel.path):
            files = kernel.files(mutant.source)
            jobs.append(Job(files=files, checks=kernel.checks, mode=mode, timeout_s=60))
    return jobs


def started(box) -> float:
    """Start ``box`` and wait until every worker is ready; the seconds it took."""
    begin = time.perf_counter()
    if isinstance(box, LocalSandbox):
        box.start(wait_all=True)
    else:
        box.start()
    return time.perf_counter() - begin


def one_round(box, jobs: list[Job]) -> tuple[float, float, dict]:
    """Wall seconds for all jobs, the jobs' own seconds summed, and their verdicts."""
    begin = time.perf_counter()
    results = dict(box.run_many(jobs))
    wall = time.perf_counter() - begin
    own = sum(r.duration_s for r in results.values())
    return wall, own, {i: r.status for i, r in results.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=2, help="workers / actors (default 2)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--address", default="local", help="Ray address (default: local)")
    parser.add_argument(
        "--mode",
        default="interpret",
        choices=("interpret", "compiled"),
        help="compiled: on the GPUs (an actor per GPU on Ray: -j the GPUs for a fair pair)",
    )
    args = parser.parse_args()
    jobs = mutant_jobs(args.mode)
    boxes = {
        "local": LocalSandbox(args.jobs, mode=args.mode),
        "ray": RaySandbox(args.jobs, mode=args.mode, address=args.address),
    }
    try:
        startup = {name: started(box) for name, box in boxes.items()}
        for box in boxes.values():
            one_round(box, jobs[: args.jobs * 2])  # first jobs: lazy imports, caches
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in boxes}
        verdicts: dict[str, dict] = {}
        for _ in range(args.rounds):
            for name, box in boxes.items():
                wall, own, found = one_round(box, jobs)
                measured[name].append((wall, own))
                verdicts.setdefault(name, found)
        cluster = boxes["ray"].cluster_record()["cluster"]
    finally:
        for box in boxes.values():
            box.close()
    report(args, jobs, startup, measured, verdicts, cluster)


def report(args, jobs, startup, measured, verdicts, cluster) -> None:
    n, workers = len(jobs), args.jobs
    print(
        f"{n} mutant jobs ({', '.join(FILES)}), --mode {args.mode}, -j {workers}, "
        f"{args.rounds} rounds each"
    )
    print(
        f"ray cluster: {cluster['nodes']} node(s), {cluster['cpus']} CPUs, "
        f"{cluster['gpus']} GPUs, started here: {cluster['started_here']}"
    )
    rows = {}
    for name, runs in measured.items():
        wall = statistics.median(w for w, _ in runs)
        own = statistics.median(o for _, o in runs) / n
        per_job = wall * workers / n
        rows[name] = (wall, own, per_job, per_job - own)
    print()
    print(
        "| backend | start s | round wall s (median) | job own ms | wall per job ms | overhead per job ms |"
    )
    print("|---|---|---|---|---|---|")
    for name, (wall, own, per_job, over) in rows.items():
        print(
            f"| {name} | {startup[name]:.1f} | {wall:.2f} | {own * 1000:.0f} | "
            f"{per_job * 1000:.0f} | {over * 1000:.0f} |"
        )
    local, ray = rows["local"], rows["ray"]
    print()
    print(f"wall per job, ray / local: {ray[2] / local[2]:.2f}")
    print(f"overhead per job, ray - local: {(ray[3] - local[3]) * 1000:.0f} ms")
    same = verdicts["local"] == verdicts["ray"]
    errors = sum(s is JobStatus.ERROR for v in verdicts.values() for s in v.values())
    print(f"same statuses on every job: {same}; error results: {errors}")


if __name__ == "__main__":
    main()
