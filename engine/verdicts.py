"""Where a mutant's verdict is decided, and the only code that changes one.

``decide(result)`` reads a mutant's first verdict off its sandbox job: ``killed``
needs evidence from running the mutant (a failing check, a bounds violation, a crash
or a timeout); a harness failure is ``error`` and never counts as a kill; all checks
passing is ``survived``.

After that, a verdict changes only through the ``Ledger`` below, and only as ``RULES``
allow: each change names the stage that made it and the evidence it rests on, and is
kept on the mutant's row (``changes``). Stages (writers, checks) record into the
ledger; they never set a verdict themselves.
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from .job import JobResult, JobStatus
from .kernel_file import EXTRA_TESTS, OWN_CHECK
from .limits import describe
from .records import MutantOutcome, Verdict
from .vocabulary import TEST_PREFIX, By


def attribute(check_name: str) -> str:
    """``own-check`` for the kernel's own check, ``test:NAME`` for an extra test."""
    if check_name.startswith(EXTRA_TESTS + "::"):
        return TEST_PREFIX + check_name.split("::", 1)[1]
    if check_name.startswith(OWN_CHECK):
        return By.OWN_CHECK
    return TEST_PREFIX + check_name


_EXCEPTION_LINE = re.compile(
    r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Violation|Warning)\b"
)


def summarize_error(text: str, limit: int = 300) -> str:
    """One line from an error tail: the last exception line and its message."""
    lines = [ln.rstrip() for ln in text.strip().splitlines()]
    start = max((i for i, ln in enumerate(lines) if _EXCEPTION_LINE.match(ln)), default=None)
    if start is None:
        picked = [ln.strip() for ln in lines if ln.strip()][-1:]
    else:
        picked = [ln.strip() for ln in lines[start:] if ln.strip()]
    line = "; ".join(picked)
    return line if len(line) <= limit else line[: limit - 3] + "..."


_COMPILE_ERROR = re.compile(
    r"^(?:triton\.compiler\.errors\.)?(?:CompilationError|CompileTimeAssertionFailure|"
    r"UnsupportedLanguageConstruct)\b.*|^RuntimeError: PassManager::run failed.*"
    # The interpreter's form of the same front-end errors (a compiler would reject the
    # kernel before it ran): operand types, a reduction axis or broadcast of wrong shape.
    r"|^(?:triton\.runtime\.errors\.)?InterpreterError: (?:IncompatibleTypeErrorImpl\b.*"
    r"|InterpreterError\('ValueError\(.(?:axis -?\d+ out of bounds for shape|Cannot broadcast)"
    r".*)"
)
_CUDA_ERROR = re.compile(
    r"(CUDA error: [^\n]+|CUDA_ERROR_\w+|cudaError\w+|an illegal memory access was encountered"
    r"|misaligned address|unspecified launch failure|illegal instruction"
    r"|device-side assert triggered)"
)
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def compile_error(text: str) -> str | None:
    """The compiler's message when a job failed because the mutant does not compile
    (in compiled mode the launch compiles it; the original compiled, so it is the
    mutant's), or None."""
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if _COMPILE_ERROR.match(line):
            message = f"{line} {_compiler_words(lines, i)}".strip()
            return message if len(message) <= 300 else message[:297] + "..."
    return None


def _compiler_words(lines: list[str], i: int) -> str:
    """What follows a compile error's first line (``lines[i]``): the compiler's own
    message and the failing line where Triton shows them, else the next two lines.

    Triton's CompilationError prints "at L:C:", the kernel's source up to the failing
    line, a caret under it, then the compiler's own message: keep the message and the
    failing line, not the first lines of the kernel's source."""
    caret = next((j for j in range(i + 1, len(lines)) if lines[j] and set(lines[j]) == {"^"}), None)
    if caret is None or caret + 1 >= len(lines) or not lines[caret + 1]:
        return " ".join(ln for ln in lines[i + 1 : i + 3] if ln)
    after = []
    for ln in lines[caret + 1 :]:
        if not ln or ln.startswith(("Traceback", "The above exception")):
            break
        after.append(ln)
    source = lines[caret - 1] if caret - 1 > i else ""
    return " ".join(after) + (f" (in `{source}`)" if source else "")


