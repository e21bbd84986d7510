"""What the probe writer costs beside the mutants, before and after sharing, on the examples.

Run: ``python benchmarks/probe_phase.py [-j N] [--probes N] [EXAMPLE ...]``.
For each example file, two pipeline runs with the probe writer, one after the other:

1. sharing on (the default): the original runs once per candidate input for every
   survivor, several survivors per compare job, each stopping at its first hit;
2. sharing off (``WriterSettings.probe_share=False``, an internal switch): one job per
   survivor and batch, the original run beside the mutant on every candidate, as the
   probe did before.

Run 1 starts from an empty cache and gives the mutant phase's time (baseline done to
the last mutant judged). Run 2 shares that cache, so its mutant phase costs nothing,
and so do the probe jobs both runs have in common (capturing the own check's calls,
proofs of identical tests): what it prints for "before" is, if anything, too low.

Printed per example: the mutant phase, each probe phase (its own wall time, proofs
included), the ratio of the two probe phases, the probe phase after over the mutant
phase, and for each run the probe's kills, compare jobs and runs (mutant + original).
Machines here are noisy and shared: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from mutant_gate.cache import Store
from mutant_gate.engine.events import BaselineFinished, MutantFinished, RunFinished
from mutant_gate.engine.pipeline import Run
from mutant_gate.engine.sandbox.local import LocalSandbox
from mutant_gate.engine.settings import RunSettings, WriterSettings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DEFAULT = ("vector_add.py", "softmax.py", "layer_norm.py")


def one_run(settings: RunSettings, box: LocalSandbox, store: Store) -> dict:
    """(mutant phase seconds, the run's ``writers.probe``, survivors) of one run."""
    start = time.perf_counter()
    baseline_at = mutants_at = start
    report: dict = {}
    for event in Run(settings, box, store).events():
        if isinstance(event, BaselineFinished):
            baseline_at = time.perf_counter()
        elif isinstance(event, MutantFinished) and event.done == event.total:
            mutants_at = time.perf_counter()
        elif isinstance(event, RunFinished):
            report = event.report
    probe = (report.get("writers") or {}).get("probe") or {}
    return {
        "mutants": len(report.get("mutants", [])),
        "mutant_s": max(0.0, mutants_at - baseline_at),
        "probe": probe,
        "killed": sum((probe.get("kills_by_trigger") or {}).values()),
        "spend": probe.get("spend") or {},
    }


def runs(spend: dict) -> str:
    return (
        f"{spend.get('jobs', 0)} jobs, {spend.get('mutant_runs', 0)}+"
        f"{spend.get('original_runs', 0)} runs"
    )


def bench(path: Path, workers: int, probes: int, box: LocalSandbox) -> None:
    base = RunSettings(
        kernel_path=str(path),
        workers=workers,
        use_cache=True,
        writers=WriterSettings(writer="probe", probes=probes),
    )
    off = replace(base, writers=replace(base.writers, probe_share=False))
    with tempfile.TemporaryDirectory(prefix="mg-probe-bench-") as cache:
        store = Store(cache)
        after = one_run(base, box, store)
        before = one_run(off, box, store)
    a_s = after["spend"].get("seconds", 0.0)
    b_s = before["spend"].get("seconds", 0.0)
    survivors = after["probe"].get("survivors", 0)
    print(
        f"{path.name}: {after['mutants']} mutants, {survivors} probed; mutant phase "
        f"{after['mutant_s']:.1f} s"
    )
    if not survivors:
        return
    print(
        f"  probe before {b_s:6.1f} s ({before['killed']} killed; {runs(before['spend'])})"
        f"\n  probe after  {a_s:6.1f} s ({after['killed']} killed; {runs(after['spend'])}; "
        f"{after['spend'].get('originals_saved', 0)} original runs saved, "
        f"{after['spend'].get('unusable', 0)} inputs left out)"
        f"\n  after / before {a_s / b_s if b_s else float('nan'):.2f}; probe after / mutant "
        f"phase {a_s / after['mutant_s'] if after['mutant_s'] else float('nan'):.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*", default=list(DEFAULT))
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--probes", type=int, default=24)
    args = parser.parse_args()
    with LocalSandbox(args.jobs) as box:
        box.start()
        for name in args.examples:
            bench(EXAMPLES / name, args.jobs, args.probes, box)


if __name__ == "__main__":
    main()
