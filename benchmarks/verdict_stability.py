"""The same verdicts on a busy machine: each target judged idle, then beside a load.

Run: ``python benchmarks/verdict_stability.py OUT [TARGET ...] [--load N] [-j N]
[--writer probe|none] [--no-probe FILE ...] [--run-args "ARGS"]``.

Each target (a kernel file, or a library: ``DIR`` judged by its ``DIR/tests`` from
``DIR``) runs twice with the CLI, each time from an empty cache: first on an idle
machine, then beside ``--load`` busy processes (default: twice the cores; each spins
``while True: pass`` until the run ends). Kernel files run with the probe writer, so
its written tests and kills are compared too (``--writer none``: the verdicts alone, for
a file whose probe would take longer than the session has; ``--no-probe FILE``: the same
for that file alone, added to the targets; ``--run-args``: more options for every run,
such as ``--no-diff-oracle --no-tolerance`` where the survivors' kinds and tolerances
are not wanted).

Printed per target: the mutants, the wall seconds idle and busy and their ratio (the
load's cost, measured side by side), the verdicts that differ (mutant id: idle verdict
and ``by`` -> busy), the flaky verdicts of each run, and whether the written tests
(name, source, the mutants each kills) are the same. Each run's JSON report and output
are kept under OUT; ``OUT/stability.json`` holds the table's figures.
Default targets: every example file, ``examples/kernel_lib``, and any file given.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def default_targets() -> list[Path]:
    return sorted(EXAMPLES.glob("*.py")) + [EXAMPLES / "kernel_lib"]


def command(
    target: Path, report: Path, cache: Path, jobs: int, writer: str = "probe", more: str = ""
) -> tuple[list[str], Path]:
    """The CLI command for one target and the folder it runs from."""
    run = [sys.executable, "-m", "mutant_gate.cli", "run", "--json", str(report),
           "--cache-dir", str(cache), "-j", str(jobs), "--no-write-tests",
           *shlex.split(more)]  # fmt: skip
    if target.is_dir():  # a library: its source judged by its own tests
        return run + ["--writer", "none", "src", "--tests", "tests"], target
    return run + ["--writer", writer, str(target)], report.parent


def busy(count: int) -> list[subprocess.Popen]:
    """``count`` processes that each keep a core busy until killed."""
    spin = [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(spin) for _ in range(count)]


def one_run(target: Path, out: Path, jobs: int, writer: str = "probe", more: str = "") -> dict:
    """Run the CLI on ``target``; its wall seconds, exit status and report."""
    out.mkdir(parents=True, exist_ok=True)
    report = out / "report.json"
    cmd, cwd = command(target, report, out / "cache", jobs, writer, more)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (out / "output.txt").write_text(proc.stdout + proc.stderr)
    data = json.loads(report.read_text()) if report.exists() else {}
    return {"wall_s": round(wall, 1), "rc": proc.returncode, "report": data}


def rows(report: dict) -> dict[str, tuple[str, str | None]]:
    """Mutant id (library runs: file and id) -> (verdict, by)."""
    found = {}
    for row in report.get("mutants", []):
        key = f"{row.get('file', '')}:{row['id']}"
        found[key] = (row["verdict"], row.get("by"))
    return found


def written(report: dict) -> list[tuple]:
    """The tests a writer wrote and kept: name, a hash of the source, the kills."""
    tests = []
    for entry in report.get("tests", []):
        if entry.get("origin") == "own":
            continue
        source = hashlib.sha256((entry.get("source") or "").encode()).hexdigest()[:12]
        tests.append((entry["name"], source, tuple(sorted(entry.get("kills") or []))))
    return sorted(tests)


def compare(idle: dict, loaded: dict) -> dict:
    a, b = rows(idle["report"]), rows(loaded["report"])
    differ = {
        k: f"{'/'.join(filter(None, a.get(k, ('-',))))} -> {'/'.join(filter(None, b.get(k, ('-',))))}"
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    }
    return {
        "mutants": len(a),
        "idle_s": idle["wall_s"],
        "busy_s": loaded["wall_s"],
        "ratio": round(loaded["wall_s"] / max(idle["wall_s"], 1e-9), 2),
        "rc": [idle["rc"], loaded["rc"]],
        "differ": differ,
        "flaky": [sum(v == "flaky" for v, _ in r.values()) for r in (a, b)],
        "timeouts": [sum(by == "timeout" for _, by in r.values()) for r in (a, b)],
        "written": [len(written(idle["report"])), len(written(loaded["report"]))],
        "written_same": written(idle["report"]) == written(loaded["report"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("targets", nargs="*", type=Path)
    parser.add_argument("--load", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--writer", choices=("probe", "none"), default="probe")
    parser.add_argument("--no-probe", type=Path, action="append", default=[], metavar="FILE",
                        help="a kernel file judged with --writer none (repeatable)")  # fmt: skip
    parser.add_argument("--run-args", default="", metavar="ARGS",
                        help="more options for every run, e.g. '--no-diff-oracle'")  # fmt: skip
    args = parser.parse_args()
    unprobed = [t.resolve() for t in args.no_probe]
    targets = [t.resolve() for t in args.targets] or default_targets()
    targets += [t for t in unprobed if t not in targets]
    results: dict[str, dict] = {}
    for condition in ("idle", "busy"):
        load = busy(args.load) if condition == "busy" else []
        try:
            for target in targets:
                out = args.out / condition / target.stem
                writer = "none" if target in unprobed else args.writer
                run = one_run(target, out, args.jobs, writer, args.run_args)
                results.setdefault(target.name, {})[condition] = run
                print(f"{condition} {target.name}: rc {run['rc']}, {run['wall_s']} s",
                      file=sys.stderr, flush=True)  # fmt: skip
        finally:
            for proc in load:
                proc.kill()
                proc.wait()
    table = {name: compare(r["idle"], r["busy"]) for name, r in results.items()}
    (args.out / "stability.json").write_text(json.dumps(table, indent=1))
    print(f"load: {args.load} busy processes on {os.cpu_count()} cores, -j {args.jobs}\n")
    print("| target | mutants | idle s | busy s | busy/idle | differ | flaky | timeouts | "
          "written tests | same |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, t in table.items():
        print(f"| {name} | {t['mutants']} | {t['idle_s']} | {t['busy_s']} | {t['ratio']} | "
              f"{len(t['differ'])} | {t['flaky'][0]} / {t['flaky'][1]} | "
              f"{t['timeouts'][0]} / {t['timeouts'][1]} | {t['written'][0]} / {t['written'][1]}"
              f" | {'yes' if t['written_same'] else 'no'} |")  # fmt: skip
    for name, t in table.items():
        for key, change in t["differ"].items():
            print(f"{name} {key}: {change}")
    return 0 if all(not t["differ"] for t in table.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
