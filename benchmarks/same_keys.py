"""Same verdicts and same cache keys before and after a change, on the same files.

Usage:
    python benchmarks/same_keys.py OUTDIR FILE... --before SITE [--after SITE] [-- FLAGS]

For each file, in one run: ``mutant-gate run FILE`` with the code installed at ``--before``
(``pip install --no-deps --target SITE OLDTREE``) into a fresh cache, then the same
command with the code after (``--after``, default this tree as installed) into that same
cache. Where the change keeps every job's cache key, the second run serves every job from
the cache; its report says how many it ran (``cached`` per row, and the baseline's). The
table: mutants, verdicts that differ, mutant rows the second run did not take from the
cache, and whether the original's run came from it. FLAGS (default ``--writer none``)
go to both runs: the writers write tests the cache keys then depend on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def run(file: Path, out: Path, tag: str, cache: Path, site: str | None, flags: list[str]) -> dict:
    report = out / f"{file.stem}.{tag}.json"
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-m", "mutant_gate.cli", "run", str(file), "--json", str(report),
         "--cache-dir", str(cache), "-q", *flags],
        capture_output=True, text=True, cwd=out, env=env,
    )  # fmt: skip
    (out / f"{file.stem}.{tag}.out").write_text(proc.stdout + proc.stderr)
    if not report.exists():
        raise SystemExit(f"{file}: {tag} run wrote no report:\n{proc.stdout}{proc.stderr}")
    return json.loads(report.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--before", required=True)
    parser.add_argument("--after")
    parser.add_argument("--flags", default="--writer none")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [
        "| file | mutants | verdicts differing | rows not from the cache | original from the cache |",
        "|---|---|---|---|---|",
    ]
    same = True
    for file in args.files:
        file = file.resolve()
        cache = args.out / f"cache-{file.stem}"
        flags = args.flags.split()
        before = run(file, args.out, "before", cache, args.before, flags)
        after = run(file, args.out, "after", cache, args.after, flags)
        was = {m["id"]: (m["verdict"], m["by"]) for m in before["mutants"]}
        now = {m["id"]: (m["verdict"], m["by"]) for m in after["mutants"]}
        differing = sorted(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))
        fresh = [m["id"] for m in after["mutants"] if not m.get("cached")]
        original = after["sandbox"].get("original_s", 0) == 0
        same &= not differing and not fresh and original
        lines.append(
            f"| {file.name} | {len(now)} | {len(differing)} "
            f"{'(' + ', '.join(differing[:4]) + ')' if differing else ''} | {len(fresh)} | "
            f"{'yes' if original else 'no'} |"
        )
        print(f"{file.name}: done", file=sys.stderr)
    text = "\n".join(lines) + "\n"
    (args.out / "same_keys.md").write_text(text)
    print(text)
    print("same verdicts and cache keys on every file" if same else "DIFFERENT")


if __name__ == "__main__":
    main()
