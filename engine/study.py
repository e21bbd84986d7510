"""A study's table: pure functions from finished run reports to rows and summaries.

``study_row(report, ...)`` reads one run: what killed each mutant, split by where the
kill came from (the checks the file brought, stage 1's tests, stage 2's killers, the
probe), stage 1's acceptance (first try / after k retries / never), the model's
EQUIVALENT claims and whether execution contradicted them, tokens, cost, wall time.
``summarize`` gathers the repeats of one (model, file) into a mean and a spread.

Kills are attributed by where they were recorded: ``checks`` are the kills of the
mutants' own jobs (the file's checks, and stage 1's tests, which join those jobs; a
bounds, crash or timeout kill does not say which check ran into it); a kill recorded
later by stage 2 or the probe (a verdict change of that stage) counts for that stage.
``own`` (the file's checks alone) is therefore measured by the file's model-free row,
whose jobs hold no stage-1 test: ``attribute_own`` copies it to the file's other rows,
whose ``checks`` are then own + stage 1.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Sequence

COLUMNS = (
    "model",
    "file",
    "repeat",
    "mutants",
    "own",
    "own+stage1",
    "own+stage1+stage2",
    "probe",
    "killed",
    "survived",
    "stage1",
    "claims",
    "claims_refuted",
    "prompt_tokens",
    "completion_tokens",
    "model_calls",
    "cached_calls",
    "cost_usd",
    "wall_s",
)
#: Columns summarised over repeats (mean and min-max).
NUMERIC = (
    "own",
    "own+stage1",
    "own+stage1+stage2",
    "probe",
    "killed",
    "claims",
    "claims_refuted",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "wall_s",
)


def _kill_source(row: dict) -> str:
    for change in row.get("changes") or []:
        if change.get("now") == "killed" and change.get("stage") in ("stage2", "probe"):
            return change["stage"]
    return "checks"


def stage1_acceptance(report: dict) -> str:
    """first try | after k retries | never | not asked."""
    record = report.get("stage1")
    if not isinstance(record, dict):
        return "not asked"
    accepted = record.get("accepted")
    if not accepted:
        return "never"
    attempt = accepted.get("attempt")
    if attempt == 1:
        return "first try"
    if isinstance(attempt, int):
        return f"after {attempt - 1} retries"
    return "after retries"


def _kills_and_claims(rows: list[dict]) -> tuple[dict[str, int], int, int]:
    """(kills by what killed them, mutants the model claimed equivalent, those claims
    refuted: the mutant was not judged equivalent)."""
    sources = {"checks": 0, "stage2": 0, "probe": 0}
    claims = refuted = 0
    for row in rows:
        if row.get("verdict") == "killed":
            sources[_kill_source(row)] += 1
        model_claims = [c for c in row.get("claims") or [] if c.get("by") == "stage2"]
        if model_claims:
            claims += 1
            if row.get("verdict") != "equivalent":
                refuted += 1
    return sources, claims, refuted


def study_row(report: dict, *, model: str, file: str, repeat: int, wall_s: float) -> dict:
    sources, claims, refuted = _kills_and_claims(report.get("mutants", []))
    tokens = report.get("tokens") or {}
    score = report.get("score") or {}
    return {
        "model": model,
        "file": file,
        "repeat": repeat,
        "mutants": score.get("total", 0),
        "own": None,  # attribute_own: from the file's model-free row
        "own+stage1": sources["checks"],
        "own+stage1+stage2": sources["checks"] + sources["stage2"],
        "probe": sources["probe"],
        "killed": score.get("killed", 0),
        "survived": (score.get("by_verdict") or {}).get("survived", 0),
        "stage1": stage1_acceptance(report),
        "claims": claims,
        "claims_refuted": refuted,
        "prompt_tokens": tokens.get("prompt", 0),
        "completion_tokens": tokens.get("completion", 0),
        "model_calls": tokens.get("calls", 0) - tokens.get("cached_calls", 0),
        "cached_calls": tokens.get("cached_calls", 0),
        "cost_usd": tokens.get("cost_usd"),
        "wall_s": round(wall_s, 2),
        "run_id": report.get("run_id"),
    }


def attribute_own(rows: Sequence[dict], model_free: str) -> None:
    """Fill ``own`` (the file's checks alone) from the file's model-free row, whose
    jobs ran no stage-1 test; that row's ``own+stage1`` is its ``own``."""
    own = {r["file"]: r["own+stage1"] for r in rows if r["model"] == model_free}
    for row in rows:
        row["own"] = own.get(row["file"])


def _spread(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "unknown"
    mean = statistics.fmean(known)
    text = f"{mean:.4g}"
    if len(known) > 1 and min(known) != max(known):
        text += f" ({min(known):g}-{max(known):g})"
    return text


def summarize(rows: Sequence[dict]) -> list[dict]:
    """One line per (model, file): means over repeats, min-max in brackets, and how
    stage 1 went on each repeat."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["file"]), []).append(row)
    out = []
    for (model, file), members in groups.items():
        line = {"model": model, "file": file, "repeats": len(members)}
        line["mutants"] = members[0]["mutants"]
        for key in NUMERIC:
            line[key] = _spread([m[key] for m in members])
        line["stage1"] = ", ".join(m["stage1"] for m in members)
        out.append(line)
    return out


def markdown_table(rows: Sequence[dict]) -> str:
    summary = summarize(rows)
    keys = ["model", "file", "repeats", "mutants", *NUMERIC, "stage1"]
    out = [
        "# mutant-gate study",
        "",
        "Means over repeats, min-max in brackets. Kills: `own` by the file's checks alone, "
        "then with stage 1's tests, then with stage 2's killers; `probe`: the model-free "
        "probe's kills. `claims`: survivors the model called EQUIVALENT; `claims_refuted`: "
        "those execution contradicted.",
        "",
        "| " + " | ".join(keys) + " |",
        "|" + "---|" * len(keys),
    ]
    for line in summary:
        out.append("| " + " | ".join(str(line[k]).replace("|", "\\|") for k in keys) + " |")
    out += ["", "## Every run", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        out.append("| " + " | ".join(str(row[k]) for k in COLUMNS) + " |")
    return "\n".join(out) + "\n"


def csv_text(rows: Sequence[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*COLUMNS, "run_id"], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    return buffer.getvalue()
