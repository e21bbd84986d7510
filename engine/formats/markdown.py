"""A Markdown summary fit for a pull-request comment (GitHub-flavoured).

It leads with the gate and the score, then what a reviewer acts on: the survivors
with their diffs folded under ``<details>``, then exclusions and harness errors. It
stays under GitHub's comment limit (65,536 characters): past it, fewer diffs and then
fewer survivor rows are listed, saying how many were left out.
"""

from __future__ import annotations

from .. import predictions
from ..vocabulary import GLYPHS
from ..vocabulary import REPORT_STATES as VERDICTS
from .modules import STATUS_WORDS, is_library, kernel_counts, module_score, modules_by_survivors
from .words import (
    TOLERANCE_LINES,
    claim_lines,
    counts,
    gate,
    kernel_name,
    oracle_sentence,
    percent,
    probe_spend,
    probe_text,
    score_phrases,
    tolerance_kills,
    tolerance_line_words,
    tool_version,
)

#: GitHub rejects comments longer than this.
COMMENT_LIMIT = 65536
#: test cases named per kernel under "Test cases per kernel" (the JSON report has all)
MAX_CASES = 20


def _cell(text: object) -> str:
    """Text safe inside a table cell: pipes escaped, one line."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    text = text.replace("\n", " ")
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _fenced(text: str, lang: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _mine(score: dict) -> str:
    return "your tests: " if "with_written" in score else ""


#: a survivor's kind (``row["survivor"]``), in the order survivors are listed
KINDS = ("hidden_by_tolerance", "differs", "identical", "not_checked")
KIND_WORDS = {
    "hidden_by_tolerance": "hidden by tolerance",
    "differs": "outputs differ",
    "identical": "no difference observed",
}


def _kind(row: dict) -> str | None:
    """The survivor's checked kind (``hidden_by_tolerance``, ``differs``, ``identical``),
    or None."""
    kind = row.get("survivor")
    name = kind.get("kind") if isinstance(kind, dict) else None
    return name if name in KIND_WORDS else None


def _oracle_cell(row: dict) -> str:
    """The diff-oracle's column: the survivor's kind and why where it was checked."""
    name = _kind(row)
    if name is None:
        return oracle_sentence(row) or ""
    return f"**{KIND_WORDS[name]}**: {row['survivor'].get('why', '')}"


def _kinds_sentence(survivors: list[dict]) -> str:
    kinds = [_kind(r) for r in survivors]
    parts = []
    if "hidden_by_tolerance" in kinds:
        parts.append(
            f"{kinds.count('hidden_by_tolerance')} **hidden by tolerance**: a tighter "
            "tolerance at the test line, checked, kills each (tighten that assertion)"
        )
    if "differs" in kinds:
        parts.append(
            f"{kinds.count('differs')} where **outputs differ** and the checks pass "
            "(a test gap: each needs a test that checks those outputs)"
        )
    if "identical" in kinds:
        parts.append(
            f"{kinds.count('identical')} with **no difference observed** on the checks' "
            "launches (still survivors: identical there is no proof)"
        )
    if None in kinds:
        parts.append(f"{kinds.count(None)} not checked by the diff-oracle")
    return "Bugs the checks let through: " + "; ".join(parts) + "."


def _survivors_part(survivors: list[dict], max_diffs: int, max_rows: int) -> list[str]:
    """The survivors' table (sorted by what the diff-oracle showed, where it ran) and
    the first ``max_diffs`` diffs; nothing without survivors."""
    out: list[str] = []
    checked = any(_kind(r) for r in survivors)
    if checked:  # hidden by tolerance, outputs differ, no difference observed, not checked
        survivors.sort(key=lambda r: KINDS.index(_kind(r) or "not_checked"))
    if survivors:
        out += [
            "",
            f"### Survivors ({len(survivors)})",
            "",
            _kinds_sentence(survivors)
            if checked
            else "Bugs the checks let through: each needs a test that fails on it.",
            "",
            "| id | operator | where | change | probe | diff-oracle |",
            "|---|---|---|---|---|---|",
        ]
        for r in survivors[:max_rows]:
            out.append(
                f"| `{r['id']}` | {_cell(r.get('operator'))} | {_where(r)}"
                f"`{_cell(r.get('function'))}` line {r.get('line')} | "
                f"{_cell(_code(r.get('before', '')))} → {_cell(_code(r.get('after', '')))} | "
                f"{_cell(probe_text(r))} | {_cell(_oracle_cell(r))} |"
            )
        if len(survivors) > max_rows:
            out.append(f"| … | {len(survivors) - max_rows} more | | | | |")
        out += _survivor_diffs(survivors, max_diffs)
    return out


def _survivor_diffs(survivors: list[dict], max_diffs: int) -> list[str]:
    """The first ``max_diffs`` survivors' diffs, each folded, and how many more there are."""
    shown = survivors[:max_diffs]
    out = [""]
    for r in shown:
        out += [
            f"<details><summary><code>{r['id']}</code> {r.get('operator')} in "
            f"<code>{r.get('function')}</code> line {r.get('line')}</summary>",
            "",
            _fenced(r.get("diff") or "", "diff"),
            "",
            "</details>",
        ]
    if len(survivors) > len(shown):
        out.append(
            f"\n{len(survivors) - len(shown)} more survivor diffs are in the full report "
            "(`mutant-gate report RUN --format html`)."
        )
    return out


