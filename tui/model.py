"""What the explorer shows, as plain data: one run's rows, their states, marks and filters.

A live run and a replay fill the same model (a live run row by row as results
stream in, a replay from a finished report), so every widget reads one thing
and replay looks exactly like the end of a live run. No Textual here: the
model is tested and benchmarked on its own.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace

from mutant_gate.engine.formats.words import tolerance_line_words, tolerance_view
from mutant_gate.engine.report import score, written_kill, written_names
from mutant_gate.engine.vocabulary import EXCLUDED, ORDER, PENDING, RUNNING, Verdict

#: The states that are verdicts (a cell's other states: ``pending``, ``running``).
VERDICTS = frozenset(v.value for v in ORDER)
_EXCLUDED = frozenset(v.value for v in EXCLUDED)
GROUPINGS = ("function", "family")
#: a library's report (rows that name their ``file``): its modules first
LIBRARY_GROUPINGS = ("module", "function", "family")
#: a survivor's kind (the report row's ``survivor``), in words, in the order the kinds are
#: counted (test gaps first); "not checked" says nothing
KIND_WORDS = {
    "hidden_by_tolerance": "hidden by tolerance",
    "differs": "outputs differ",
    "identical": "no difference observed",
}


def survivor_kind(row: dict) -> str | None:
    """``hidden_by_tolerance``, ``differs`` or ``identical``: what the checks showed of
    a survivor (None where none did, or the mutant is no survivor)."""
    kind = row.get("survivor")
    name = kind.get("kind") if isinstance(kind, dict) else None
    return name if name in KIND_WORDS and row.get("verdict") == "survived" else None


@dataclass(frozen=True)
class Filters:
    """Which mutants the grid shows; an empty set means "any"."""

    verdicts: frozenset[str] = frozenset()
    operators: frozenset[str] = frozenset()  # operator or family names
    functions: frozenset[str] = frozenset()
    text: str = ""
    modules: frozenset[str] = frozenset()  # a library's: the rows' ``file``

    @property
    def active(self) -> bool:
        return bool(self.verdicts or self.operators or self.functions or self.modules or self.text)

    def with_text(self, text: str) -> Filters:
        return replace(self, text=text.strip())

    def describe(self) -> str:
        parts = []
        if self.verdicts:
            parts.append("verdict " + "|".join(sorted(self.verdicts)))
        if self.operators:
            parts.append("operator " + "|".join(sorted(self.operators)))
        if self.functions:
            parts.append("function " + "|".join(sorted(self.functions)))
        if self.modules:
            parts.append("module " + "|".join(sorted(os.path.basename(m) for m in self.modules)))
        if self.text:
            parts.append(f'"{self.text}"')
        return ", ".join(parts)


@dataclass
class Score:
    """The header's numbers: the engine's score, kept incrementally while results stream."""

    done: int = 0
    total: int = 0
    killed: int = 0
    #: of ``killed``, those only a test mutant-gate wrote (or a check of its own) killed
    written: int = 0
    excluded: int = 0
    accepted: int = 0  # survivors the baseline file accepts: out of the adjusted score
    counts: Counter = field(default_factory=Counter)

    @property
    def yours(self) -> int:
        """Killed by the user's own tests (the score's killed)."""
        return self.killed - self.written

    @property
    def raw(self) -> float | None:
        return round(100.0 * self.yours / self.done, 2) if self.done else None

    @property
    def adjusted(self) -> float | None:
        return self._of(self.yours)

    @property
    def with_written(self) -> float | None:
        """The adjusted score with the tests mutant-gate wrote."""
        return self._of(self.killed)

    def _of(self, killed: int) -> float | None:
        counted = self.done - self.excluded - self.accepted
        return round(100.0 * killed / counted, 2) if counted else None


class RunModel:
    """Rows of one run (report-shaped dicts), each mutant's state, and the marked survivors."""

    def __init__(self) -> None:
        self.run_id = ""
        self.kernel_path = ""
        #: The report's top-level fields except ``mutants`` (tests, tokens, settings...).
        self.report: dict = {}
        #: the engine's last whole report (a finished run's, or a replay's)
        self.engine_report: dict | None = None
        self.rows: list[dict] = []
        self.index: dict[str, int] = {}
        self.states: list[str] = []
        self.marked: set[str] = set()
        self.score = Score()
        self.finished = False
        #: why the run stopped before every mutant had a result (None: it did not)
        self.stopped: str | None = None
        #: survivors accepted in this session (``a``), by id: a later engine row (a
        #: rerun, stage 2, the run's end) does not know them, and must not drop them
        self.accepted_here: dict[str, dict] = {}
        self._haystack: dict[int, str] = {}

    # -- filling -------------------------------------------------------------
    @classmethod
    def from_report(cls, report: dict) -> RunModel:
        model = cls()
        model.load(report)
        return model

    def load(self, report: dict) -> None:
        """Show a finished (or saved) report: a replay (a library's too: its paths stand
        for the kernel file)."""
        self.begin(report.get("run_id", ""), _kernel_path(report), report["mutants"])
        self.finish(report)

    @property
    def library(self) -> bool:
        """Whether the rows are a library's: each names its module's ``file``."""
        return bool(self.rows) and all(row.get("file") for row in self.rows)

    @property
    def groupings(self) -> tuple[str, ...]:
        """The grid's groupings, the first the one it opens on."""
        return LIBRARY_GROUPINGS if self.library else GROUPINGS

    def begin(self, run_id: str, kernel_path: str, rows: list[dict]) -> None:
        self.run_id, self.kernel_path = run_id, kernel_path
        self.rows = [dict(row) for row in rows]
        self.index = {row["id"]: i for i, row in enumerate(self.rows)}
        self.states = [PENDING] * len(self.rows)
        self.marked.clear()
        self.accepted_here.clear()
        self.stopped = None
        self._haystack.clear()
        self._recount()

    def stop(self, reason: str) -> list[int]:
        """The run stopped (its original fails its own check, the engine failed): the
        mutants without a result are not run, none is running any more. Returns the
        indexes of the mutants that have no result."""
        self.stopped = reason
        waiting = [i for i, s in enumerate(self.states) if s in (PENDING, RUNNING)]
        for i in waiting:
            self.states[i] = PENDING
            self._haystack.pop(i, None)
        return waiting

    def set_state(self, mutant_id: str, state: str) -> int:
        """Show a transient state (``running``); returns the row's index."""
        i = self.index[mutant_id]
        if self.states[i] in (PENDING, RUNNING):
            self.states[i] = state
        return i

    def apply(self, row: dict) -> int:
        """A verdict arrived or changed for ``row["id"]``; returns the row's index."""
        i = self.index[row["id"]]
        self._count(i, -1)
        self.rows[i] = self._keep_accepted({**self.rows[i], **row})
        self.states[i] = self.rows[i].get("verdict", PENDING)
        self._count(i, +1)
        self._haystack.pop(i, None)
        if self.states[i] != Verdict.SURVIVED:
            self.marked.discard(row["id"])
        return i

    def finish(self, report: dict) -> list[int]:
        """The finished report is authoritative; returns the indexes whose state changed."""
        self.report = {k: v for k, v in report.items() if k != "mutants"}
        self.engine_report = report  # what export writes, as the engine built it
        self.run_id = report.get("run_id", self.run_id)
        self.kernel_path = _kernel_path(report) or self.kernel_path
        changed = []
        for row in report.get("mutants", []):
            i = self.index.get(row["id"])
            if i is None:
                continue
            before = self.states[i]
            self.rows[i] = self._keep_accepted(dict(row))
            self.states[i] = row.get("verdict", PENDING)
            self._haystack.pop(i, None)
            if self.states[i] != before:
                changed.append(i)
        self.marked &= {self.rows[i]["id"] for i in self.indexes_in(Verdict.SURVIVED)}
        self.finished = bool(report.get("complete", True))
        self._recount()
        return changed

    def _keep_accepted(self, row: dict) -> dict:
        """``row`` with the accepted mark given in this session, where the engine's row
        has none (the engine read the baseline file before the survivor was accepted)."""
        entry = self.accepted_here.get(row["id"])
        if entry is not None and not row.get("accepted"):
            row["accepted"] = dict(entry)
        return row

    def _recount(self) -> None:
        self.score = Score(total=len(self.rows))
        for i in range(len(self.rows)):
            self._count(i, +1)

    def _count(self, i: int, sign: int) -> None:
        state = self.states[i]
        if state not in VERDICTS:
            return
        s = self.score
        if state == Verdict.SURVIVED and self.rows[i].get("accepted"):
            s.accepted += sign
        s.counts[state] += sign
        s.done += sign
        if state == Verdict.KILLED:
            s.killed += sign
            if written_kill(self.rows[i], written_names(self.tests())):
                s.written += sign
        if state in _EXCLUDED:
            s.excluded += sign

    # -- reading -------------------------------------------------------------
    def row(self, mutant_id: str) -> dict:
        return self.rows[self.index[mutant_id]]

    def indexes_in(self, state: str) -> list[int]:
        return [i for i, s in enumerate(self.states) if s == state]

    def group_key(self, i: int, grouping: str) -> str:
        row = self.rows[i]
        if grouping == "module":
            return str(row.get("file") or "?")
        if grouping == "function" and row.get("file"):  # a library: kernels of one name apart
            return f"{os.path.basename(row['file'])}: {row.get('function') or '?'}"
        return str(row.get("function") if grouping == "function" else row.get("family")) or "?"

    def matches(self, i: int, filters: Filters) -> bool:
        row = self.rows[i]
        if filters.verdicts and self.states[i] not in filters.verdicts:
            return False
        if filters.operators and not (
            row.get("operator") in filters.operators or row.get("family") in filters.operators
        ):
            return False
        if filters.functions and row.get("function") not in filters.functions:
            return False
        if filters.modules and row.get("file") not in filters.modules:
            return False
        if filters.text:
            needle = filters.text.lower()
            if needle not in self._search_text(i):
                return False
        return True

    def _search_text(self, i: int) -> str:
        text = self._haystack.get(i)
        if text is None:
            row = self.rows[i]
            fields = ("id", "operator", "family", "function", "before", "after", "by", "reason")
            fields += ("file",)  # a library's module
            text = " ".join(str(row.get(k) or "") for k in fields)
            if row.get("accepted"):
                text += f" accepted {row['accepted'].get('reason', '')}"
            kind = survivor_kind(row)
            if kind is not None:  # "tolerance", "differ", "masked" find survivors by kind
                text += f" {kind} {KIND_WORDS[kind]} {row['survivor'].get('why', '')}"
            text = f"{text} line {row.get('line')} {self.states[i]}".lower()
            self._haystack[i] = text
        return text

    def values(self, key: str) -> list[str]:
        """Distinct values of a row field, sorted (for the filter screen)."""
        return sorted({str(row.get(key)) for row in self.rows if row.get(key) is not None})

    # -- marking -------------------------------------------------------------
    def toggle_mark(self, mutant_id: str) -> bool | None:
        """Mark or unmark a survivor; None when the mutant is not a survivor."""
        if self.states[self.index[mutant_id]] != Verdict.SURVIVED:
            return None
        if mutant_id in self.marked:
            self.marked.discard(mutant_id)
            return False
        self.marked.add(mutant_id)
        return True

    def accept(self, mutant_id: str, entry: dict) -> int:
        """The survivor is accepted in the baseline file (``entry``: its reason, hash,
        date and file): it stays a survivor and leaves the adjusted score."""
        i = self.index[mutant_id]
        self.accepted_here[mutant_id] = dict(entry)
        self._count(i, -1)
        self.rows[i] = {**self.rows[i], "accepted": entry}
        self._count(i, +1)
        self._haystack.pop(i, None)
        return i

    # -- tests ---------------------------------------------------------------
    def tests(self) -> list[dict]:
        return list(self.report.get("tests") or [])

    def killing_test(self, row: dict) -> dict | None:
        """The accepted test named by ``by = test:NAME``, when the report holds it."""
        by = row.get("by") or ""
        if by.startswith("test:"):
            name = by[len("test:") :]
        elif by == "own-check":
            name = "own-check"
        else:
            return None
        for test in self.tests():
            if test.get("name") == name or str(test.get("name", "")).endswith("::" + name):
                return test
        return None

    def candidate_tests(self, row: dict) -> list[dict]:
        """Accepted tests that name this mutant in their ``kills`` (other than the killer)."""
        killer = self.killing_test(row)
        return [
            t
            for t in self.tests()
            if row["id"] in (t.get("kills") or []) and t is not killer and t.get("source")
        ]

    # -- the tolerance check -------------------------------------------------
    def tolerance_view(self) -> list[str]:
        """The per-test-line view: the test lines whose checked tighter tolerance kills
        survivors, most kills first, in words (nothing before the run's report)."""
        return tolerance_view(self.report)

    def tolerance_test_line(self, row: dict) -> str:
        """What the test line that let ``row`` through lets through in all, in words
        ("" where the report's per-line view has no such line)."""
        where = (row.get("tolerance") or {}).get("where")
        lines = ((self.report.get("checks") or {}).get("tolerance") or {}).get("lines") or []
        found = [x for x in lines if isinstance(x, dict) and where and x.get("where") == where]
        return tolerance_line_words(found[0]) if found else ""

    # -- export --------------------------------------------------------------
    def to_report(self) -> dict:
        """The run as a JSON report: the engine's own report with the current rows."""
        rows = []
        for row, state in zip(self.rows, self.states, strict=True):
            rows.append({**row, "verdict": state if state in VERDICTS else PENDING})
        report = dict(self.report)
        report.setdefault("run_id", self.run_id)
        report["mutants"] = rows
        judged = [r for r in rows if r["verdict"] != PENDING]
        report["score"] = score(judged, written_names(self.tests()))
        report["complete"] = len(judged) == len(rows)
        return report


def _kernel_path(report: dict) -> str:
    """A report's kernel file; a library's paths as its run was given them."""
    kernel = report.get("kernel") or {}
    if kernel.get("path"):
        return str(kernel["path"])
    paths = (report.get("library") or {}).get("paths") or []
    return " ".join(str(p) for p in paths)
