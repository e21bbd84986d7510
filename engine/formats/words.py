"""What every report format reads from the JSON report: pure functions on the report dict.

The formats (Stryker JSON, JUnit XML, Markdown, HTML) never recompute a verdict; they
only say what the report holds. Helpers here cover what the report does not hold
directly: the killing test's source, a mutant's end position, the kernel's source for
reports written before it was recorded.
"""

from __future__ import annotations

import hashlib
import math
import os
import re

from ..versions import installed_version
from ..vocabulary import REPORT_STATES, TEST_PREFIX, By


def tool_version() -> str:
    return installed_version("mutant-gate") or "unknown"


def is_library(report: dict) -> bool:
    """Whether ``report`` is a library run's (or a merge of its shards)."""
    return isinstance(report.get("files"), list) and isinstance(report.get("library"), dict)


def library_name(report: dict) -> str:
    """The library as the run was given it: its paths (``src/kernel_lib``)."""
    paths = (report.get("library") or {}).get("paths") or []
    return " ".join(str(p) for p in paths) or "library"


def kernel_name(report: dict) -> str:
    """The kernel file's name; a library's paths as the run was given them."""
    if is_library(report):
        return library_name(report)
    return os.path.basename((report.get("kernel") or {}).get("path") or "kernel.py")


def counts(report: dict) -> dict[str, int]:
    """Mutants per verdict, every verdict present (pending included)."""
    out = dict.fromkeys(REPORT_STATES, 0)
    for row in report.get("mutants", []):
        out[row.get("verdict", "pending")] = out.get(row.get("verdict", "pending"), 0) + 1
    return out


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def written_score(score: dict) -> dict | None:
    """``score.with_written`` where the tests mutant-gate wrote kill more than the user's
    own (else None: one score says it all; reports before the split have none)."""
    written = score.get("with_written")
    return written if isinstance(written, dict) and written.get("added") else None


def score_phrases(score: dict) -> tuple[str, str | None]:
    """(your tests' score, the score with written tests or None) in words, plain text:
    "your tests: 8/12 killed, adjusted 66.7% (raw 66.7%)"."""
    mine = "your tests" if "with_written" in score else "score"
    first = (
        f"{mine}: {score.get('killed', 0)}/{score.get('total', 0)} killed, adjusted "
        f"{percent(score.get('adjusted'))} (raw {percent(score.get('raw'))})"
    )
    written = written_score(score)
    if written is None:
        return first, None
    return first, (
        f"with the tests mutant-gate wrote: {written.get('killed', 0)}/"
        f"{score.get('total', 0)} killed, adjusted {percent(written.get('adjusted'))} "
        f"(+{len(written['added'])})"
    )


def killing_tests(report: dict, row: dict) -> list[dict]:
    """The report's tests that killed this mutant (the one its verdict names first)."""
    if row.get("verdict") != "killed":
        return []
    tests = [t for t in report.get("tests", []) if row["id"] in (t.get("kills") or [])]
    return tests or _test_by_verdict(report.get("tests", []), row.get("by") or "")


def _test_by_verdict(tests: list[dict], by: str) -> list[dict]:
    """The one test a killed verdict's ``by`` names (the own check, ``test:NAME``), where
    no test lists the kill; else none."""
    if by == By.OWN_CHECK:
        return [t for t in tests if t.get("origin") == "own"][:1]
    if by.startswith(TEST_PREFIX):
        name = by.removeprefix(TEST_PREFIX)
        return [t for t in tests if t.get("name", "").split("::")[-1] == name][:1]
    return []


def end_position(row: dict) -> tuple[int, int]:
    """(line, col) just after the mutated code: 1-based line, 0-based exclusive column."""
    if row.get("end_line") is not None and row.get("end_col") is not None:
        return row["end_line"], row["end_col"]
    before = row.get("before") or ""
    lines = before.split("\n")
    if len(lines) == 1:
        return row["line"], row["col"] + len(before)
    return row["line"] + len(lines) - 1, len(lines[-1])


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def kernel_source(report: dict) -> tuple[str, str]:
    """(source, how): the kernel file's text as the run saw it.

    ``how`` is ``report`` (recorded), ``file`` (read from disk, same sha256) or
    ``diffs`` (rebuilt from the mutants' diffs: lines no diff shows are empty).
    """
    kernel = report.get("kernel", {})
    if isinstance(kernel.get("source"), str):
        return kernel["source"], "report"
    text = _unchanged_file(kernel)
    if text is not None:
        return text, "file"
    known: dict[int, str] = {}
    for row in report.get("mutants", []):
        _original_lines(row.get("diff") or "", known)
    last = max(known, default=0)
    return "".join(known.get(i, "") + "\n" for i in range(1, last + 1)), "diffs"


