"""Per-mutant verdicts of the same files interpreted (a CPU) and compiled (a GPU), side by side.

Usage: python benchmarks/verdict_parity.py INTERP_DIR COMPILED_DIR  -> markdown on stdout.
INTERP_DIR holds NAME.json (``mutant-gate run FILE --json``), COMPILED_DIR
NAME.compiled.json (``benchmarks/gpu_parity.sh``). Mutant ids are content hashes, so the
same file gives the same ids on both machines. A disagreement is listed with both
reasons: the report says why where it can (bounds, undefined lanes).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def why(interp: dict, compiled: dict) -> str:
    """Which known difference between the modes explains a disagreement, or "other"."""
    if interp["by"] == "bounds":
        return "bounds (the interpreter checks every address; a GPU reads what is there)"
    if "UndefinedLanesError" in interp["reason"]:
        return "undefined lanes (poisoned in the interpreter)"
    if interp["by"] == "timeout":
        return "timeout (the interpreter is orders of magnitude slower)"
    if compiled["verdict"] == "not_compilable":
        return "compile-check (compiled mode compiles every mutant)"
    return "other"


def main(interp: Path, compiled: Path) -> None:
    print(
        "| file | mutants | same verdict | explained | other | interpreted killed | compiled killed |"
    )
    print("|---|---|---|---|---|---|---|")
    notes = []
    for path in sorted(interp.glob("*.json")):
        other = compiled / f"{path.stem}.compiled.json"
        if not other.exists():
            continue
        a = {m["id"]: m for m in json.loads(path.read_text())["mutants"]}
        b = {m["id"]: m for m in json.loads(other.read_text())["mutants"]}
        common = sorted(set(a) & set(b))
        same = [i for i in common if a[i]["verdict"] == b[i]["verdict"]]
        killed = [sum(1 for i in common if d[i]["verdict"] == "killed") for d in (a, b)]
        reasons = {i: why(a[i], b[i]) for i in common if a[i]["verdict"] != b[i]["verdict"]}
        other = sum(1 for r in reasons.values() if r == "other")
        print(
            f"| {path.stem} | {len(common)} | {len(same)} | {len(reasons) - other} | {other} | "
            f"{killed[0]} | {killed[1]} |"
        )
        for i in common:
            if a[i]["verdict"] != b[i]["verdict"]:
                m = a[i]
                notes.append(
                    f"- {path.stem} `{i[:12]}` {m['operator']} line {m['line']}, {reasons[i]}: "
                    f"interpreted {m['verdict']} ({m['by'] or '-'}: {m['reason'][:160]}); "
                    f"compiled {b[i]['verdict']} ({b[i]['by'] or '-'}: {b[i]['reason'][:160]})"
                )
    if notes:
        print("\nDisagreements:\n")
        print("\n".join(notes))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
