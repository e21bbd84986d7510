"""Judge some mutants of a finished run again: its survivors after tests were added, or
chosen ones (``mutant-gate rerun RUN --survivors | --mutant ID``).

The kernel file is read again from the recorded path, with the recorded ``--tests``
files (read again too, so tests added to them count) plus any new ones. The original
must pass them all; its time sets the mutants' limit again. Mutants are generated
again and matched to the run's: by id while the file is unchanged, else by operator,
function and the rewritten text (so tests added to the kernel file itself keep the
match). When the jit code itself changed, the mutants no longer match and a new run
is needed, said plainly.

Every other mutant keeps its verdict and details; the result is a new run record
(``rerun`` names the run it came from and what changed), so ``replay`` and
``report`` show it. Tests the writers accepted in the run are not part of the rerun
(keep them with ``--write-tests`` and pass them with ``--tests``); their entries in
``tests`` are carried over for the verdicts that still name them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from mutant_gate.cache import Store

from .errors import BadInput
from .events import BaselineFinished, BaselineStarted, Event, RunFinished, RunStarted
from .pipeline import Run
from .records import Mutant, MutantOutcome, Verdict
from .report import ROW_FIELDS
from .sandbox import Sandbox
from .sandbox.job import Job, JobResult
from .settings import RunSettings

#: Top-level report fields ``build_report`` writes; the rest are stages' extras.
REPORT_FIELDS = {
    "schema_version",
    "run_id",
    "kernel",
    "toolchain",
    "settings",
    "sandbox",
    "tests",
    "baseline",
    "mutants",
    "score",
    "complete",
    "rerun",
}


def _key(operator: str, function: str, before: str, after: str) -> tuple[str, str, str, str]:
    return (operator, function, before, after)


def match_mutants(rows: list[dict], mutants: list[Mutant], same_file: bool) -> dict[str, Mutant]:
    """old id -> the regenerated mutant, for every row; BadInput when the code changed."""
    if same_file:
        by_id = {m.id: m for m in mutants}
        mapping = {r["id"]: by_id[r["id"]] for r in rows if r["id"] in by_id}
    else:
        pool: dict[tuple, list[Mutant]] = {}
        for m in mutants:
            pool.setdefault(_key(m.operator, m.function, m.before, m.after), []).append(m)
        mapping = {}
        for r in rows:
            same = pool.get(_key(r["operator"], r["function"], r["before"], r["after"]))
            if same:
                mapping[r["id"]] = same.pop(0)
    missing = [r["id"] for r in rows if r["id"] not in mapping]
    extra = len(mutants) - len(mapping)
    if missing or extra:
        raise BadInput(
            f"the jit code changed since the run ({len(missing)} of its {len(rows)} mutants "
            f"no longer exist, {extra} are new): start a new run with `mutant-gate run`"
        )
    return mapping


def select(rows: list[dict], survivors: bool, ids: list[str]) -> list[str]:
    """The run's mutant ids to judge again: survivors and/or ``ids`` (unique prefixes)."""
    chosen = [r["id"] for r in rows if survivors and r.get("verdict") == "survived"]
    for wanted in ids:
        hits = [r["id"] for r in rows if r["id"] == wanted] or [
            r["id"] for r in rows if r["id"].startswith(wanted)
        ]
        if not hits:
            raise BadInput(f"--mutant {wanted}: no such mutant in the run")
        if len(hits) > 1:
            raise BadInput(f"--mutant {wanted} is ambiguous: {', '.join(hits[:5])}")
        if hits[0] not in chosen:
            chosen.append(hits[0])
    return chosen


class _FreshRun(Run):
    """A run that reads no cached job result (``--force``) but still stores what arrives."""

    def cached(self, job: Job) -> JobResult | None:
        return None


