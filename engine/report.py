"""The JSON report (schema documented in README.md) and the score."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .kernel_file import KernelFile
from .records import Mutant, MutantOutcome, Verdict
from .sandbox.job import JobResult
from .testlist import report_tests

SCHEMA_VERSION = 1
#: Verdicts excluded from the adjusted score (each exclusion is listed).
EXCLUDED = (Verdict.NOT_COMPILABLE, Verdict.EQUIVALENT)


def score(outcomes: Sequence[MutantOutcome]) -> dict:
    total = len(outcomes)
    killed = sum(1 for o in outcomes if o.verdict is Verdict.KILLED)
    excluded = [
        {"id": o.mutant_id, "verdict": o.verdict.value} for o in outcomes if o.verdict in EXCLUDED
    ]
    counted = total - len(excluded)
    return {
        "killed": killed,
        "total": total,
        "raw": round(100.0 * killed / total, 2) if total else None,
        "adjusted": round(100.0 * killed / counted, 2) if counted else None,
        "excluded": excluded,
        "by_verdict": dict(Counter(o.verdict.value for o in outcomes)),
    }


#: Fields of a report row that ``mutant_row`` writes itself; anything else is a stage's detail.
ROW_FIELDS = frozenset(
    {
        "id",
        "operator",
        "family",
        "function",
        "line",
        "col",
        "before",
        "after",
        "diff",
        "verdict",
        "by",
        "reason",
        "duration_s",
        "cached",
    }
)


def mutant_row(mutant: Mutant, outcome: MutantOutcome | None, details: dict | None = None) -> dict:
    """One entry of the report's ``mutants`` (also what the TUI shows while a run streams)."""
    return {
        "id": mutant.id,
        "operator": mutant.operator,
        "family": mutant.family,
        "function": mutant.function,
        "line": mutant.line,
        "col": mutant.col,
        "before": mutant.before,
        "after": mutant.after,
        "diff": mutant.diff,
        "verdict": outcome.verdict.value if outcome else "pending",
        "by": outcome.by if outcome else None,
        "reason": outcome.reason if outcome else "",
        "duration_s": round(outcome.duration_s, 4) if outcome else None,
        "cached": outcome.cached if outcome else False,
        **(details or {}),
    }


def build_report(
    *,
    run_id: str,
    kernel: KernelFile,
    mutants: Sequence[Mutant],
    outcomes: dict[str, MutantOutcome],
    details: dict[str, dict] | None = None,
    baseline: JobResult,
    settings: dict,
    toolchain: dict,
    sandbox: dict,
    extra: dict | None = None,
) -> dict:
    rows = [
        mutant_row(mutant, outcomes.get(mutant.id), (details or {}).get(mutant.id))
        for mutant in mutants
    ]
    finished = [outcomes[m.id] for m in mutants if m.id in outcomes]
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "kernel": {
            "path": kernel.path,
            "sha256": kernel.sha256,
            "jit_functions": [f.name for f in kernel.jit_functions],
            "source": kernel.source,
        },
        "toolchain": toolchain,
        "settings": settings,
        "sandbox": sandbox,
        "tests": report_tests(kernel, baseline, mutants, outcomes),
        "baseline": {"duration_s": round(baseline.duration_s, 4), "shims": list(baseline.shims)},
        "mutants": rows,
        "score": score(finished),
        "complete": len(finished) == len(mutants),
        **(extra or {}),
    }


def by_operator(report: dict) -> list[dict]:
    """Summary rows: per operator, counts of each verdict."""
    table: dict[str, Counter] = {}
    family: dict[str, str] = {}
    for row in report["mutants"]:
        table.setdefault(row["operator"], Counter())[row["verdict"]] += 1
        family[row["operator"]] = row["family"]
    return [
        {"operator": op, "family": family[op], "total": sum(c.values()), **c}
        for op, c in sorted(table.items(), key=lambda kv: (family[kv[0]], kv[0]))
    ]
