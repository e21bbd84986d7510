"""Two installs of mutant-gate judge the same mutants side by side: where their jobs' time went.

Made for the GPU (device tool) to weigh a change to how jobs run against the code before it:
each round runs ``mutant-gate run`` once per install, in alternating order, each with a fresh
result cache and a fresh shared Triton cache (a kernel one run compiled is not found by the
other), then reads both runs' reports and caches and prints, per run and as ratios
new/old:

- the library wall, and the jobs' seconds summed (``duration_s`` of every job result);
- the seconds the jobs spent importing the project's modules in a fresh warm runner
  (``extra.imports.wall_s``), and how many runners were retired after a job, by reason;
- the test cases the mutants ran (``tests_run``), and per killed mutant;
- verdict parity: every mutant's verdict in both runs, the ones that differ named.

Usage (from the library's checkout; the installs are directories for PYTHONPATH)::

    python benchmarks/job_reuse.py --old /tmp/site-old --new /tmp/site-new --rounds 1 \\
        -- src/liger_kernel/ops/cross_entropy.py --tests test/transformers/test_cross_entropy.py \\
        --mode compiled -j 16 --writer none --no-write-tests --shard 1/4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from job_time_split import split  # the script beside this one

TRITON_SHARED = os.path.join(tempfile.gettempdir(), "mutant-gate-triton")


def _one(name: str, site: str, args: list[str], out: str) -> dict:
    cache_dir = os.path.join(out, f"cache-{name}")
    report = os.path.join(out, f"{name}.json")
    shutil.rmtree(cache_dir, ignore_errors=True)
    shutil.rmtree(TRITON_SHARED, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": site}
    command = [sys.executable, "-m", "mutant_gate.cli", "run", *args, "--json", report]
    start = time.perf_counter()
    with open(os.path.join(out, f"{name}.txt"), "w") as console:
        proc = subprocess.run(
            [*command, "--cache-dir", cache_dir], env=env, stdout=console, stderr=subprocess.STDOUT
        )
    wall = time.perf_counter() - start
    rows = json.load(open(report))["mutants"] if os.path.exists(report) else []
    tally = split(cache_dir)
    by_status, retired = tally.rows, tally.retired  # per status: [jobs, cases, wall, ...]
    killed = [m for m in rows if m["verdict"] == "killed"]
    return {
        "name": name,
        "rc": proc.returncode,
        "wall_s": wall,
        "jobs": sum(r[0] for r in by_status.values()),
        "job_s": sum(r[2] for r in by_status.values()),
        "imports_s": sum(r[3] for r in by_status.values()),
        "compiles": sum(r[5] for r in by_status.values()),
        "compile_s": sum(r[6] for r in by_status.values()),
        "same_ir": tally.reused,
        "retired": dict(retired),
        "cases": sum(len(m.get("tests_run") or []) for m in rows),
        "killed_cases": sum(len(m.get("tests_run") or []) for m in killed),
        "killed": len(killed),
        "verdicts": {m["id"]: m["verdict"] for m in rows},
    }


def _line(run: dict) -> str:
    per_kill = run["killed_cases"] / max(1, run["killed"])
    return (
        f"{run['name']:>10}: rc {run['rc']}, wall {run['wall_s']:.1f} s, {run['jobs']} jobs "
        f"{run['job_s']:.0f} s, imports {run['imports_s']:.0f} s, {run['compiles']} compiles "
        f"{run['compile_s']:.0f} s, {run['same_ir']} took a same-IR binary, cases run {run['cases']} "
        f"({per_kill:.1f} a killed mutant, {run['killed']} killed), "
        f"{len(run['verdicts'])} verdicts; retired {run['retired']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="PYTHONPATH of the install before")
    parser.add_argument("--new", required=True, help="PYTHONPATH of the install after")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument(
        "args", nargs=argparse.REMAINDER, help="-- then mutant-gate run's arguments"
    )
    ns = parser.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for r in range(ns.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        for which in order:
            run = _one(f"{which}-{r + 1}", getattr(ns, which), args, ns.out)
            runs[which].append(run)
            print(_line(run), flush=True)
    for old, new in zip(runs["old"], runs["new"], strict=True):
        differ = sorted(
            i
            for i in old["verdicts"].keys() | new["verdicts"].keys()
            if old["verdicts"].get(i) != new["verdicts"].get(i)
        )
        print(
            f"round: new/old wall {new['wall_s'] / old['wall_s']:.2f}x, job seconds "
            f"{new['job_s'] / max(1e-9, old['job_s']):.2f}x, imports "
            f"{new['imports_s'] / max(1e-9, old['imports_s']):.2f}x, compile seconds "
            f"{new['compile_s'] / max(1e-9, old['compile_s']):.2f}x, cases run "
            f"{new['cases'] / max(1, old['cases']):.2f}x; verdicts differ on {len(differ)} of "
            f"{len(old['verdicts'])}: {differ[:10]}"
        )


if __name__ == "__main__":
    main()
