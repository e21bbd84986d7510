"""Do the operators' mutants compile? The share of planted mutants, per operator.

Run: ``python benchmarks/operators.py [-j N] [--targets sm_75] [-v] [FILE ...]``
(default: every ``examples/*.py``). For each file it plants every mutant, captures
the original's launch signatures with a traced run of its own check, and compiles
every mutant with them through the compile-check's sandbox job (no GPU needed),
whatever its verdict would be. It prints, per operator and in all: mutants, how
many compile for every target, how many the compiler rejects, and how many could
not be judged (a mutant in a function no launched kernel reaches, or a harness
failure); the share is compiled / judged. ``-v`` lists each rejected mutant with
the compiler's line.

An operator whose mutants often fail to compile plants bugs no GPU would ever run:
they cost a sandbox job each and end as ``not_compilable``.
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

from mutant_gate.engine.checks import parse_targets
from mutant_gate.engine.checks.compile_check import compile_check_stage
from mutant_gate.engine.jobs import JobRunner
from mutant_gate.engine.pipeline import load
from mutant_gate.engine.sandbox.local import LocalSandbox
from mutant_gate.engine.settings import RunSettings, WriterSettings
from mutant_gate.engine.stage import StageContext
from mutant_gate.engine.verdicts import Ledger

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

OK, REJECTED, UNJUDGED = "compiles", "rejected", "unjudged"


def judge_file(
    path: Path, box: LocalSandbox, workers: int, targets: tuple[str, ...]
) -> tuple[list[tuple[str, str, str]], str | None]:
    """[(operator, outcome, note)] for every mutant of ``path``, and why the check was
    skipped (None when it ran)."""
    settings = RunSettings(
        kernel_path=str(path),
        workers=workers,
        use_cache=False,
        writers=WriterSettings(writer="none"),
        compile_check=True,
        compile_targets=targets,
    )
    kernel, mutants, _, _ = load(settings)
    ledger = Ledger()
    ctx = StageContext(
        settings, JobRunner(box, None, settings.mode, workers), ledger, kernel, mutants
    )
    for _ in compile_check_stage(ctx, mutants):
        pass
    skipped = ledger.sections().get("checks", {}).get("compile", {}).get("skipped")
    rows = []
    for mutant in mutants:
        per_target = ledger.details(mutant.id).get("compile") or {}
        oks = [row["ok"] for row in per_target.values()]
        if oks and all(ok is True for ok in oks):
            rows.append((mutant.operator, OK, ""))
        elif any(ok is False for ok in oks):
            message = next(r["message"] for r in per_target.values() if r["ok"] is False)
            rows.append((mutant.operator, REJECTED, f"{path.name}:{mutant.line} {message}"))
        else:
            note = next((r["message"] for r in per_target.values()), skipped or "no result")
            rows.append((mutant.operator, UNJUDGED, f"{path.name}:{mutant.line} {note}"))
    return rows, skipped


def share(counts: collections.Counter) -> str:
    judged = counts[OK] + counts[REJECTED]
    return f"{100 * counts[OK] / judged:5.1f}%" if judged else "  n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--targets", default="sm_75")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    files = args.files or sorted(EXAMPLES.glob("*.py"))
    targets = parse_targets(args.targets)
    per_operator: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    notes: list[str] = []
    start = time.perf_counter()
    with LocalSandbox(args.jobs) as box:
        box.start()
        for path in files:
            rows, skipped = judge_file(path, box, args.jobs, targets)
            counts = collections.Counter(outcome for _, outcome, _ in rows)
            print(
                f"{path.name}: {len(rows)} mutants, {counts[OK]} compile, "
                f"{counts[REJECTED]} rejected, {counts[UNJUDGED]} unjudged"
                + (f" (skipped: {skipped})" if skipped else "")
            )
            for operator, outcome, note in rows:
                per_operator[operator][outcome] += 1
                if outcome != OK:
                    notes.append(f"  {operator} {outcome}: {note}")
    total: collections.Counter = collections.Counter()
    print(f"\n{'operator':24} {'mutants':>7} {'compile':>7} {'rejected':>8} {'unjudged':>8} share")
    for operator, counts in sorted(per_operator.items()):
        total.update(counts)
        print(
            f"{operator:24} {sum(counts.values()):7} {counts[OK]:7} {counts[REJECTED]:8} "
            f"{counts[UNJUDGED]:8} {share(counts)}"
        )
    print(
        f"{'all':24} {sum(total.values()):7} {total[OK]:7} {total[REJECTED]:8} "
        f"{total[UNJUDGED]:8} {share(total)}  ({', '.join(targets)}, "
        f"{time.perf_counter() - start:.0f} s)"
    )
    if args.verbose and notes:
        print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