class Rerun:
    """Drive with ``events()`` as a ``Run``: RunStarted (the chosen mutants), the
    baseline, a MutantFinished per chosen mutant, RunFinished (the new report)."""

    def __init__(
        self,
        report: dict,
        settings: RunSettings,
        sandbox: Sandbox,
        store: Store | None,
        chosen: list[str],
        *,
        force: bool = False,
    ) -> None:
        self.old = report
        self.chosen = chosen
        self.run = (_FreshRun if force else Run)(settings, sandbox, store)
        #: (old id, new id, old verdict, new verdict, by) per judged mutant
        self.changes: list[dict] = []

    def events(self) -> Iterator[Event]:
        run, old = self.run, self.old
        rows = old["mutants"]
        kernel, mutants, generation_s = run.load()
        limited = (old.get("changed_since") or {}).get("functions")
        if limited is not None:  # the run mutated only functions changed since a ref
            mutants = [m for m in mutants if m.function in limited]
        same = kernel.sha256 == old.get("kernel", {}).get("sha256")
        mapping = match_mutants(rows, mutants, same)
        run.run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + kernel.sha256[:8]
        run.kernel = kernel
        run.mutants = [mapping[r["id"]] for r in rows]
        for r in rows:
            new = mapping[r["id"]]
            details = {k: v for k, v in r.items() if k not in ROW_FIELDS}
            if details:
                run.details[new.id] = details
            if r.get("verdict") in {v.value for v in Verdict}:
                run.outcomes[new.id] = MutantOutcome(
                    new.id,
                    Verdict(r["verdict"]),
                    r.get("by"),
                    r.get("reason") or "",
                    r.get("duration_s") or 0.0,
                    bool(r.get("cached")),
                )
        run.report_extra.update({k: v for k, v in old.items() if k not in REPORT_FIELDS})
        targets = [mapping[i] for i in self.chosen]
        yield RunStarted(run.run_id, kernel, tuple(targets), generation_s)
        yield BaselineStarted(run.settings.timeout_s)
        baseline, cached = run.baseline(kernel)
        run.timeout_s = run.mutant_timeout(baseline)
        run.baseline_result, run.generation_s = baseline, generation_s
        yield BaselineFinished(baseline, cached, run.timeout_s)
        before = {mapping[r["id"]].id: (r["id"], r) for r in rows}
        yield from run.run_mutants(kernel, targets)
        for m in targets:
            old_id, row = before[m.id]
            outcome = run.outcomes[m.id]
            self.changes.append(
                {
                    "id": m.id,
                    "was_id": old_id,
                    "was": row.get("verdict"),
                    "now": outcome.verdict.value,
                    "by": outcome.by,
                    "reason": outcome.reason,
                }
            )
        report = run.report()
        self._carry_tests(report, mapping)
        report["rerun"] = {
            "of": old.get("run_id"),
            "kernel_changed": not same,
            "tests": list(run.settings.tests),
            "mutants": self.changes,
        }
        run.save(report)
        yield RunFinished(report)

    def _carry_tests(self, report: dict, mapping: dict[str, Mutant]) -> None:
        """Tests of the old run that the rerun did not run (writers' killer tests), for
        the carried-over verdicts that still name them."""
        names = {t.get("name") for t in report["tests"]}
        verdicts = {r["id"]: r for r in report["mutants"]}
        for test in self.old.get("tests", []):
            if test.get("name") in names:
                continue
            kills = [
                mapping[k].id
                for k in test.get("kills") or []
                if k in mapping and verdicts.get(mapping[k].id, {}).get("verdict") == "killed"
            ]
            if kills:
                report["tests"].append({**test, "kills": kills, "carried_over": True})


def recorded_paths(report: dict, extra_tests: list[str]) -> tuple[str, tuple[str, ...]]:
    """The kernel path and test files a rerun reads, checked to exist."""
    kernel = report.get("kernel", {}).get("path") or (report.get("settings") or {}).get(
        "kernel_path"
    )
    if not kernel:
        raise BadInput("the run records no kernel path")
    if not os.path.isfile(kernel):
        raise BadInput(
            f"the run's kernel file is not here: {kernel} (a run imported from elsewhere?)"
        )
    tests = []
    for path in [*((report.get("settings") or {}).get("tests") or []), *extra_tests]:
        if not os.path.isfile(path):
            raise BadInput(f"test file not found: {path}")
        if os.path.abspath(path) not in {os.path.abspath(t) for t in tests}:
            tests.append(path)
    return kernel, tuple(tests)
