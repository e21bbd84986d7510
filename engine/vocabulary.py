"""The words of a verdict, declared once: every face and report format reads them here.

A mutant's verdict is one of ``Verdict``; a killed mutant's ``by`` is one of ``By``
(or ``test:NAME``). ``ORDER`` is the order every table and legend lists them in,
``GLYPHS`` says a state without colour (the grid, the HTML page), ``STYLES`` is the
terminal colour of each, ``WORDS`` says each ``by`` in a sentence. ``EXCLUDED`` are the
verdicts the adjusted score leaves out (each exclusion is listed). ``PENDING`` and
``RUNNING`` are states of a mutant that has no verdict yet.
"""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    KILLED = "killed"
    SURVIVED = "survived"
    EQUIVALENT = "equivalent"
    NOT_COMPILABLE = "not_compilable"
    ERROR = "error"
    #: a limit decided it near its edge (or it ran out of GPU memory) and a second run
    #: gave the other verdict (``engine/steady.py``): both outcomes are on its row, and it
    #: is out of the score
    FLAKY = "flaky"


class By(StrEnum):
    """What killed a mutant (besides ``test:NAME``, a test by its name)."""

    OWN_CHECK = "own-check"
    BOUNDS = "bounds"
    CRASH = "crash"
    TIMEOUT = "timeout"
    BIG_INDEX = "big-index"


TEST_PREFIX = "test:"
PENDING = "pending"
RUNNING = "running"

#: Verdicts in the order every table, legend and format lists them.
ORDER: tuple[Verdict, ...] = (
    Verdict.KILLED,
    Verdict.SURVIVED,
    Verdict.EQUIVALENT,
    Verdict.NOT_COMPILABLE,
    Verdict.FLAKY,
    Verdict.ERROR,
)
#: Verdict values, then ``pending``: the states a report row can hold.
REPORT_STATES: tuple[str, ...] = (*(v.value for v in ORDER), PENDING)
#: Every state a live cell can show, in legend order.
CELL_STATES: tuple[str, ...] = (PENDING, RUNNING, *(v.value for v in ORDER))

#: Verdicts the adjusted score leaves out; every exclusion is listed with its evidence.
EXCLUDED: tuple[Verdict, ...] = (Verdict.NOT_COMPILABLE, Verdict.EQUIVALENT, Verdict.FLAKY)

#: One character per state, so a grid reads without colour too.
GLYPHS: dict[str, str] = {
    PENDING: "·",
    RUNNING: "◌",
    Verdict.KILLED.value: "✓",
    Verdict.SURVIVED.value: "✗",
    Verdict.EQUIVALENT.value: "≡",
    Verdict.NOT_COMPILABLE.value: "⊘",
    Verdict.FLAKY.value: "≈",
    Verdict.ERROR.value: "!",
}

#: Terminal (rich) style per state.
STYLES: dict[str, str] = {
    Verdict.KILLED.value: "green",
    Verdict.SURVIVED.value: "bold red",
    Verdict.EQUIVALENT.value: "yellow",
    Verdict.NOT_COMPILABLE.value: "magenta",
    Verdict.FLAKY.value: "bold yellow",
    Verdict.ERROR.value: "bold magenta",
    PENDING: "dim",
    RUNNING: "cyan",
}

#: What each ``by`` of a killed mutant means, in words.
WORDS: dict[str, str] = {
    By.OWN_CHECK.value: "the file's own check",
    By.BOUNDS.value: "the bounds check (an unmasked load/store outside its tensors)",
    By.CRASH.value: "a crash (the sandbox child died by a signal)",
    By.TIMEOUT.value: "a timeout (the mutant used its CPU-time limit, or the wall clock's far backstop)",
    By.BIG_INDEX.value: "the big-index check (an int32 offset that wraps past 2^31 elements)",
}


def by_words(by: str | None) -> str:
    """``by`` in words: ``test NAME`` for a test, else its entry in ``WORDS``."""
    if not by:
        return ""
    if by.startswith(TEST_PREFIX):
        return f"test {by[len(TEST_PREFIX) :]}"
    return WORDS.get(by, by)


#: Each survivor check's one name (what ``--compile-check``, ``--diff-oracle``, the
#: explorer's toggles and every sentence call it) -> the key its results have in a report
#: (the row section and the run's ``checks`` entry; kept as they are, so reports stay
#: readable by older tools). Engine, CLI, explorer and reports read both from here.
CHECK_NAMES: dict[str, str] = {
    "compile-check": "compile",
    "diff-oracle": "oracle",
    "big-index": "big_index",
    "claims": "claims",
    "tolerance": "tolerance",
}
#: A report key (or an event's ``check``) -> the check's name.
CHECK_OF_KEY: dict[str, str] = {key: name for name, key in CHECK_NAMES.items()}


def check_name(key: str) -> str:
    """The check's name for its report key (anything else unchanged)."""
    return CHECK_OF_KEY.get(key, key)


#: Where a test came from, in words (the report's ``tests[].origin``)
ORIGIN_WORDS: dict[str, str] = {
    "own": "the kernel file's own check",
    "given": "a --tests file",
    "probe": "written by the probe",
    "stage1": "written by the model",
    "stage2": "written by the model for a survivor",
}


def origin_words(test: dict) -> str:
    """Where ``test`` (a report's ``tests`` entry) came from, in words."""
    origin = test.get("origin")
    return ORIGIN_WORDS.get(str(origin), f"from {origin}")