def crash_reason(text: str) -> str:
    """A crash in one line that keeps what matters: the CUDA error (when there is one),
    the last exception line, and the deepest frame outside the installed packages (the
    check or the kernel file), instead of "Traceback (most recent call last):"."""
    text = text.strip()
    if not text:
        return "crashed"
    cuda = _CUDA_ERROR.search(text)
    frames = [
        f"{name.rsplit('/', 1)[-1]}:{line} in {func}"
        for name, line, func in _FRAME.findall(text)
        if "site-packages" not in name and "/lib/python" not in name and "<frozen" not in name
    ]
    head = cuda.group(1) if cuda else summarize_error(text, 200)
    if head.startswith("Traceback"):
        head = next((ln.strip() for ln in text.splitlines()[::-1] if ln.strip()), head)
    where = f" (at {frames[-1]})" if frames else ""
    return f"{head}{where}"


def decide(result: JobResult) -> tuple[Verdict, str | None, str]:
    """(verdict, by, reason) for a mutant's job result. A kill by a sandbox limit (the
    original fit in it: it passed) says which limit first (``limits.describe``)."""
    verdict, by, reason = _decide(result)
    limit = result.extra.get("limit")
    if verdict is Verdict.KILLED and limit:
        reason = f"hit {describe(limit)}: {reason}"
    return verdict, by, reason


def _decide(result: JobResult) -> tuple[Verdict, str | None, str]:
    status = result.status
    if status in (JobStatus.FAILED, JobStatus.CRASH):
        message = _compile_message(result)
        if message is not None:
            return Verdict.NOT_COMPILABLE, None, f"does not compile: {message}"
    if status is JobStatus.PASSED:
        return Verdict.SURVIVED, None, _passed_words(result)
    if status is JobStatus.FAILED:
        return _failed(result)
    if status is JobStatus.BOUNDS:
        return (
            Verdict.KILLED,
            By.BOUNDS,
            (result.bounds or {}).get("message", summarize_error(result.error)),
        )
    if status is JobStatus.CRASH:
        return Verdict.KILLED, By.CRASH, crash_reason(result.error)
    if status is JobStatus.TIMEOUT:
        return Verdict.KILLED, By.TIMEOUT, result.error.strip().splitlines()[0]
    return Verdict.ERROR, None, summarize_error(result.error) or "harness error"


def _compile_message(result: JobResult) -> str | None:
    """The compiler's error in the job's error or a failed check's message, if any."""
    failed = (compile_error(o.message) for o in result.outcomes if o.status == "failed")
    return compile_error(result.error) or next(failed, None)


def _passed_words(result: JobResult) -> str:
    """Why a passing job's mutant survived: no test reached it, or its checks passed."""
    if not result.outcomes:
        return "no test reaches this mutant's function"
    ran = sum(1 for o in result.outcomes if o.status == "passed")
    return "its one check passed" if ran == 1 else f"all {ran} checks passed"


def _failed(result: JobResult) -> tuple[Verdict, str | None, str]:
    """A failing check's kill: which check (and which case of the own check) said what."""
    failure = result.first_failure
    name = failure.name if failure else OWN_CHECK
    where = f" ({name.split('::', 1)[1]})" if "::" in name and name.startswith(OWN_CHECK) else ""
    return Verdict.KILLED, attribute(name), summarize_error(result.error) + where


def kill_evidence(status: JobStatus, oracle: dict | None, mode: str) -> str | None:
    """Why a generated test's failure on a mutant is not a kill, or None when it is.

    A test a writer wrote (stage 1, stage 2, probe) kills only through what the kernel
    did: in that test's own run, its outputs differ from the original's on the same
    inputs (``oracle``: the diff-oracle run with the test as the only check), or the
    bounds check, a crash or a timeout fired in the mutated kernel. A failure with
    identical outputs on every launch (or no launch at all) tells the two apart by
    something other than the kernel's outputs: no kill. The user's own check and
    ``--tests`` files are trusted and need none of this.
    """
    if status is JobStatus.BOUNDS:
        return None  # the bounds check fires inside a launch of the mutated kernel
    if mode != "interpret":
        return None  # no oracle on a device: the static review is all (README says so)
    if oracle is None:
        return "no behaviour evidence: the oracle did not run the test"
    if not oracle.get("launches"):
        if oracle.get("timed_out") and status is JobStatus.TIMEOUT:
            return None
        return "the test launches no kernel, so it cannot see the kernel's outputs"
    if oracle.get("identical") is False:
        return None
    if oracle.get("divergence") and status in (JobStatus.CRASH, JobStatus.TIMEOUT):
        return None
    if oracle.get("timed_out") and status is JobStatus.TIMEOUT:
        return None
    if oracle.get("identical") is True:
        return (
            f"the kernel's outputs are identical on every launch ({oracle.get('sentence')}): "
            "the test tells the mutant apart by something other than its outputs"
        )
    return f"no behaviour evidence: {oracle.get('sentence')}"


