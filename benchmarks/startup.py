"""How long the commands take to start, and a run against its cached rerun, in one run.

Run: ``python benchmarks/startup.py [--examples vector_add,softmax] [--repeat N] [-j N]
[--against PYTHON]``.
Each item is a fresh process, timed side by side on the same machine (machines here
are noisy: read the ratios):

- ``python -c pass`` (the interpreter alone) and ``python -c "import torch"``, the
  reference every ratio is given against (what a command that imports the engine
  pays at least);
- ``mutant-gate --help``, ``cache ls`` and ``report latest --format markdown`` on a
  cache holding one run (a report from ``tests/data``);
- for each example: its cold run (empty cache; ``--writer none`` by default, so the
  figure is the file's own checks against every mutant on ``-j`` workers), then the
  same command again, fully cached (the parsed file, the mutants and every result).

The cheap commands and the cached reruns run ``--repeat`` rounds, interleaved, and
print their median; a cold run runs once. The default (every example, one round,
``-j 2``, no writer) takes a few minutes on 2 cores.

``--against PYTHON`` times every mutant-gate item with a second interpreter too (another
checkout's environment: the code before a change), interleaved with this one's in each
round, each with its own cache, and prints its column and the ratio this / that.
Whether Python writes bytecode is said on the first line: with PYTHONDONTWRITEBYTECODE
set, every command compiles the tool's own modules from source again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mutant_gate.cache import Store

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "tests" / "data" / "tui_affine_oracle_report.json"
EXAMPLES = {p.stem: p for p in sorted((ROOT / "examples").glob("*.py"))}


def timed(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=cwd)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # 1: a run whose score is under --fail-under
        sys.exit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return seconds


def chosen_examples(text: str | None) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()] if text else list(EXAMPLES)
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown or not names:
        sys.exit(
            f"--examples: unknown {', '.join(unknown) or '(none)'}; known: {', '.join(EXAMPLES)}"
        )
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", metavar="NAMES", help="comma-separated (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the cheap items")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="workers of each run")
    parser.add_argument("--writer", default="none", help="the runs' --writer (default: none)")
    parser.add_argument(
        "--against", metavar="PYTHON", help="also time each item with this interpreter"
    )
    args = parser.parse_args()
    names = chosen_examples(args.examples)
    if args.against and not os.access(args.against, os.X_OK):
        sys.exit(f"--against: not an executable: {args.against}")
    sides = {"this": sys.executable, **({"that": args.against} if args.against else {})}
    with tempfile.TemporaryDirectory() as tmp:
        report = json.loads(REPORT.read_text())
        with Store(f"{tmp}/c") as store:
            store.put_run(report["run_id"], {"run_id": report["run_id"], "report": report})
        commands: dict[str, dict[str, list[str]]] = {
            "python -c pass": {"this": [sys.executable, "-c", "pass"]},
            "import torch": {"this": [sys.executable, "-c", "import torch"]},
        }
        for item, argv in {
            "mutant-gate --help": ["--help"],
            "cache ls": ["cache", "ls", "--cache-dir", f"{tmp}/c"],
            "report (markdown)": ["report", "latest", "--format", "markdown",
                                  "--cache-dir", f"{tmp}/c"],
        }.items():  # fmt: skip
            commands[item] = {
                side: [py, "-m", "mutant_gate.cli", *argv] for side, py in sides.items()
            }
        cold: dict[str, dict[str, float]] = {}
        bounds: dict[str, dict] = {}
        for name in names:  # the cold run fills the cache the rerun is served from
            commands[f"cached rerun {name}"], cold[name] = {}, {}
            for side, py in sides.items():
                argv = [py, "-m", "mutant_gate.cli", "run", str(EXAMPLES[name]), "-q",
                        "--cache-dir", f"{tmp}/runs-{side}", "--writer", args.writer,
                        "-j", str(args.jobs), "--json", f"{tmp}/r.json"]  # fmt: skip
                cold[name][side] = timed(argv, tmp)
                if side == "this":
                    bounds[name] = json.loads(Path(f"{tmp}/r.json").read_text())["bound"]
                commands[f"cached rerun {name}"][side] = argv
        times = {(item, side): [] for item, by in commands.items() for side in by}
        for _ in range(args.repeat):  # interleaved: each round sees the same machine
            for item, by in commands.items():
                for side, argv in by.items():
                    times[item, side].append(timed(argv, tmp))
    torch_s = statistics.median(times["import torch", "this"])
    bytecode = "not written (PYTHONDONTWRITEBYTECODE)" if sys.dont_write_bytecode else "cached"
    print(
        f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"bytecode {bytecode}; runs with -j {args.jobs} --writer {args.writer}; "
        f"{args.repeat} round(s), median"
    )
    against = f" {'--against':>10} {'this/that':>9}" if args.against else ""
    print(f"{'item':<34} {'seconds':>9} {'x import torch':>15}{against}")

    def row(item: str, this: float, that: float | None) -> None:
        other = f" {that:>10.3f} {this / that:>9.2f}" if that is not None else ""
        print(f"{item:<34} {this:>9.3f} {this / torch_s:>15.2f}{other}")

    for item, by in commands.items():
        if item.startswith("cached rerun "):
            example = item.removeprefix("cached rerun ")
            row(f"cold run {example}", cold[example]["this"], cold[example].get("that"))
        medians = {side: statistics.median(times[item, side]) for side in by}
        row(item, medians["this"], medians.get("that"))
    print("cold runs against the sum of their check times (the run's own bound line):")
    for name, b in bounds.items():
        print(
            f"  {name}: {b['original_s']:.1f} s original + {b['jobs_s']:.1f} s of mutant jobs "
            f"over {b['workers']} workers = {b['bound_s']:.1f} s; took {b['wall_s']:.1f} s "
            f"in the tool, {cold[name]['this']:.1f} s with start-up"
        )


if __name__ == "__main__":
    main()
