"""The probe's spend against the mutants', and what it kills, before and after a change.

Usage:
    python benchmarks/probe_speed.py OUTDIR FILE... [--before SITE] [-j N]

For each kernel file, one after the other, in one run (machines here are noisy: read
the ratios, not the seconds):
1. ``mutant-gate run FILE --writer none`` (this tree): the command without the probe,
   and its mutant phase (the jobs of the mutants, ``bound.jobs_s`` over the workers);
2. with ``--before SITE``: ``mutant-gate run FILE`` (the probe, the default writer)
   with the package installed at SITE (``pip install --no-deps --target SITE OLDTREE``);
3. ``mutant-gate run FILE`` with this tree.
Each run has a fresh cache. Printed: a Markdown table per file of the probe's seconds
(``writers.probe.spend.seconds``), its kills by trigger kind, the survivors left, the
probe's seconds over the command without it, and over the mutant phase; then, for this
tree's run, its probe against its own mutant phase (``bound.mutants_wall_s``: both wall
seconds of one run) and its job seconds against the time budget.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


def run(file: Path, out: Path, tag: str, flags: list[str], site: str | None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    report = out / f"{file.stem}.{tag}.json"
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mutant_gate.cli", "run", str(file), "--json", str(report),
         "--cache-dir", str(out / f"cache-{file.stem}-{tag}"), "-q", *flags],
        capture_output=True, text=True, cwd=out, env=env,
    )  # fmt: skip
    wall = time.perf_counter() - start
    (out / f"{file.stem}.{tag}.out").write_text(proc.stdout + proc.stderr)
    if not report.exists():
        return {"wall_s": wall, "error": (proc.stdout + proc.stderr).strip()[-300:]}
    r = json.loads(report.read_text())
    probe = (r.get("writers") or {}).get("probe") or {}
    bound = r.get("bound") or {}
    return {
        "wall_s": wall,
        "mutants": len(r["mutants"]),
        "survived": sum(m["verdict"] == "survived" for m in r["mutants"]),
        "probe_s": (probe.get("spend") or {}).get("seconds", 0.0),
        "kills": probe.get("kills_by_trigger") or {},
        "mutant_phase_s": bound.get("jobs_s", 0.0) / max(1, bound.get("workers", 1)),
        # the same run's mutant phase as it ran, start to end (recorded since the budget)
        "mutants_wall_s": bound.get("mutants_wall_s"),
        "job_s": (probe.get("spend") or {}).get("job_s"),
        "budget_s": (probe.get("spend") or {}).get("budget_s"),
    }


def kills(by: dict) -> str:
    total = sum(by.values())
    parts = ", ".join(f"{k} {n}" for k, n in sorted(by.items(), key=lambda kv: -kv[1]))
    return f"{total}" + (f" ({parts})" if parts else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--before", help="site directory of the code before the change")
    parser.add_argument(
        "--after",
        help="site directory of the code after it (default: this tree as installed), so the "
        "tree can change while the benchmark runs",
    )
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args()
    jobs = ["-j", str(args.jobs)]
    rows = []
    for file in args.files:
        file = file.resolve()
        none = run(file, args.out, "none", [*jobs, "--writer", "none"], args.after)
        before = run(file, args.out, "before", jobs, args.before) if args.before else None
        after = run(file, args.out, "after", jobs, args.after)
        rows.append((file.stem, none, before, after))
        (args.out / "probe_speed.json").write_text(json.dumps(rows, indent=1))
        print(f"{file.name}: done", file=sys.stderr, flush=True)
    print(
        "| file | mutants | command without probe | mutant phase | probe before | probe after "
        "| after / before | after / without | after / mutant phase | kills before | kills after "
        "| survivors before → after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for stem, none, before, after in rows:
        b = before or {}
        if after.get("mutants_wall_s"):  # side by side in one run: the probe, the mutants
            after["in_run"] = after["probe_s"] / max(after["mutants_wall_s"], 1e-9)
        ratio = after["probe_s"] / b["probe_s"] if b.get("probe_s") else float("nan")
        print(
            f"| {stem} | {after.get('mutants')} | {none['wall_s']:.1f} s | "
            f"{none.get('mutant_phase_s', 0):.1f} s | {b.get('probe_s', float('nan')):.1f} s | "
            f"{after['probe_s']:.1f} s | {ratio:.2f} | {after['probe_s'] / none['wall_s']:.2f} | "
            f"{after['probe_s'] / max(none.get('mutant_phase_s', 0), 1e-9):.2f} | "
            f"{kills(b.get('kills', {})) if before else '-'} | {kills(after.get('kills', {}))} | "
            f"{b.get('survived', '-')} → {after.get('survived')} |"
        )
    print()
    print("| file | mutant phase (wall, the probe's run) | probe (wall) | probe / mutant phase "
          "| probe's job seconds | its time budget |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for stem, _, _, after in rows:
        if after.get("mutants_wall_s") is None:
            continue
        print(
            f"| {stem} | {after['mutants_wall_s']:.1f} s | {after['probe_s']:.1f} s | "
            f"{after['in_run']:.2f} | {after.get('job_s') or 0:.1f} s | "
            f"{after.get('budget_s') if after.get('budget_s') is not None else '-'} |"
        )


if __name__ == "__main__":
    main()
