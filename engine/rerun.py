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
from collections.abc import Iterator

from mutant_gate.cache import Store

from .errors import BadInput
from .events import Event
from .kernel_file import split_node_id
from .pipeline import Plan, Run
from .records import Mutant
from .report import REPORT_FIELDS
from .sandbox import Sandbox
from .settings import RunSettings
from .stage import Stage, StageContext
from .verdicts import RUN_SECTIONS


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


class RerunPlan(Plan):
    """The mutants of a past run, matched to today's file; the chosen ones are judged
    again (stage ``rerun`` in the ledger), every other verdict and section is carried
    over. No writer, no check and no own-check judgement runs again."""

    stage = "rerun"
    judge_own_check = False
    writers = False

    def __init__(self, report: dict, chosen: list[str]) -> None:
        self.old = report
        self.chosen = chosen
        self.mapping: dict[str, Mutant] = {}
        self.same_file = True

    def choose(self, ctx: StageContext, mutants: list[Mutant]) -> list[Mutant]:
        old, rows = self.old, self.old["mutants"]
        limited = (old.get("changed_since") or {}).get("functions")
        if limited is not None:  # the run mutated only functions changed since a ref
            mutants = [m for m in mutants if m.function in limited]
        self.same_file = ctx.kernel.sha256 == old.get("kernel", {}).get("sha256")
        self.mapping = match_mutants(rows, mutants, self.same_file)
        ctx.set_mutants([self.mapping[r["id"]] for r in rows])
        for r in rows:
            ctx.ledger.restore(self.mapping[r["id"]].id, r, str(old.get("run_id") or ""))
        for key, value in old.items():
            if key not in REPORT_FIELDS and key in RUN_SECTIONS:
                ctx.ledger.put_section(key, value)
        return [self.mapping[i] for i in self.chosen]

    def finish(self, ctx: StageContext, report: dict) -> None:
        rows = {r["id"]: r for r in self.old["mutants"]}
        changes = []
        for old_id in self.chosen:
            new = self.mapping[old_id]
            outcome = ctx.ledger.outcome(new.id)
            assert outcome is not None
            changes.append(
                {
                    "id": new.id,
                    "was_id": old_id,
                    "was": rows[old_id].get("verdict"),
                    "now": outcome.verdict.value,
                    "by": outcome.by,
                    "reason": outcome.reason,
                }
            )
        self._carry_tests(report)
        report["rerun"] = {
            "of": self.old.get("run_id"),
            "kernel_changed": not self.same_file,
            "tests": list(ctx.settings.tests),
            "mutants": changes,
        }

    def _carry_tests(self, report: dict) -> None:
        """Tests of the old run that the rerun did not run (writers' killer tests), for
        the carried-over verdicts that still name them."""
        mapping = self.mapping
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


def start_rerun(
    report: dict,
    settings: RunSettings,
    sandbox: Sandbox,
    store: Store | None,
    chosen: list[str],
    *,
    force: bool = False,
    writer: str | None = None,
) -> Run:
    """The same driver as a run, with the rerun's plan (``--force``: no cached result).
    ``writer``: the probe (``probe``), or the probe then stage 2 (``llm``), on the chosen
    mutants that still survive, as the explorer's stage 2 does."""
    run = Run(settings, sandbox, store, plan=RerunPlan(report, chosen), fresh=force)
    if writer is not None:

        def write(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
            return run.run_writers([m.id for m in survivors], model=writer == "llm")

        run.extra_stages = (Stage(f"rerun-{writer}", write),)
    return run


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
        if not os.path.isfile(split_node_id(path)[0]):
            raise BadInput(f"test file not found: {split_node_id(path)[0]}")
        if os.path.abspath(path) not in {os.path.abspath(t) for t in tests}:
            tests.append(path)
    return kernel, tuple(tests)