def _tolerance_part(report: dict) -> list[str]:
    """The per-test-line view: the assertions whose checked tighter tolerance kills
    survivors, most kills first; nothing where the tolerance check hid none."""
    lines = tolerance_kills(report)
    if not lines:
        return []
    shown = lines[:TOLERANCE_LINES]
    out = ["", "### What the tolerance hid", ""]
    out += [  # the line's words, its test line as code
        f"- {_code(x['where'])}{tolerance_line_words(x)[len(x['where']) :]}" for x in shown
    ]
    if len(lines) > len(shown):
        out.append(f"- … {len(lines) - len(shown)} more test lines in the JSON report")
    return out


def _where(row: dict) -> str:
    """A library's row: its module's file first (a one-file run's rows name none)."""
    return f"`{_cell(row['file'])}` " if row.get("file") else ""


def modules_part(report: dict, max_rows: int) -> list[str]:
    """A library's modules, the most survivors first: mutants, killed and survivors (of
    your tests), the score or why it has none; then each module's kernels with
    survivors; nothing for a one-file run."""
    if not is_library(report):
        return []
    files = modules_by_survivors(report)
    out = [
        "",
        f"### Kernel modules ({len(files)})",
        "",
        "| module | mutants | killed | survived | score | status |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for f in files[:max_rows]:
        status = STATUS_WORDS.get(f.get("status"), f.get("status"))
        why = f": {f['reason']}" if f.get("reason") else ""
        out.append(
            f"| `{_cell(f['path'])}` | {f.get('mutants', 0)} | {f.get('killed', 0)} | "
            f"{f.get('survived', 0)} | {module_score(f)} | {_cell(status + why)} |"
        )
    if len(files) > max_rows:
        out.append(f"| … | {len(files) - max_rows} more | | | | |")
    return out + _kernels_table(report, files, max_rows)


def _kernels_table(report: dict, files: list[dict], max_rows: int) -> list[str]:
    """The judged modules' kernels with survivors (or not reached), the most survivors
    first; nothing where there is none."""
    kernels = _kernels_to_show(report, files)
    if not kernels:
        return []
    return ["", "| module | kernel | mutants | survived |", "|---|---|---:|---:|"] + [
        f"| `{_cell(f['path'])}` | `{_cell(k['function'])}` | {k['mutants']} | "
        f"{k['survived'] if k['reached'] else 'not reached'} |"
        for f, k in sorted(kernels, key=lambda fk: -fk[1]["survived"])[:max_rows]
    ]


def _kernels_to_show(report: dict, files: list[dict]) -> list[tuple[dict, dict]]:
    """(module record, kernel counts) of each kernel of a judged module that has
    survivors or that no case reached."""
    return [
        (f, k)
        for f in files
        if f.get("status") == "judged"
        for k in kernel_counts(report, f)
        if k["survived"] or not k["reached"]
    ]


def markdown_summary(report: dict, max_diffs: int = 25, max_rows: int = 200) -> str:
    """The summary, part by part in the order a reviewer reads it; past GitHub's comment
    limit, again with half the diffs (then, with none left, half the rows), and cut at
    the limit as a last resort."""
    out = _head(report)
    out += modules_part(report, max_rows)
    rows = report.get("mutants", [])
    out += _survivors_part(_open_survivors(rows), max_diffs, max_rows)
    out += _tolerance_part(report)
    out += _accepted_part(rows)
    out += _written_part(report, max_rows)
    out += _predictions_part(report)
    out += _excluded_part(rows)
    out += _cases_part(report)
    out += _errors_part(rows)
    out += _probe_part(report)
    out += _footer(report)
    text = "\n".join(out)
    if len(text) > COMMENT_LIMIT and (max_diffs > 0 or max_rows > 10):
        return markdown_summary(report, max_diffs // 2, max_rows if max_diffs else max_rows // 2)
    if len(text) > COMMENT_LIMIT:
        note = "\n\n… cut to fit a comment: the full report has everything.\n"
        return text[: COMMENT_LIMIT - len(note) - 1] + note
    return text


def _open_survivors(rows: list[dict]) -> list[dict]:
    """The survivors the baseline file does not accept."""
    return [r for r in rows if r.get("verdict") == "survived" and not r.get("accepted")]


def _head(report: dict) -> list[str]:
    """The title, the gate and the score; the written tests' score, an incomplete run,
    the functions ``--changed-since`` kept; the count of each verdict."""
    score = report.get("score") or {}
    per_verdict = counts(report)
    name = kernel_name(report)
    passed, sentence = gate(report)
    mark = {True: "✅", False: "❌", None: "ℹ️"}[passed]
    out = [
        f"## mutant-gate: `{name}`",
        "",
        f"{mark} {_mine(score)}**{score.get('killed', 0)}/{score.get('total', 0)} mutants "
        f"killed**, adjusted score **{percent(score.get('adjusted'))}** "
        f"(raw {percent(score.get('raw'))}); {sentence}.",
    ]
    with_written = score_phrases(score)[1]
    if with_written:
        out += ["", f"{with_written}: commit the written tests to make them yours."]
    if not report.get("complete", True):
        out.append("")
        out.append("> ⚠️ The run is incomplete: some mutants have no verdict (pending).")
    out += _changed_note(report.get("changed_since"))
    out += ["", "| verdict | mutants |", "|---|---:|"]
    out += [f"| {GLYPHS[v]} {v} | {per_verdict[v]} |" for v in VERDICTS if per_verdict[v]]
    return out


def _changed_note(changed: object) -> list[str]:
    """The jit functions ``--changed-since`` kept (its record: ``changed``), after a blank
    line; nothing where the run judged every function."""
    if not isinstance(changed, dict):
        return []
    functions = ", ".join(f"`{f}`" for f in changed.get("functions", [])) or "none"
    return ["", f"Only jit functions changed since `{changed.get('ref')}`: {functions}."]


def _accepted_part(rows: list[dict]) -> list[str]:
    """The survivors accepted in the baseline file, each with its reason."""
    accepted = [r for r in rows if r.get("verdict") == "survived" and r.get("accepted")]
    if not accepted:
        return []
    out = ["", f"### Accepted survivors ({len(accepted)}, not counted, never killed)", ""]
    out += [
        f"- `{r['id']}` {r.get('operator')} in `{r.get('function')}` line "
        f"{r.get('line')}: {(r.get('accepted') or {}).get('reason', '')}"
        for r in accepted
    ]
    return out


def _written_part(report: dict, max_rows: int) -> list[str]:
    """The tests the writers added, each with its time on the original and its kills."""
    written = [
        t for t in report.get("tests", []) if t.get("origin") in ("stage1", "stage2", "probe")
    ]
    if not written:
        return []
    out = ["", f"### Tests the writers added ({len(written)}, proved in the sandbox)", ""]
    return out + [_written_line(t) for t in written[:max_rows]]


def _written_line(test: dict) -> str:
    """One written test's item: its file and name, writer, time on the original, kills."""
    took = f", {test['original_s']:.2f} s on the original" if "original_s" in test else ""
    kills = ", ".join(f"`{k}`" for k in test.get("kills", [])) or "nothing"
    return (
        f"- `{test.get('file')}::{str(test.get('name', '')).split('::')[-1]}` "
        f"({test.get('origin')}{took}): kills {kills}"
    )


def _predictions_part(report: dict) -> list[str]:
    predicted = predictions.lines(report.get("predictions"))
    if not predicted:
        return []
    return ["", "### Predictions", ""] + [f"- {line}" for line in predicted]


def _excluded_part(rows: list[dict]) -> list[str]:
    """The mutants out of the adjusted score (equivalent, not compilable, flaky), each
    with why and the claims behind it."""
    out_of_score = ("equivalent", "not_compilable", "flaky")
    excluded = [r for r in rows if r.get("verdict") in out_of_score]
    if not excluded:
        return []
    out = ["", f"### Excluded from the adjusted score ({len(excluded)})", ""]
    return out + [_excluded_line(r) for r in excluded]


def _excluded_line(row: dict) -> str:
    """One excluded mutant's item: its verdict, why, and the claims the reason does not
    already say."""
    why = row.get("reason") or ""
    claims = "; ".join(claim_lines(row))
    return (
        f"- `{row['id']}` {row.get('operator')} line {row.get('line')}: **{row['verdict']}**"
        + (f": {why}" if why else "")
        + (f" ({claims})" if claims and claims not in why else "")
    )


def _cases_part(report: dict) -> list[str]:
    """The test cases that judge each kernel, the first ``MAX_CASES`` named."""
    judged = report.get("judged_by")
    if not isinstance(judged, dict) or not judged:
        return []
    return ["", "### Test cases per kernel", ""] + [
        _cases_line(function, cases) for function, cases in judged.items()
    ]


def _cases_line(function: str, cases: list[str]) -> str:
    """One kernel's item: how many cases judge it, the first ``MAX_CASES`` by name."""
    return (
        f"- `{function}`: {len(cases)} case{'s' if len(cases) != 1 else ''}"
        + (": " + ", ".join(f"`{c}`" for c in cases[:MAX_CASES]) if cases else "")
        + (f", … {len(cases) - MAX_CASES} more" if len(cases) > MAX_CASES else "")
    )


def _errors_part(rows: list[dict]) -> list[str]:
    errors = [r for r in rows if r.get("verdict") == "error"]
    if not errors:
        return []
    return ["", f"### Harness errors ({len(errors)}, never counted as killed)", ""] + [
        f"- `{r['id']}` {r.get('operator')}: {r.get('reason', '')}" for r in errors
    ]


def _probe_part(report: dict) -> list[str]:
    """The probe writer's kills of the survivors it took, and what it spent."""
    probe = (report.get("writers") or {}).get("probe") or {}
    if not probe.get("survivors"):
        return []
    killed = sum((probe.get("kills_by_trigger") or {}).values())
    spend = probe_spend(probe.get("spend"))
    return [
        "",
        f"Probe writer: {killed} of {probe['survivors']} survivors killed"
        + (f"; spend: {spend}." if spend else "."),
    ]


def _footer(report: dict) -> list[str]:
    """The run id and the toolchain, in small print."""
    toolchain = report.get("toolchain") or {}
    return [
        "",
        f"<sub>run `{report.get('run_id')}` · mutant-gate {tool_version()} · "
        f"triton {toolchain.get('triton', '?')} · torch {toolchain.get('torch', '?')} · "
        f"{toolchain.get('mode', 'interpret')} mode</sub>",
        "",
    ]