# -- the ledger ------------------------------------------------------------------------
#: When a verdict may change after its job decided it, and from which verdicts.
#: - ``kill``: a test that passes the original and fails the mutant, both run in the
#:   sandbox, kills a survivor, and refutes an equivalence claim;
#: - ``set_aside``: the compiler rejects the survivor (or claimed mutant): not_compilable;
#: - ``claim``: an equivalence claim (a model's EQUIVALENT, the probe finding no
#:   difference) on a survivor: ``equivalent``;
#: - ``refute``: evidence contradicts a claim (the oracle saw outputs differ): survived;
#: - ``unkill``: a generated test killed it, but without behaviour evidence
#:   (``kill_evidence``): survived again.
#: ``judge`` (a mutant's job, first or again) may move any verdict.
RULES: dict[str, tuple[Verdict, ...]] = {
    "kill": (Verdict.SURVIVED, Verdict.EQUIVALENT),
    "set_aside": (Verdict.SURVIVED, Verdict.EQUIVALENT),
    "claim": (Verdict.SURVIVED,),
    "refute": (Verdict.EQUIVALENT,),
    "unkill": (Verdict.KILLED,),
}

#: Per-mutant report sections the ledger keeps, beside the verdict (the report's rows).
ROW_SECTIONS = frozenset(
    {
        "changes",  # the ledger's own: every verdict change with its stage and evidence
        "claims",  # writers: equivalence claims and what evidence said of them
        "attempts",  # writers: rejected tests, with why
        "probe",  # probe writer: how many inputs, what it found
        "compile",  # compile-check: per target
        "big_index",  # big-index check: the replays past 2^31 elements
        "oracle",  # diff-oracle: the sentence and the numbers
        "tolerance",  # tolerance check: the closeness assertion that let it through
        "survivor",  # a survivor's kind: what the oracle showed (report.mutant_row derives it)
        "races",  # claims check: a claimed survivor's store trace (two programs, one address)
        "modes",  # --compare-modes: both modes' verdicts
        "tests_selected",  # test cases (beside the own check) that launch its kernel
        "tests_run",  # those its job ran, fastest first, to the first kill
        "timeout_s",  # its limit: from the original's time on the own check and those cases
        "reached",  # false: no check launches its kernel (no job ran, no evidence either way)
        "accepted",  # the baseline file accepts this survivor (engine/accepted.py)
        "limit",  # killed by a sandbox limit (memory, cpu time, output, open files)
        "error",  # stages that raised while working on it: [{stage, reason}]
        "file",  # a library run's rows: the module the mutant is in (engine/library.py)
        "cpu_s",  # the CPU seconds its job used: what its limit counts
        "flaky",  # a limit or the GPU's memory decided it, a second run disagreed: both runs
    }
)
#: Run-level report sections (the report's top-level fields beside the core ones).
RUN_SECTIONS = frozenset(
    {
        "own_check",
        "races",  # the race hint: programs of one launch storing to one address
        "changed_since",
        "selection",
        "judged_by",  # project mode: the test cases that judge each kernel's mutants
        "autotune",
        "modes",
        "checks",
        "tokens",
        "writers",
        "stage1",
        "accepted",  # the baseline file read and its entries that match no mutant
        "predictions",  # --predict: the file's text and hash, stored first; the score
        "stage_errors",  # stages that raised: [{stage, reason, mutants, traceback}]
        "estimate",  # the mutant phase's estimate, said as its first job started
        "left_out_cases",  # test cases the original failed or --case-time left out
    }
)


