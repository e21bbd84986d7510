"""A library run with its modules overlapping on the pool against the same run with each
module started once the one before has ended, side by side in one run (fresh caches each
time, the tool's and the pool's Triton cache, the order alternated between rounds).

Run: ``python benchmarks/library_overlap.py ROOT PATH --tests TESTS [--rounds N] [-- FLAGS]``
from anywhere, ROOT the project's root (the command runs there), PATH and TESTS as
``mutant-gate run`` takes them, FLAGS passed on (``--mode compiled -j 16``...). Prints each
run's wall seconds, its verdicts' agreement, and the ratio sequential / overlapped.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(root: str, args: list[str], sequential: bool) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "r.json")
        # TMPDIR: a Triton cache of its own (the pool's shared one lives in the temp dir)
        env = dict(os.environ, MUTANT_GATE_LIBRARY_SEQUENTIAL="1" if sequential else "0",
                   TMPDIR=scratch)  # fmt: skip
        command = [sys.executable, "-m", "mutant_gate.cli", "run", *args, "--json", out,
                   "--cache-dir", os.path.join(scratch, "cache"), "--no-write-tests"]  # fmt: skip
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            sys.exit(f"library_overlap: run failed ({proc.returncode}): {proc.stderr[-2000:]}")
        with open(out) as fh:
            report = json.load(fh)
    return seconds, {r["id"]: r["verdict"] for r in report["mutants"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--tests", nargs="+", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--overlapped-first", action="store_true", help="begin with it")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    ns, extra = parser.parse_args(argv[:cut]), argv[cut + 1 :]
    tests = [word for test in ns.tests for word in ("--tests", test)]
    args = [*ns.paths, *tests, "--writer", "none", *extra]
    times: dict[bool, list[float]] = {True: [], False: []}
    verdicts: dict[bool, list[dict]] = {True: [], False: []}
    for number in range(ns.rounds):
        for sequential in (
            (True, False) if (number + ns.overlapped_first) % 2 == 0 else (False, True)
        ):
            seconds, found = run(ns.root, args, sequential)
            times[sequential].append(seconds)
            verdicts[sequential].append(found)
            said = "sequential" if sequential else "overlapped"
            print(f"round {number + 1} {said}: {seconds:.1f} s, {len(found)} mutants", flush=True)
    seq, over = statistics.median(times[True]), statistics.median(times[False])
    first = verdicts[True][0]
    differ = sorted(
        {k for v in verdicts[True] + verdicts[False] for k in first if v.get(k) != first[k]}
    )
    print(f"median: sequential {seq:.1f} s, overlapped {over:.1f} s; sequential / overlapped "
          f"{seq / over:.2f}x; verdicts differing between runs: {len(differ)}"
          + (f" ({', '.join(differ[:5])})" if differ else ""))  # fmt: skip


if __name__ == "__main__":
    main()