def _unchanged_file(kernel: dict) -> str | None:
    """The kernel file's text on disk where its sha256 is still the run's, else None."""
    path = kernel.get("path")
    if path and os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
            if hashlib.sha256(text.encode()).hexdigest() == kernel.get("sha256"):
                return text
        except (OSError, UnicodeDecodeError):
            pass
    return None


def _original_lines(diff: str, known: dict[int, str]) -> None:
    """Adds to ``known`` (line number -> text) the original's lines a mutant's diff shows."""
    line_no = None
    for line in diff.splitlines():
        match = _HUNK.match(line)
        if match:
            line_no = int(match.group(1))
        elif line_no is not None and line[:1] in (" ", "-"):
            known.setdefault(line_no, line[1:])
            line_no += 1
        elif line_no is not None and line == "":
            known.setdefault(line_no, "")
            line_no += 1


def oracle_sentence(row: dict) -> str | None:
    oracle = row.get("oracle")
    return oracle.get("sentence") if isinstance(oracle, dict) else None


def compile_lines(row: dict) -> list[str]:
    """One line per compile target: ``sm_75: ok`` or the compiler's message."""
    results = row.get("compile")
    if not isinstance(results, dict):
        return []
    return [_compile_line(t, res) for t, res in results.items() if isinstance(res, dict)]


def _compile_line(target: str, res: dict) -> str:
    """One target's line: whether the mutant compiles there, with the compiler's message
    where it does not."""
    ok = res.get("ok")
    state = "compiles" if ok else ("does not compile" if ok is False else "not checked")
    message = res.get("message") or ""
    return f"{target}: {state}" + (f": {message}" if message and not ok else "")


def shown_claims(row: dict) -> list[dict]:
    """The row's claims a face shows. A probe that found no difference claims nothing
    (records written before it said so held that as a probe "claim": left out)."""
    return [c for c in row.get("claims") or [] if isinstance(c, dict) and c.get("by") != "probe"]


_OLD_PROBE_WORDS = re.compile(r"^no difference found on (\d+) probes")


def probe_text(row: dict) -> str:
    """What the probe did on a mutant, in words ("" where it did not run on it)."""
    probe = row.get("probe")
    if not isinstance(probe, dict):
        return ""
    text = str(probe.get("result") or "")
    # older records said it another way; found nothing is "not distinguished"
    return _OLD_PROBE_WORDS.sub(r"not distinguished by \1 probes", text)


def claim_lines(row: dict) -> list[str]:
    out = []
    for claim in shown_claims(row):
        text = f"{claim.get('by')}: {claim.get('claim')}"
        if claim.get("reason"):
            text += f" ({claim['reason']})"
        if claim.get("oracle"):
            text += f"; oracle: {claim['oracle']}"
        out.append(text)
    return out


#: ``--gate-on`` -> the score's words in the gate's sentence
GATE_ON: dict[str, str] = {
    "yours": "your tests' adjusted score",
    "written": "the adjusted score with written tests",
}


def gated_score(report: dict, gate_on: str | None = None) -> float | None:
    """The adjusted score ``--fail-under`` gates on: the user's own tests' (``yours``,
    the default), or with the tests mutant-gate wrote (``written``). A report written
    before the split (no ``with_written``) has one score: that one."""
    score = report.get("score") or {}
    gate_on = gate_on or (report.get("settings") or {}).get("gate_on") or "yours"
    if gate_on == "written" and isinstance(score.get("with_written"), dict):
        return score["with_written"].get("adjusted")
    return score.get("adjusted")


def gate(report: dict) -> tuple[bool | None, str]:
    """(passed, sentence) for the run's ``--fail-under``; passed None without a threshold."""
    settings = report.get("settings") or {}
    threshold = settings.get("fail_under")
    adjusted = gated_score(report)
    words = GATE_ON.get(settings.get("gate_on") or "yours", GATE_ON["yours"])
    if threshold is None:
        return None, "no --fail-under threshold"
    if adjusted is None:
        return True, f"no mutant counts towards the score; --fail-under {threshold:g}% not applied"
    if adjusted < threshold:
        return (
            False,
            f"{words} {adjusted:.1f}% is under --fail-under {threshold:g}% "
            f"by {threshold - adjusted:.1f} points",
        )
    return True, f"{words} {adjusted:.1f}% meets --fail-under {threshold:g}%"