def _declared(name: str, names: frozenset[str], what: str, where: str) -> None:
    if name not in names:
        raise KeyError(f"undeclared {what} {name!r} (verdicts.{where})")


@dataclass(frozen=True)
class Change:
    """One verdict change: which stage, from what to what, and the evidence."""

    stage: str
    was: str | None
    now: str
    evidence: str

    def to_json(self) -> dict:
        return {"stage": self.stage, "was": self.was, "now": self.now, "evidence": self.evidence}


class Ledger:
    """A run's verdicts, the evidence beside them, and the stages' report sections.

    Thread-safe: the explorer runs stages in threads of their own. Reading is free;
    changing a verdict goes through ``judge``/``kill``/``set_aside``/``claim``/``refute``
    (or ``restore`` for a rerun's carried-over rows), each checked against ``RULES``.
    A change the rules do not allow returns None and changes nothing (a stage that
    lost a race: the mutant was killed meanwhile).
    """

    def __init__(self) -> None:
        self._outcomes: dict[str, MutantOutcome] = {}
        self._details: dict[str, dict] = {}
        self._sections: dict = {}
        self._lock = threading.RLock()

    # -- reading --------------------------------------------------------------------
    def outcome(self, mutant_id: str) -> MutantOutcome | None:
        return self._outcomes.get(mutant_id)

    def verdict(self, mutant_id: str) -> Verdict | None:
        outcome = self._outcomes.get(mutant_id)
        return outcome.verdict if outcome is not None else None

    def outcomes(self) -> dict[str, MutantOutcome]:
        """A copy: mutant id -> outcome, for every mutant judged so far."""
        with self._lock:
            return dict(self._outcomes)

    # -- the report's sections: snapshots out, changes in ----------------------------------
    def details(self, mutant_id: str) -> dict:
        """A copy of the mutant's report sections (empty when it has none): changing it
        changes nothing here (``put_row``, ``update_row`` do)."""
        with self._lock:
            return copy.deepcopy(self._details.get(mutant_id, {}))

    def row(self, mutant_id: str, name: str, default=None):
        """A copy of the mutant's section ``name`` (``default`` when it has none)."""
        _declared(name, ROW_SECTIONS, "report row section", "ROW_SECTIONS")
        with self._lock:
            return copy.deepcopy(self._details.get(mutant_id, {}).get(name, default))

    def put_row(self, mutant_id: str, name: str, value) -> None:
        """Set the mutant's section ``name`` (to a copy of ``value``)."""
        _declared(name, ROW_SECTIONS, "report row section", "ROW_SECTIONS")
        value = copy.deepcopy(value)
        with self._lock:
            self._details.setdefault(mutant_id, {})[name] = value

    def update_row(self, mutant_id: str, name: str, change: Callable, default=None):
        """Change the mutant's section ``name`` under the lock: ``change`` gets a copy of
        it (``default`` when it has none) and returns the new value; returns a copy of it.
        Stages that add to a list (claims, attempts) do it here, never in place."""
        _declared(name, ROW_SECTIONS, "report row section", "ROW_SECTIONS")
        with self._lock:
            sections = self._details.setdefault(mutant_id, {})
            new = change(copy.deepcopy(sections.get(name, default)))
            sections[name] = copy.deepcopy(new)
            return new

    def drop_row(self, mutant_id: str, name: str) -> None:
        """Remove the mutant's section ``name`` (a rerun's carried-over ``accepted``)."""
        _declared(name, ROW_SECTIONS, "report row section", "ROW_SECTIONS")
        with self._lock:
            self._details.get(mutant_id, {}).pop(name, None)

    def section(self, name: str, default=None):
        """A copy of the run-level section ``name`` (``default`` when there is none)."""
        _declared(name, RUN_SECTIONS, "report section", "RUN_SECTIONS")
        with self._lock:
            return copy.deepcopy(self._sections.get(name, default))

    def put_section(self, name: str, value) -> None:
        _declared(name, RUN_SECTIONS, "report section", "RUN_SECTIONS")
        value = copy.deepcopy(value)
        with self._lock:
            self._sections[name] = value

    def update_section(self, name: str, change: Callable, default=None):
        """Change the run-level section ``name`` under the lock (as ``update_row``)."""
        _declared(name, RUN_SECTIONS, "report section", "RUN_SECTIONS")
        with self._lock:
            new = change(copy.deepcopy(self._sections.get(name, default)))
            self._sections[name] = copy.deepcopy(new)
            return new

    def sections(self) -> dict:
        """A copy of every run-level section."""
        with self._lock:
            return copy.deepcopy(self._sections)

    # -- the only code that changes a verdict ---------------------------------------------
    def judge(
        self,
        mutant_id: str,
        result: JobResult,
        cached: bool,
        *,
        stage: str = "mutants",
        note: str = "",
    ) -> MutantOutcome:
        """The verdict its job shows (``decide``); a second judgement (a rerun) is a change."""
        verdict, by, reason = decide(result)
        if note and verdict is not Verdict.SURVIVED:
            reason = f"{reason} ({note})"
        outcome = MutantOutcome(mutant_id, verdict, by, reason, result.duration_s, cached)
        limit = result.extra.get("limit") if verdict is Verdict.KILLED else None
        with self._lock:
            if mutant_id in self._outcomes:
                self._record(mutant_id, stage, outcome, reason)
            self._outcomes[mutant_id] = outcome
            if result.cpu_s > 0:  # what its limit counted (``spent_s``)
                self._details.setdefault(mutant_id, {})["cpu_s"] = round(result.cpu_s, 3)
            if limit:
                self._details.setdefault(mutant_id, {})["limit"] = limit["limit"]
            else:
                self._details.get(mutant_id, {}).pop("limit", None)
        return outcome

    def unreached(
        self, mutant_id: str, launched: list[str], line: int | None = None
    ) -> MutantOutcome:
        """No check launches the mutated kernel (or, ``line``, no check executes the
        mutated line): ``survived`` without a job, and no evidence either way (never
        identical, never excludable)."""
        what = ", ".join(launched) if launched else "no kernel at all"
        reason = f"kernel never launched by any check (the checks launch {what})"
        if line is not None:
            reason = (
                f"line {line} never executed by any check (not reached: e.g. a "
                "tl.constexpr branch the checks never take)"
            )
        outcome = MutantOutcome(mutant_id, Verdict.SURVIVED, None, reason, 0.0, False)
        with self._lock:
            if mutant_id in self._outcomes:
                self._record(mutant_id, "mutants", outcome, reason)
            self._outcomes[mutant_id] = outcome
            self._details.setdefault(mutant_id, {})["reached"] = False
        return outcome

    def flaky(
        self, mutant_id: str, record: dict, duration_s: float, cached: bool, *, stage: str
    ) -> MutantOutcome:
        """Two runs of its job disagree, near the CPU limit or short of GPU memory
        (``steady.settle``): ``flaky``, out of the score, both runs on its row; never a
        pick of one."""
        reason = record["reason"]
        outcome = MutantOutcome(mutant_id, Verdict.FLAKY, None, reason, duration_s, cached)
        with self._lock:
            if mutant_id in self._outcomes:
                self._record(mutant_id, stage, outcome, reason)
            self._outcomes[mutant_id] = outcome
            details = self._details.setdefault(mutant_id, {})
            details["flaky"] = record["runs"]
            details.pop("limit", None)
        return outcome

    def spent_s(self, mutant_id: str) -> float:
        """What the mutant's job cost: its CPU seconds, else its wall seconds (0: none)."""
        with self._lock:
            cpu = self._details.get(mutant_id, {}).get("cpu_s")
            outcome = self._outcomes.get(mutant_id)
        return float(cpu) if cpu else (outcome.duration_s if outcome else 0.0)

    def reached(self, mutant_id: str) -> bool:
        """False for a mutant no check launches (``unreached``)."""
        with self._lock:
            return self._details.get(mutant_id, {}).get("reached", True) is not False

    def kill(
        self,
        mutant_id: str,
        *,
        by: str,
        reason: str,
        duration_s: float,
        cached: bool,
        stage: str,
        evidence: str,
    ) -> MutantOutcome | None:
        """A proved test failed the mutant: ``killed`` by it."""
        return self._change(
            "kill",
            mutant_id,
            stage,
            evidence,
            verdict=Verdict.KILLED,
            by=by,
            reason=reason,
            duration_s=duration_s,
            cached=cached,
        )

    def set_aside(self, mutant_id: str, reason: str, *, stage: str) -> MutantOutcome | None:
        """The compiler rejects it: ``not_compilable``, excluded from the adjusted score."""
        return self._change(
            "set_aside",
            mutant_id,
            stage,
            reason,
            verdict=Verdict.NOT_COMPILABLE,
            by=None,
            reason=reason,
        )

    def claim(
        self, mutant_id: str, reason: str, *, stage: str, cached: bool = True
    ) -> MutantOutcome | None:
        """An equivalence claim: ``equivalent`` (a claim, listed among the exclusions)."""
        return self._change(
            "claim",
            mutant_id,
            stage,
            reason,
            verdict=Verdict.EQUIVALENT,
            by=None,
            reason=reason,
            cached_and=cached,
        )

    def refute(self, mutant_id: str, evidence: str, *, stage: str) -> MutantOutcome | None:
        """Evidence contradicts the claim: a survivor again, the claim kept on record."""
        return self._change(
            "refute",
            mutant_id,
            stage,
            evidence,
            verdict=Verdict.SURVIVED,
            by=None,
            reason=evidence,
        )

    def unkill(self, mutant_id: str, evidence: str, *, stage: str) -> MutantOutcome | None:
        """A generated test's kill without behaviour evidence: a survivor again."""
        return self._change(
            "unkill",
            mutant_id,
            stage,
            evidence,
            verdict=Verdict.SURVIVED,
            by=None,
            reason=f"its only kill was refused: {evidence}",
        )

    def annotate(self, mutant_id: str, note: str) -> MutantOutcome | None:
        """A survivor's reason gains ``note`` (once): what a check could not judge on it,
        so that "all checks passed" does not read as if that check had looked. The
        verdict stays; None where the mutant is no survivor."""
        with self._lock:
            old = self._outcomes.get(mutant_id)
            if old is None or old.verdict is not Verdict.SURVIVED or note in old.reason:
                return None
            reason = f"{old.reason}; {note}" if old.reason else note
            self._outcomes[mutant_id] = new = replace(old, reason=reason)
            return new

    def restore(self, mutant_id: str, row: dict, source: str = "") -> None:
        """A verdict and its sections carried over from a recorded report row (a rerun
        judges some mutants again and keeps the others as they were recorded); the row's
        ``changes`` say so last (stage ``restore``, from run ``source``)."""
        if row.get("verdict") not in {v.value for v in Verdict}:
            return
        outcome = MutantOutcome(
            mutant_id,
            Verdict(row["verdict"]),
            row.get("by"),
            row.get("reason") or "",
            row.get("duration_s") or 0.0,
            bool(row.get("cached")),
        )
        with self._lock:
            self._details[mutant_id] = copy.deepcopy(
                {k: v for k, v in row.items() if k in ROW_SECTIONS}
            )
            self._details[mutant_id]["changes"] = list(row.get("changes") or [])
            self._outcomes.pop(mutant_id, None)
            where = f"run {source}" if source else "a recorded run"
            self._record(mutant_id, "restore", outcome, f"carried over as recorded in {where}")
            self._outcomes[mutant_id] = outcome

    def _change(
        self, rule: str, mutant_id: str, stage: str, evidence: str, *, cached_and=None, **fields
    ) -> MutantOutcome | None:
        with self._lock:
            old = self._outcomes.get(mutant_id)
            if old is None or old.verdict not in RULES[rule]:
                return None
            if cached_and is not None:
                fields["cached"] = old.cached and cached_and
            new = replace(old, **fields)
            self._record(mutant_id, stage, new, evidence)
            self._outcomes[mutant_id] = new
            return new

    def _record(self, mutant_id: str, stage: str, new: MutantOutcome, evidence: str) -> None:
        old = self._outcomes.get(mutant_id)
        change = Change(stage, old.verdict.value if old else None, new.verdict.value, evidence)
        self._details.setdefault(mutant_id, {}).setdefault("changes", []).append(change.to_json())
