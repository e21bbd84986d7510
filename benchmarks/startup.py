"""How long the commands that run no kernel take to start, side by side in one run.

Run: ``python benchmarks/startup.py [--repeat N]``. Times, interleaved round by round
(machines here are noisy: read the ratios), each as a fresh process:

- ``python -c pass`` (the interpreter alone) and ``python -c "import torch"`` (what a
  command that imports the engine pays at least);
- ``mutant-gate --help``, ``cache ls`` and ``report latest --format markdown`` on a
  cache holding one run (a report from ``tests/data``);
- a fully cached ``run`` of each example (its first run, made before the rounds,
  filled the cache) and, once, each example's cold run, for scale.

Prints the median of each and its ratio to ``import torch``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mutant_gate.cache import Store

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "tests" / "data" / "tui_affine_oracle_report.json"
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        report = json.loads(REPORT.read_text())
        with Store(f"{tmp}/c") as store:
            store.put_run(report["run_id"], {"run_id": report["run_id"], "report": report})
        cli = [sys.executable, "-m", "mutant_gate.cli"]
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import torch": [sys.executable, "-c", "import torch"],
            "mutant-gate --help": [*cli, "--help"],
            "cache ls": [*cli, "cache", "ls", "--cache-dir", f"{tmp}/c"],
            "report (markdown)": [*cli, "report", "latest", "--format", "markdown",
                                  "--cache-dir", f"{tmp}/c"],
        }  # fmt: skip
        cold: dict[str, float] = {}
        for path in EXAMPLES:
            argv = [*cli, "run", str(path), "-q", "--cache-dir", f"{tmp}/runs"]
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True, cwd=tmp)
            cold[path.stem] = time.perf_counter() - start
            commands[f"cached run {path.stem}"] = argv
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):  # interleaved: each round sees the same machine
            for name, argv in commands.items():
                start = time.perf_counter()
                subprocess.run(argv, capture_output=True, check=True, cwd=tmp)
                times[name].append(time.perf_counter() - start)
    torch_s = statistics.median(times["import torch"])
    print(f"{'command':<30} {'median s':>9} {'x import torch':>15}   ({args.repeat} rounds)")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<30} {median:>9.3f} {median / torch_s:>15.2f}")
    print(
        "cold runs (once each, for scale): " + ", ".join(f"{k} {v:.1f} s" for k, v in cold.items())
    )


if __name__ == "__main__":
    main()
