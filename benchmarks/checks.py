"""What the compile-check and the diff-oracle cost per survivor, on the examples.

Run: ``python benchmarks/checks.py [-j N] [--targets sm_75,sm_80] [EXAMPLE ...]``.
For each example file, one uncached pipeline run with no writer, both checks on,
prints per survivor (median and max over the survivors):

- compile: seconds the compiler spent on the survivor (all its signatures, all
  targets; from the report), and the sandbox job's wall time (fork, loading the
  file with the interpreter off, compiling);
- oracle: seconds of the side-by-side runs (two pairs when undefined lanes are
  poisoned), and that as a multiple of the original's own check time;
- each stage's wall time per survivor with N workers.

Machines here are noisy and shared: read the multiples, not the seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from mutant_gate.engine.checks import parse_targets
from mutant_gate.engine.events import BaselineFinished, CheckFinished, CheckStarted, RunFinished
from mutant_gate.engine.pipeline import Run
from mutant_gate.engine.sandbox.local import LocalSandbox
from mutant_gate.engine.settings import RunSettings, WriterSettings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEFAULT = ("vector_add.py", "softmax.py", "layer_norm.py", "matmul.py")


def spread(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"median {statistics.median(values):6.2f} s, max {max(values):6.2f} s"


def bench(path: Path, workers: int, targets: tuple[str, ...], box: LocalSandbox) -> None:
    settings = RunSettings(
        kernel_path=str(path),
        workers=workers,
        use_cache=False,
        writers=WriterSettings(writer="none"),
        compile_check=True,
        compile_targets=targets,
        diff_oracle=True,
    )
    run = Run(settings, box, None)
    started: dict[str, float] = {}
    wall: dict[str, float] = {}
    baseline_s = 0.0
    report: dict = {}
    for event in run.events():
        if isinstance(event, BaselineFinished):
            baseline_s = event.result.duration_s
        elif isinstance(event, CheckStarted) and event.mutant is None:
            started[event.check] = time.perf_counter()
        elif isinstance(event, CheckFinished) and event.mutant is None:
            wall[event.check] = time.perf_counter() - started[event.check]
        elif isinstance(event, RunFinished):
            report = event.report
    checks = report.get("checks", {})
    compiled = [m for m in report["mutants"] if "compile" in m]
    compile_s = [sum(r["seconds"] for r in m["compile"].values()) for m in compiled]
    oracled = [m for m in report["mutants"] if m.get("oracle", {}).get("identical") is not None]
    oracle_s = [m["oracle"]["seconds"] for m in oracled]
    survivors = checks.get("compile", {}).get("survivors", 0)
    print(
        f"{path.name}: {len(report['mutants'])} mutants, {survivors} survivors, "
        f"original's check {baseline_s:.2f} s"
    )
    if not survivors:
        return
    summary = checks["compile"]
    if summary.get("skipped"):
        print(f"  compile-check skipped: {summary['skipped']}")
    else:
        print(
            f"  compile ({', '.join(summary['checked_targets'])}, "
            f"{len(summary['signatures'])} signatures): compiler {spread(compile_s)}; "
            f"job {summary['seconds_per_survivor']:.2f} s mean; "
            f"stage {wall.get('compile', 0) / survivors:.2f} s per survivor with {workers} workers"
        )
    ratio = [s / baseline_s for s in oracle_s] if baseline_s else []
    poisoned = sum(1 for m in oracled if m["oracle"].get("poisoned"))
    print(
        f"  oracle: {spread(oracle_s)} ({statistics.median(ratio):.1f}x the original's check, "
        f"{poisoned} of {len(oracled)} also ran poisoned); stage "
        f"{wall.get('oracle', 0) / max(1, len(oracled)):.2f} s per survivor with {workers} workers"
        if ratio
        else "  oracle: nothing compared"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*", default=list(DEFAULT))
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--targets", default="sm_75")
    args = parser.parse_args()
    targets = parse_targets(args.targets)
    with LocalSandbox(args.jobs) as box:
        box.start()
        for name in args.examples:
            bench(EXAMPLES / name, args.jobs, targets, box)


if __name__ == "__main__":
    main()
