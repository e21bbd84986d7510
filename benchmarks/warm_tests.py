"""Trusted tests warm against cold, side by side in one run, with the verdicts compared.

Usage:
    python benchmarks/warm_tests.py [MODULE TEST [MODULE TEST ...]] [--mode M] [-j N]
        [--rounds R] [-k EXPR] [--operators LIST] [--json OUT]

Each pair (a kernel module and the test file that judges it, or ``-`` for a kernel
file judged by its own check; default: the packaged example ``examples/kernel_lib``'s
rms_norm) runs as ``mutant-gate run MODULE --tests TEST
--writer none`` would, with no cache, once with warm runners (the project's tests in the
worker's long-lived runner) and once cold (every job in a process of its own),
alternating for ``--rounds``. Prints, per side: the whole run, the original's run, the
median mutant job, and the ratio cold / warm; and whether every mutant's verdict is the
same on both sides (a difference is a bug, not a figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = (
    str(ROOT / "examples/kernel_lib/src/kernel_lib/ops/rms_norm.py"),
    str(ROOT / "examples/kernel_lib/tests/test_rms_norm.py"),
)


def one_run(
    module: str,
    test: str,
    warm: bool,
    mode: str,
    workers: int,
    keyword: str,
    operators: str,
) -> dict:
    from mutant_gate.engine.pipeline import Run
    from mutant_gate.engine.sandbox.local import LocalSandbox
    from mutant_gate.engine.settings import RunSettings, WriterSettings

    settings = RunSettings(
        kernel_path=module,
        tests=(test,) if test != "-" else (),  # "-": a kernel file's own check
        use_cache=False,
        workers=workers,
        mode=mode,
        keyword=keyword or None,
        operators=operators or None,
        writers=WriterSettings(writer="none"),
    )
    start = time.perf_counter()
    with LocalSandbox(workers=workers, mode=mode, warm=warm) as box:
        box.start()
        run = Run(settings, box, None)
        for _ in run.events():
            pass
        report = run.report()
    wall = time.perf_counter() - start
    jobs = [m["duration_s"] for m in report["mutants"] if m["duration_s"]]
    return {
        "warm": warm,
        "durations": {m["id"]: m["duration_s"] for m in report["mutants"]},
        "wall_s": round(wall, 2),
        "original_s": report["baseline"]["duration_s"],
        "median_job_s": round(statistics.median(jobs), 3) if jobs else None,
        "mutants": len(report["mutants"]),
        # where the run's time went: the original, the mutants' phase (start to end),
        # their jobs' seconds over the workers; the rest is start-up and the report
        "bound": report.get("bound"),
        "verdicts": {m["id"]: m["verdict"] for m in report["mutants"]},
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("pairs", nargs="*")
    parser.add_argument("--mode", default="interpret")
    parser.add_argument("-j", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("-k", default="")
    parser.add_argument("--operators", default="")
    parser.add_argument("--json")
    parser.add_argument(
        "--prime",
        action="store_true",
        help="one warm run first, not counted: a fresh machine's first run pays for its "
        "page cache, bytecode and Triton's driver utilities, whichever side it is",
    )
    args = parser.parse_args(argv)
    pairs = list(zip(args.pairs[::2], args.pairs[1::2], strict=True)) or [DEFAULT]
    records = []
    for module, test in pairs:
        runs = []
        if args.prime:
            one_run(module, test, True, args.mode, args.j, args.k, args.operators)
        for _ in range(args.rounds):
            for warm in (True, False):
                runs.append(one_run(module, test, warm, args.mode, args.j, args.k, args.operators))

        warm_runs = [r for r in runs if r["warm"]]
        cold_runs = [r for r in runs if not r["warm"]]
        same = all(r["verdicts"] == runs[0]["verdicts"] for r in runs)
        med = {
            side: {
                k: statistics.median(r[k] for r in rs)
                for k in ("wall_s", "original_s", "median_job_s")
            }
            for side, rs in (("warm", warm_runs), ("cold", cold_runs))
        }
        name = Path(module).stem
        print(
            f"{name} ({runs[0]['mutants']} mutants, --mode {args.mode}, -j {args.j}, {args.rounds} round(s)):"
        )
        for side in ("warm", "cold"):
            m = med[side]
            print(f"  {side}: whole run {m['wall_s']:.1f} s, original {m['original_s']:.2f} s, "
                  f"median mutant job {m['median_job_s']:.3f} s")  # fmt: skip
            for r in (r for r in runs if r["warm"] == (side == "warm") and r.get("bound")):
                b = r["bound"]
                print(f"    one run: mutant phase {b.get('mutants_wall_s', float('nan')):.1f} s "
                      f"(jobs {b['jobs_s']:.1f} s over {b['workers']} workers), "
                      f"the rest {r['wall_s'] - b['original_s'] - b.get('mutants_wall_s', 0):.1f} s")  # fmt: skip
        print(f"  cold / warm: whole run {med['cold']['wall_s'] / med['warm']['wall_s']:.2f}x, "
              f"median job {med['cold']['median_job_s'] / med['warm']['median_job_s']:.2f}x; "
              f"median warm job / original {med['warm']['median_job_s'] / med['warm']['original_s']:.2f}; "
              f"verdicts {'identical' if same else 'DIFFER'}")  # fmt: skip
        records.append({"module": module, "test": test, "runs": runs, "median": med, "same": same})
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
