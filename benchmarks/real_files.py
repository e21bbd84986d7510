"""Run mutant-gate on real kernel files, unmodified, and tabulate what came of each.

Usage:
    python benchmarks/real_files.py DIR OUTDIR [-- extra run flags]
        runs ``mutant-gate run`` on every ``*.py`` in DIR (sorted) with a fresh cache in
        OUTDIR, one file at a time, keeps each JSON report and output, and prints a
        markdown table: mutants, verdicts, how they were killed, the own check's
        judgement, the shims the file needed and the wall time.
    python benchmarks/real_files.py --table OUTDIR
        prints the table again from the reports kept there.

The files are not part of this repository (the official Triton tutorials, fetched
by the user): only the table is worth keeping.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from pathlib import Path


def run_all(folder: Path, out: Path, extra: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    times = {}
    for path in sorted(folder.glob("*.py")):
        report = out / f"{path.stem}.json"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "mutant_gate.cli", "run", str(path), "--json",
             str(report), "--cache-dir", str(out / "cache"), "-q", *extra],
            capture_output=True, text=True, cwd=out,
        )  # fmt: skip
        times[path.stem] = {"wall_s": round(time.perf_counter() - start, 1), "rc": proc.returncode}
        (out / f"{path.stem}.out").write_text(proc.stdout + proc.stderr)
        print(f"{path.name}: rc {proc.returncode}, {times[path.stem]['wall_s']} s", file=sys.stderr)
    (out / "times.json").write_text(json.dumps(times, indent=1))


def table(out: Path) -> str:
    times = json.loads((out / "times.json").read_text())
    lines = [
        "| file | mutants | killed | survived | other | killed by | own check asserts | "
        "shims | original s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for stem, timing in times.items():
        report_path = out / f"{stem}.json"
        if not report_path.exists():
            tail = (out / f"{stem}.out").read_text().strip().splitlines()[-1:]
            lines.append(
                f"| {stem} | rc {timing['rc']}: {' '.join(tail)} |||||||| {timing['wall_s']} |"
            )
            continue
        r = json.loads(report_path.read_text())
        verdicts = collections.Counter(m["verdict"] for m in r["mutants"])
        by = collections.Counter((m["by"] or "").split(":")[0] for m in r["mutants"] if m["by"])
        other = {k: v for k, v in verdicts.items() if k not in ("killed", "survived")}
        own = r.get("own_check", {})
        shims = "; ".join(s.split(":")[0] for s in r["baseline"].get("shims", []))
        lines.append(
            f"| {stem} | {len(r['mutants'])} | {verdicts['killed']} | {verdicts['survived']} | "
            f"{', '.join(f'{k} {v}' for k, v in other.items()) or '-'} | "
            f"{', '.join(f'{k} {v}' for k, v in by.most_common())} | "
            f"{'yes' if own.get('asserts') else 'no'} | {shims} | "
            f"{r['baseline']['duration_s']:.2f} | {timing['wall_s']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--table"]:
        print(table(Path(args[1])))
    else:
        extra = args[3:] if args[2:3] == ["--"] else []
        run_all(Path(args[0]).resolve(), Path(args[1]).resolve(), extra)
        print(table(Path(args[1]).resolve()))
