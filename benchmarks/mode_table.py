"""Per-mutant agreement table of interpreted vs compiled runs (reads gpu_modes.sh output).

Usage: python benchmarks/mode_table.py DIR  -> markdown on stdout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(folder: str) -> None:
    root = Path(folder)
    times = {}
    for line in (root / "gpu_times.txt").read_text().splitlines():
        name, mode, _, wall = line.split()
        times[(name, mode)] = float(wall.split("=")[1]) / 1000.0
    print((root / "gpu_env.txt").read_text())
    print(
        "| example | mutants | interpret mutants/s | compiled mutants/s | agree | disagreements |"
    )
    print("|---|---|---|---|---|---|")
    rows = []
    for path in sorted(root.glob("*.interpret.json")):
        name = path.name.split(".")[0]
        other = root / f"{name}.compiled.json"
        if not other.exists():
            continue
        a = {m["id"]: m for m in json.loads(path.read_text())["mutants"]}
        b = {m["id"]: m for m in json.loads(other.read_text())["mutants"]}
        differ = [
            i
            for i in a
            if i in b and (a[i]["verdict"] == "killed") != (b[i]["verdict"] == "killed")
        ]
        rate = {mode: len(a) / times[(name, mode)] for mode in ("interpret", "compiled")}
        print(
            f"| {name} | {len(a)} | {rate['interpret']:.2f} | {rate['compiled']:.2f} | "
            f"{len(a) - len(differ)} | {len(differ)} |"
        )
        rows += [(name, a[i], b[i]) for i in differ]
    print("\n## Disagreements\n")
    print("| example | mutant | operator | line | interpreted | compiled |")
    print("|---|---|---|---|---|---|")
    for name, x, y in rows:
        print(f"| {name} | {x['id']} | {x['operator']} | {x['line']} | {_said(x)} | {_said(y)} |")


def _said(row: dict) -> str:
    """``killed (own-check: reason...)``, or ``survived (reason...)`` where no one killed."""
    by = f"{row['by']}: " if row.get("by") else ""
    return f"{row['verdict']} ({by}{row['reason'][:60]})"


if __name__ == "__main__":
    main(sys.argv[1])