def probe_spend(spend: dict | None) -> str:
    """The probe's budget and what it spent, in one line ("" when nothing was planned)."""
    if not spend or not spend.get("planned"):
        return ""
    cached = f", {spend['cached_jobs']} from the cache" if spend.get("cached_jobs") else ""
    retried = f"; {spend['retried']} survivors ran again" if spend.get("retried") else ""
    return (
        f"{spend['planned']} inputs planned, {spend.get('mutant_runs', 0)} runs on mutants, "
        f"{spend.get('original_runs', 0)} on the original ({spend.get('originals_saved', 0)} "
        f"saved by sharing), {spend.get('unusable', 0)} inputs left out (the original "
        f"rejects or varies on them), {spend.get('jobs', 0)} jobs{cached}, "
        f"{spend.get('seconds', 0):.1f} s{_budget(spend)}{retried}"
    )


def _budget(spend: dict) -> str:
    if spend.get("budget_s") is None:
        return ""
    return f" ({spend.get('job_s', 0):.1f} s of jobs, the time budget {spend['budget_s']:.1f} s)"


#: the per-test-line view of the tolerance check names this many lines at most
TOLERANCE_LINES = 5


def short_number(x: float) -> str:
    """A tolerance or an error in few characters (0.061, 3.1e-04, inf), as the tolerance
    check writes them (``checks/tolerance.short``; the faces read the report, not it)."""
    if math.isinf(x):
        return "inf"
    return f"{x:.2g}" if x == 0 or 1e-3 <= abs(x) < 1e4 else f"{x:.1e}"


def tolerance_line_words(line: dict) -> str:
    """One line of the report's ``checks.tolerance.lines`` in words, as the check says
    it (``checks/tolerance.line_words``): 'tests/test_x.py:88 lets 7 survivors through
    at atol 0.2; at atol 0.002 (the original needs 0.0004 there) the checked proposals
    kill 6' (the rtol, or an atol with rtol 0, where only such a proposal did)."""
    n = len(line["survivors"])
    head = (
        f"{line['where']} lets {n} survivor{'s' if n != 1 else ''} through at atol "
        f"{short_number(line['atol'])}"
    )
    if not line["killed"]:
        return f"{head}; no checked tolerance separates them"
    route, need = tolerance_route(line)
    value = short_number(line[f"{route}_checked"]) + (" with rtol 0" if route == "abs" else "")
    name = "rtol" if route == "rtol" else "atol"
    return (
        f"{head}; at {name} {value} (the original needs {short_number(line.get(need) or 0.0)} "
        f"there) the checked proposals kill {len(line['killed'])}"
    )


#: a per-line entry's checked proposal of each kind, and the original's need beside it
TOLERANCE_ROUTES = (
    ("atol", "original_atol_needed"),
    ("rtol", "original_rtol_needed"),
    ("abs", "original_max_abs"),
)


def tolerance_route(line: dict) -> tuple[str, str]:
    """The kind of a per-line entry's checked proposal said first (atol, rtol, or an atol
    with rtol 0: ``abs``) and the field of the original's need of it."""
    found = (r for r in TOLERANCE_ROUTES if line.get(f"{r[0]}_checked") is not None)
    return next(found, TOLERANCE_ROUTES[0])


def tolerance_kills(report: dict) -> list[dict]:
    """The test lines whose checked tighter tolerance kills survivors, most kills first
    (the report's order); [] for a report without the tolerance check."""
    section = (report.get("checks") or {}).get("tolerance")
    lines = section.get("lines") if isinstance(section, dict) else None
    return [x for x in lines or [] if isinstance(x, dict) and x.get("killed")]


def tolerance_view(report: dict) -> list[str]:
    """The per-test-line view every face shows after its survivors: the first
    ``TOLERANCE_LINES`` lines that kill, each in words."""
    return [tolerance_line_words(x) for x in tolerance_kills(report)[:TOLERANCE_LINES]]


def tolerance_line(row: dict) -> str:
    """A row's tolerance sentence (its ``tolerance.line``); "" where the check left none."""
    section = row.get("tolerance")
    return str(section.get("line") or "") if isinstance(section, dict) else ""
