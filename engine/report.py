"""The JSON report, built here and nowhere else, from the verdict ledger (schema in
README.md), and the score.

Each row holds the mutant, its verdict, and the sections the stages recorded in the
ledger (declared in ``verdicts.ROW_SECTIONS``); the top level holds the run's
sections (``verdicts.RUN_SECTIONS``). ``engine/formats/`` renders this report into
other formats; it never decides anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from .job import JobResult
from .kernel_file import KernelFile
from .records import Mutant, MutantOutcome
from .survivor_kinds import classify, counts
from .testlist import WRITTEN, baseline_cases, report_tests
from .verdicts import Ledger
from .vocabulary import EXCLUDED, PENDING, TEST_PREFIX, By, Verdict

#: 2: rows carry ``changes`` (every verdict change: stage, was, now, evidence).
#: 3: ``score`` counts the user's own tests; ``score.with_written`` adds the written ones.
SCHEMA_VERSION = 3
#: Top-level fields ``build_report`` writes itself; the rest are the ledger's sections.
REPORT_FIELDS = frozenset(
    {
        "schema_version",
        "run_id",
        "kernel",
        "toolchain",
        "settings",
        "sandbox",
        "tests",
        "baseline",
        "bound",  # check_bound: the run's time against the sum of its check times
        "mutants",
        "score",
        "complete",
        "rerun",
        "survivor_kinds",  # survivors by what the diff-oracle showed (engine/survivor_kinds)
        "interpreter",  # the original's launches: which executor ran them (harness/batched)
    }
)


def written_names(tests: Sequence[dict]) -> frozenset[str]:
    """The names (``test:NAME``'s NAME) of the tests mutant-gate wrote (probe, stage 1,
    stage 2) among a report's ``tests``."""
    return frozenset(
        str(t.get("name", "")).split("::")[-1] for t in tests if t.get("origin") in WRITTEN
    )


def written_kill(row: dict, written: frozenset[str]) -> bool:
    """True where a killed row owes its kill to mutant-gate, not to the user's tests: a
    test the tool wrote (``written``: its names), or a check of the tool's own that the
    user's tests do not run (the big-index replay). Kills by the own check, a ``--tests``
    file, the project's tests, and the bounds check, a crash or a timeout while those ran
    are the user's."""
    if str(row.get("verdict")) != Verdict.KILLED.value:
        return False
    by = row.get("by") or ""
    if by == By.BIG_INDEX.value:
        return True
    return by.startswith(TEST_PREFIX) and by[len(TEST_PREFIX) :] in written


def score(rows: Sequence[dict], written: frozenset[str] = frozenset()) -> dict:
    """The score of judged report rows (``id``, ``verdict``, ``by``): what the user's own
    tests kill (the top-level fields), and beside it ``with_written``: what they kill
    together with the tests mutant-gate wrote (``written``: those tests' names) and its
    own checks. Every exclusion from the adjusted scores is listed; both scores exclude
    the same mutants (an exclusion is about the mutant, not the test).

    Survivors the baseline file accepts (a row's ``accepted``) are left out of the
    adjusted score's denominator and listed in ``accepted``: never counted as killed.
    They are in ``excluded`` too (``verdict`` survived, ``accepted`` true): every mutant
    the adjusted score leaves out is there, so a line that lists it names them.
    ``by_verdict`` counts the rows' verdicts as they stand (written tests' kills
    included)."""
    verdicts = [(row["id"], str(row["verdict"])) for row in rows]
    total = len(verdicts)
    killed = sum(1 for _, v in verdicts if v == Verdict.KILLED.value)
    added = [row["id"] for row in rows if written_kill(row, written)]
    accepted = _accepted_survivors(rows)
    excluded = _excluded(verdicts, accepted)
    counted = total - len(excluded)
    yours = killed - len(added)
    return {
        "of": "your tests",
        "killed": yours,
        "total": total,
        "raw": _percent(yours, total),
        "adjusted": _percent(yours, counted),
        "excluded": excluded,
        **({"accepted": accepted} if accepted else {}),  # only with --accepted's survivors
        "by_verdict": dict(Counter(v for _, v in verdicts)),
        "with_written": {
            "killed": killed,
            "raw": _percent(killed, total),
            "adjusted": _percent(killed, counted),
            "added": added,
        },
    }


