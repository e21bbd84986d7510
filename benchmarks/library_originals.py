"""Does each op module of a real kernel library pass its original in the interpreter?

Usage:
    python benchmarks/library_originals.py ROOT OUTDIR [--pairs FILE] [--only a,b] [-- extra flags]
        for every op module under ROOT that has a test file (``src/PKG/ops/NAME.py`` with
        ``test/**/test_NAME.py``, or the pairs listed one per line ``MODULE TEST`` in FILE),
        runs ``mutant-gate run MODULE --tests TEST --writer none`` (project mode) from ROOT
        with a fresh cache in OUTDIR, and keeps each run's exit code, last line, JSON report
        and time in ``OUTDIR/results.json``.
    python benchmarks/library_originals.py --table BEFORE_DIR AFTER_DIR
        prints a markdown table of two such runs side by side (e.g. the code before and
        after a change): did the original pass, the one-line reason if not, the shims used.

The library is not part of this repository (fetched or cloned by the user); only the
table is worth keeping. Run it with the interpreter whose mutant-gate you want to
measure (``PYTHONPATH`` pointing at another install measures that one).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

#: A small operator selection: the question is the original's run, and a few mutants
#: show that mutants then get verdicts. ``-- --operators ...`` overrides it.
DEFAULT_FLAGS = ["--writer", "none", "-j", "1", "--operators", "epsilon-change,max-min"]


def find_pairs(root: Path) -> list[tuple[str, str]]:
    pairs = []
    for module in sorted(root.glob("src/*/ops/*.py")):
        if module.name.startswith("_") or module.stem == "utils":
            continue
        tests = sorted(root.glob(f"test*/**/test_{module.stem}.py"))
        if tests:
            pairs.append((str(module.relative_to(root)), str(tests[0].relative_to(root))))
    return pairs


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_all(root: Path, out: Path, pairs: list[tuple[str, str]], extra: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    flags = extra or DEFAULT_FLAGS
    for module, test in pairs:
        name = Path(module).stem
        if name in results:
            continue
        report = out / f"{name}.json"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "mutant_gate.cli", "run", module, "--tests", test,
             "--json", str(report), "--cache-dir", str(out / "cache"), "-q", *flags],
            capture_output=True, text=True, cwd=root,
        )  # fmt: skip
        entry = {
            "module": module,
            "test": test,
            "rc": proc.returncode,
            "wall_s": round(time.perf_counter() - start, 1),
            "line": last_line(proc.stderr) if proc.returncode else last_line(proc.stdout),
        }
        if report.exists():
            data = json.loads(report.read_text())
            entry["mutants"] = len(data["mutants"])
            entry["verdicts"] = sorted({m["verdict"] for m in data["mutants"]})
            entry["shims"] = data["baseline"].get("shims", [])
            entry["original_s"] = data["baseline"].get("duration_s")
        (out / f"{name}.out").write_text(proc.stdout + proc.stderr)
        results[name] = entry
        results_path.write_text(json.dumps(results, indent=1))
        print(f"{name}: rc {proc.returncode}, {entry['wall_s']} s: {entry['line'][:160]}",
              file=sys.stderr)  # fmt: skip


def _cell(entry: dict | None) -> str:
    if entry is None:
        return "not run"
    if entry["rc"] in (0, 1):
        return f"passes ({entry.get('mutants', 0)} mutants judged)"
    line = entry["line"].removeprefix("mutant-gate: error: ")
    line = line.split(": ", 1)[1] if line.startswith(("/", "src/", "test/")) else line
    return "fails: " + line.replace("|", "\\|")[:200]


def table(before: Path, after: Path) -> str:
    old = json.loads((before / "results.json").read_text())
    new = json.loads((after / "results.json").read_text())
    lines = [
        "| module | test | before | after | shims used after |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(set(old) | set(new)):
        entry = new.get(name) or old[name]
        shims = sorted(
            {s.split(":")[0].split(" (")[0] for s in (new.get(name) or {}).get("shims", [])}
        )
        lines.append(
            f"| {name} | {Path(entry['test']).name} | {_cell(old.get(name))} | "
            f"{_cell(new.get(name))} | {'; '.join(shims) or '-'} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        raise SystemExit(__doc__.split("\n\nThe library")[0])
    if argv[:1] == ["--table"]:
        print(table(Path(argv[1]), Path(argv[2])))
        return
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    root, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    if "--pairs" in argv:
        text = Path(argv[argv.index("--pairs") + 1]).read_text()
        pairs = [tuple(line.split()[:2]) for line in text.splitlines() if line.strip()]
    else:
        pairs = find_pairs(root)
    if "--only" in argv:
        only = set(argv[argv.index("--only") + 1].split(","))
        pairs = [p for p in pairs if Path(p[0]).stem in only]
    run_all(root, out, pairs, extra)


if __name__ == "__main__":
    main(sys.argv[1:])
