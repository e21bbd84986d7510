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
    mapping = _match_by_id(rows, mutants) if same_file else _match_by_text(rows, mutants)
    missing = [r["id"] for r in rows if r["id"] not in mapping]
    extra = len(mutants) - len(mapping)
    if missing or extra:
        raise BadInput(
            f"the jit code changed since the run ({len(missing)} of its {len(rows)} mutants "
            f"no longer exist, {extra} are new): start a new run with `mutant-gate run`"
        )
    return mapping


def _match_by_id(rows: list[dict], mutants: list[Mutant]) -> dict[str, Mutant]:
    """old id -> the regenerated mutant of the same id, for the rows that have one."""
    by_id = {m.id: m for m in mutants}
    return {r["id"]: by_id[r["id"]] for r in rows if r["id"] in by_id}


def _match_by_text(rows: list[dict], mutants: list[Mutant]) -> dict[str, Mutant]:
    """old id -> the regenerated mutant of the same operator, function and rewritten text
    (each taken once, in order), for the rows that have one."""
    pool: dict[tuple, list[Mutant]] = {}
    for m in mutants:
        pool.setdefault(_key(m.operator, m.function, m.before, m.after), []).append(m)
    mapping = {}
    for r in rows:
        same = pool.get(_key(r["operator"], r["function"], r["before"], r["after"]))
        if same:
            mapping[r["id"]] = same.pop(0)
    return mapping


def select(rows: list[dict], survivors: bool, ids: list[str]) -> list[str]:
    """The run's mutant ids to judge again: survivors and/or ``ids`` (unique prefixes)."""
    chosen = [r["id"] for r in rows if survivors and r.get("verdict") == "survived"]
    for wanted in ids:
        hit = _mutant_named(rows, wanted)
        if hit not in chosen:
            chosen.append(hit)
    return chosen


def _mutant_named(rows: list[dict], wanted: str) -> str:
    """The one run's mutant id ``--mutant wanted`` names: the id itself, else the one id
    it begins; BadInput when none or several."""
    hits = [r["id"] for r in rows if r["id"] == wanted] or [
        r["id"] for r in rows if r["id"].startswith(wanted)
    ]
    if not hits:
        raise BadInput(f"--mutant {wanted}: no such mutant in the run")
    if len(hits) > 1:
        raise BadInput(f"--mutant {wanted} is ambiguous: {', '.join(hits[:5])}")
    return hits[0]


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
        self._carry_over(ctx)
        return [self.mapping[i] for i in self.chosen]

    def _carry_over(self, ctx: StageContext) -> None:
        """Restores each old verdict, under its mutant's new id, and the old run's sections."""
        old = self.old
        for r in old["mutants"]:
            ctx.ledger.restore(self.mapping[r["id"]].id, r, str(old.get("run_id") or ""))
        for key, value in old.items():
            if key not in REPORT_FIELDS and key in RUN_SECTIONS:
                ctx.ledger.put_section(key, value)

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
        names = {t.get("name") for t in report["tests"]}
        verdicts = {r["id"]: r for r in report["mutants"]}
        for test in self.old.get("tests", []):
            if test.get("name") in names:
                continue
            kills = self._still_killed(test, verdicts)
            if kills:
                report["tests"].append({**test, "kills": kills, "carried_over": True})

    def _still_killed(self, test: dict, verdicts: dict[str, dict]) -> list[str]:
        """The new ids of the mutants an old ``test`` killed that the report still has
        killed (``verdicts``: its rows by id)."""
        mapping = self.mapping
        return [
            mapping[k].id
            for k in test.get("kills") or []
            if k in mapping and verdicts.get(mapping[k].id, {}).get("verdict") == "killed"
        ]


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
    kernel = _recorded_kernel(report)
    tests = []
    for path in [*((report.get("settings") or {}).get("tests") or []), *extra_tests]:
        if not os.path.isfile(split_node_id(path)[0]):
            raise BadInput(f"test file not found: {split_node_id(path)[0]}")
        if os.path.abspath(path) not in {os.path.abspath(t) for t in tests}:
            tests.append(path)
    return kernel, tuple(tests)


def _recorded_kernel(report: dict) -> str:
    """The kernel path the run records, checked to exist."""
    kernel = report.get("kernel", {}).get("path") or (report.get("settings") or {}).get(
        "kernel_path"
    )
    if not kernel:
        raise BadInput("the run records no kernel path")
    if not os.path.isfile(kernel):
        raise BadInput(
            f"the run's kernel file is not here: {kernel} (a run imported from elsewhere?)"
        )
    return kernel


# -- which run `latest` means -------------------------------------------------------------
def same_file(a: str | None, b: str | None) -> bool:
    return bool(a and b) and os.path.realpath(a) == os.path.realpath(b)  # type: ignore[arg-type]


def kernel_of(record: dict) -> str:
    """The kernel file a run record is of (its path as recorded)."""
    report = record.get("report") or {}
    return record.get("kernel") or (report.get("kernel") or {}).get("path") or ""


def kernels_of_tests(tests: list[str], records: list[dict]) -> list[str]:
    """The kernel files ``tests`` belong to, as recorded runs name them: the kernels of
    the runs that ran a test file (``--tests``, the project's tests), else the kernel
    files it imports (``imported_kernels``). Real paths, in the order found."""
    found: dict[str, None] = {}
    for test in tests:
        path = split_node_id(test)[0]
        ran = [
            kernel_of(r)
            for r in records
            if any(same_file(split_node_id(t)[0], path) for t in _recorded_tests(r))
        ]
        for kernel in ran or imported_kernels(path, [kernel_of(r) for r in records]):
            found.setdefault(os.path.realpath(kernel))
    return list(found)