def _accepted_survivors(rows: Sequence[dict]) -> list[dict]:
    """The survivors the baseline file accepts, each with the file's reason."""
    return [
        {"id": row["id"], "reason": (row.get("accepted") or {}).get("reason", "")}
        for row in rows
        if str(row["verdict"]) == Verdict.SURVIVED.value and row.get("accepted")
    ]


def _excluded(verdicts: list[tuple[str, str]], accepted: list[dict]) -> list[dict]:
    """The mutants the adjusted scores leave out: the excluded verdicts', then the
    accepted survivors."""
    excluded_values = {v.value for v in EXCLUDED}
    excluded = [{"id": i, "verdict": v} for i, v in verdicts if v in excluded_values]
    return excluded + [
        {"id": a["id"], "verdict": Verdict.SURVIVED.value, "accepted": True} for a in accepted
    ]


def _percent(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


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
        "verdict": outcome.verdict.value if outcome else PENDING,
        "by": outcome.by if outcome else None,
        "reason": outcome.reason if outcome else "",
        "duration_s": round(outcome.duration_s, 4) if outcome else None,
        "cached": outcome.cached if outcome else False,
        **{k: v for k, v in (details or {}).items() if k != "survivor"},
        **_kind(outcome, details),
    }


def _kind(outcome: MutantOutcome | None, details: dict | None) -> dict:
    """A survivor's ``survivor`` field: what the diff-oracle and the tolerance check
    showed of it."""
    details = details or {}
    kind = (
        classify(outcome.verdict.value, details.get("oracle"), details.get("tolerance"))
        if outcome
        else None
    )
    return {"survivor": kind} if kind is not None else {}


def build_report(
    *,
    run_id: str,
    kernel: KernelFile,
    mutants: Sequence[Mutant],
    ledger: Ledger,
    baseline: JobResult,
    settings: dict,
    toolchain: dict,
    sandbox: dict,
) -> dict:
    outcomes = ledger.outcomes()
    rows = [mutant_row(m, outcomes.get(m.id), ledger.details(m.id)) for m in mutants]
    tests = report_tests(kernel, baseline, mutants, outcomes)
    judged = [r for r in rows if r["verdict"] != PENDING]
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
        "tests": tests,
        "baseline": {
            "duration_s": round(baseline.duration_s, 4),
            # what the mutants' limits are reckoned from (absent: not measured)
            **({"cpu_s": round(baseline.cpu_s, 4)} if baseline.cpu_s > 0 else {}),
            "shims": list(baseline.shims),
            "cases": baseline_cases(baseline),
            **({"spread": baseline.extra["spread"]} if "spread" in baseline.extra else {}),
        },
        "mutants": rows,
        "score": score(judged, written_names(tests)),
        "complete": all(m.id in outcomes for m in mutants),
        "survivor_kinds": counts(judged),
        **interpreter_section(baseline),
        **ledger.sections(),
    }


def interpreter_section(baseline: JobResult) -> dict:
    """``interpreter``: the executor the original's interpreted launches ran in, per kernel
    launches by executor and why any fell back to Triton's loop (``harness/batched.py``)."""
    found = baseline.extra.get("interpreter")
    return {"interpreter": found} if isinstance(found, dict) else {}


def check_bound(report: dict) -> dict | None:
    """How fast this run could have been on its workers: the original's runs (alone,
    first) plus the mutants' jobs run now (cached ones cost nothing) shared evenly over
    the workers. ``wall_s`` beside it is what the run took; the gap is everything else
    (start-up, the pool's warm-up, writers and checks, an uneven last round). None for a
    report that does not record its wall time."""
    sandbox = report.get("sandbox") or {}
    if "wall_s" not in sandbox:
        return None
    workers = max(1, int(sandbox.get("workers") or 1))
    original = float(sandbox.get("original_s") or 0.0)
    jobs = sum(
        float(row.get("duration_s") or 0.0) for row in report["mutants"] if not row.get("cached")
    )
    return {
        "original_s": round(original, 2),
        "jobs_s": round(jobs, 2),
        "workers": workers,
        "bound_s": round(original + jobs / workers, 2),
        # the mutants' phase as it ran, start to end (older reports: not recorded)
        **({"mutants_wall_s": sandbox["mutants_wall_s"]} if "mutants_wall_s" in sandbox else {}),
        "wall_s": sandbox["wall_s"],
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