def _recorded_tests(record: dict) -> list[str]:
    return list((record.get("settings") or {}).get("tests") or [])


def imported_kernels(test: str, kernels: list[str]) -> list[str]:
    """The kernel files a test file imports, read off its import lines (no import runs):
    a module that lies beside it (or under the working directory) and holds a
    ``@triton.jit`` kernel, or one whose dotted path ends one of ``kernels`` (the
    recorded runs' kernel files: ``from pkg.ops.softmax import f`` names
    ``.../pkg/ops/softmax.py``)."""
    import ast

    try:
        with open(test, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return []
    found: dict[str, None] = {}
    for candidate in _module_files(tree):
        for kernel in _kernel_files(candidate, os.path.dirname(os.path.abspath(test)), kernels):
            found.setdefault(kernel)
    return list(found)


def _module_files(tree) -> list[str]:
    """``a/b.py`` for each module an absolute import names (``from a import b``: both
    ``a.py`` and ``a/b.py``, as ``b`` may be a module of package ``a``)."""
    import ast

    names = [name for node in ast.walk(tree) for name in _imported_names(node)]
    return [name.replace(".", "/") + ".py" for name in dict.fromkeys(names)]


def _imported_names(node) -> list[str]:
    """The dotted names an absolute import ``node`` may name modules by (``from a import
    b``: ``a`` and ``a.b``); none for any other node."""
    import ast

    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return []


def _kernel_files(candidate: str, beside: str, kernels: list[str]) -> list[str]:
    for root in (beside, os.getcwd()):
        path = os.path.join(root, candidate)
        if os.path.isfile(path) and _holds_a_kernel(path):
            return [os.path.realpath(path)]
    tail = os.sep + candidate.replace("/", os.sep)
    return sorted({os.path.realpath(k) for k in kernels if os.path.realpath(k).endswith(tail)})


def _holds_a_kernel(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return "triton.jit" in fh.read()
    except (OSError, UnicodeDecodeError):
        return False


def latest_run(
    records: list[dict], kernel: str | None, tests: list[str], where: str = "the cache"
) -> tuple[dict, str]:
    """The run ``latest`` means for a rerun, and the line that says how it was chosen
    ("" when there was no choice to make): the newest finished run of the kernel file
    named, else of the kernel file the ``tests`` belong to (``kernels_of_tests``), else
    the newest finished run, said so when ``where`` (the cache) holds runs of several
    files. ``records``: the cache's run records, oldest first. BadInput when none fits."""
    finished = [r for r in records if r.get("report")]
    if not finished:
        raise BadInput(f"no finished run in {where}: run `mutant-gate run FILE` first")
    if kernel is not None:
        return _newest_of([kernel], finished, f"no finished run of {kernel} in {where}"), ""
    wanted = kernels_of_tests(tests, finished) if tests else []
    names = ", ".join(os.path.basename(t) for t in tests)
    if len(wanted) == 1:
        return _newest_of_theirs(wanted[0], tests, finished, where)
    return _newest_of_any(wanted, finished, names)


def _newest_of_theirs(
    kernel: str, tests: list[str], finished: list[dict], where: str
) -> tuple[dict, str]:
    """``latest`` when the ``tests`` belong to one kernel file: its newest run, and the
    line saying so; BadInput when it has none."""
    names = ", ".join(os.path.basename(t) for t in tests)
    of = f"the kernel file {names} {'imports' if len(tests) == 1 else 'import'}"
    missing = f"no finished run of {kernel} ({of}) in {where}"
    record = _newest_of([kernel], finished, missing)
    return record, f"rerun latest: took run {record['run_id']} of {os.path.basename(kernel)}, {of}"


def _newest_of_any(wanted: list[str], finished: list[dict], names: str) -> tuple[dict, str]:
    """``latest`` when the tests (``names``) belong to several kernel files, or to none
    found: the newest run of any of them (of any file when none), and the line saying so
    ("" when the cache holds runs of one kernel file only)."""
    pool = [r for r in finished if any(same_file(kernel_of(r), k) for k in wanted)] or finished
    record = pool[-1]
    if not wanted and len({os.path.realpath(kernel_of(r)) for r in finished}) == 1:
        return record, ""  # one kernel file in the cache: nothing to choose
    return record, _took_any(record, wanted, names)


def _took_any(record: dict, wanted: list[str], names: str) -> str:
    """The line saying ``latest`` took ``record``, the newest run of the kernel files the
    tests (``names``) import (``wanted``), or of any file where they import none found."""
    took = f"rerun latest: took run {record['run_id']} of {os.path.basename(kernel_of(record))}"
    if wanted:
        files = ", ".join(os.path.basename(k) for k in wanted)
        return (
            f"{took}, the newest run of the kernel files {names} import ({files}); "
            "name one to choose: `rerun latest FILE`"
        )
    return f"{took} (the newest run; name a kernel file to choose: `rerun latest FILE`)"


def _newest_of(kernels: list[str], finished: list[dict], missing: str) -> dict:
    mine = [r for r in finished if any(same_file(kernel_of(r), k) for k in kernels)]
    if not mine:
        rel = os.path.relpath(kernels[0])
        raise BadInput(
            f"{missing}: run `mutant-gate run {kernels[0] if rel.startswith('..') else rel}` first"
        )
    return mine[-1]
