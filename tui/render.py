"""Text for the inspector, from report rows: pure functions, no widgets.

The report's per-mutant fields grow as the writers and checks land (``oracle``,
``compile``, ``claims``, ``attempts``; the report's ``tests`` with ``source`` and
``kills``). Each renderer takes what is there and ignores what is not, so a
field that arrives in a new shape still shows, as plain data, under "more".
"""

from __future__ import annotations

from functools import lru_cache

from textual.content import Content
from textual.highlight import highlight

from mutant_gate.engine.formats.words import probe_text, shown_claims
from mutant_gate.engine.report import ROW_FIELDS
from mutant_gate.engine.vocabulary import by_words, origin_words
from mutant_gate.tui.model import survivor_kind

#: Row fields the inspector shows in their own sections; anything else goes under "more".
KNOWN_FIELDS = ROW_FIELDS | {
    *("oracle", "compile", "claims", "attempts", "probe", "accepted"),
    "survivor",  # said in the why and the verdict label
    "tolerance",  # the tolerance check's line: its own section
}

ADDED = "on $success-muted"
REMOVED = "on $error-muted"


@lru_cache(maxsize=512)
def code_content(source: str) -> Content:
    return highlight(source.rstrip("\n"), language="python")


@lru_cache(maxsize=512)
def diff_content(diff: str) -> Content:
    """A unified diff with Python highlighting and added/removed line backgrounds."""
    lines = diff.rstrip("\n").split("\n")
    headers = {i for i, ln in enumerate(lines) if ln.startswith(("---", "+++", "@@"))}
    code = "\n".join("" if i in headers else ln[1:] for i, ln in enumerate(lines))
    highlighted = highlight(code, language="python").split("\n")
    out = []
    for i, line in enumerate(lines):
        if i in headers:
            out.append(Content.styled(line, "$text-muted" if line[:1] in "+-" else "$text-accent"))
            continue
        sign = line[:1] or " "
        body = highlighted[i] if i < len(highlighted) else Content(line[1:])
        row = Content.assemble(sign, body)
        if sign == "+":
            row = row.stylize_before(ADDED)
        elif sign == "-":
            row = row.stylize_before(REMOVED)
        out.append(row)
    return Content("\n").join(out)


def why(row: dict, state: str, *, oracle_on: bool = False, stopped: str | None = None) -> str:
    """The verdict in a sentence or two: what decided it, and what to do next.

    ``oracle_on``: the diff-oracle runs on survivors (it is not suggested then);
    ``stopped``: why the run stopped before this mutant had a result."""
    reason = row.get("reason") or ""
    if state in ("pending", "running") and stopped:
        return f"Not run: the run stopped before this mutant had a result: {stopped}"
    if state == "pending":
        return "Queued: no result yet."
    if state == "running":
        return "Running in the sandbox."
    if state == "killed":
        return f"Killed by {by_words(row.get('by'))}: {reason}"
    if state == "survived" and isinstance(row.get("accepted"), dict):
        entry = row["accepted"]
        added = f", added {entry['added']}" if entry.get("added") else ""
        where = f" in {entry['file']}" if entry.get("file") else ""
        return (
            f"Survived: {reason or 'every check passed'}. Accepted by the team{where}"
            f"{added}: {entry.get('reason', '')}. The CI gate leaves it out of the adjusted "
            "score while its function is unchanged (never counted as killed)."
        )
    if state == "survived":
        kind = survivor_kind(row)
        if kind == "hidden_by_tolerance":
            return (
                f"Survived: {reason or 'every check passed'}. Hidden by tolerance: "
                f"{row['survivor'].get('why', '')}. A test gap: tighten that assertion, or "
                "accept it with a reason (a)."
            )
        if kind == "differs":
            return (
                f"Survived: {reason or 'every check passed'}. Outputs differ: "
                f"{row['survivor'].get('why', '')}. A test gap: add a test that checks those "
                "outputs (--tests), mark it (space) for stage 2, or accept it with a reason (a)."
            )
        if kind == "identical":
            return (
                f"Survived: {reason or 'every check passed'}. No difference observed: "
                f"{row['survivor'].get('why', '')}. Still a survivor (identical on the launches "
                "the checks make is no proof): mark it (space) for stage 2 to look for inputs "
                "that tell it apart, or accept it with a reason (a)."
            )
        oracle = (
            ""
            if oracle_on or row.get("oracle")
            else "turn on the diff-oracle (o) to see whether its outputs even differ, "
        )
        return (
            f"Survived: {reason or 'every check passed'}. Nothing tells this bug apart. "
            f"Mark it (space) for stage 2, {oracle}add a test (--tests), or accept it "
            "with a reason (a)."
        )
    if state == "equivalent":
        return f"Claimed equivalent (a claim, not a proof): {reason}"
    if state == "not_compilable":
        said = reason.removeprefix("does not compile").lstrip(": ")
        return f"Set aside (not counted in the adjusted score): it does not compile: {said}"
    if state == "error":
        return f"The harness failed; never counted as killed: {reason}"
    return reason


#: The oracle's fields, in words, in the order they are shown under its table.
ORACLE_FACTS = {
    "launches": "launches compared",
    "checks": "checks in the oracle's run",
    "undefined_lanes": "undefined lanes read",
    "masked_only": "differs only on masked-off lanes",
    "divergence": "launch sequences",
    "poisoned": "rerun with undefined lanes poisoned",
    "timed_out": "timed out",
    "seconds": "time",
}


def oracle_content(oracle: object) -> Content:
    """The diff-oracle's sentence, a table of what differed (per launch: kernel, tensor,
    elements, max abs / rel difference, first index), then its facts in words."""
    if isinstance(oracle, str):
        return Content(oracle)
    if not isinstance(oracle, dict):
        return Content(words(oracle))
    parts = [Content.styled(str(oracle.get("sentence") or oracle.get("summary") or ""), "bold")]
    if oracle.get("interpreter_dependent"):
        parts.append(
            Content(
                "Interpreter-dependent: only masked-off lanes change, and those are "
                "undefined on a GPU."
            )
        )
    diffs = [d for d in oracle.get("diffs") or [] if isinstance(d, dict)]
    if diffs:
        parts.append(
            table(
                ("launch", "kernel", "tensor", "elements", "max abs", "max rel", "first at"),
                [
                    (
                        d.get("launch"),
                        d.get("kernel"),
                        d.get("argument"),
                        d.get("count"),
                        d.get("max_abs"),
                        d.get("max_rel"),
                        d.get("first_index"),
                    )
                    for d in diffs
                ],
            )  # fmt: skip
        )
    elif oracle.get("identical") is not None:
        parts.append(Content("outputs identical" if oracle["identical"] else "outputs differ"))
    shown = {"sentence", "summary", "interpreter_dependent", "identical", "diffs", "contradiction"}
    facts = [(ORACLE_FACTS[k], _oracle_value(k, oracle[k])) for k in ORACLE_FACTS if k in oracle]
    facts += [
        (k.replace("_", " "), v) for k, v in oracle.items() if k not in ORACLE_FACTS.keys() | shown
    ]
    parts.append(fact_lines(facts))
    return Content("\n").join(p for p in parts if p.plain)


def tolerance_content(section: object, test_line: str = "") -> Content:
    """The tolerance check's line on a survivor (the assertion, the errors seen, the
    tolerance that kills it), then what its test line lets through in all."""
    if not isinstance(section, dict):
        return Content(words(section))
    parts = [Content.styled(str(section.get("line") or ""), "bold")]
    if test_line:
        parts.append(Content.assemble(("this test line: ", "$text-muted"), test_line))
    return Content("\n").join(p for p in parts if p.plain)


def _oracle_value(key: str, value: object) -> object:
    if value is None:
        return {"divergence": "the same in both", "poisoned": "not needed"}.get(key, value)
    if key == "seconds" and isinstance(value, int | float):
        return f"{value:.2f} s"
    return value


def compile_content(results: object) -> Content:
    """``{target: {ok, message, seconds}}`` as a table: target, result, time, message."""
    if isinstance(results, list):
        results = {str(r.get("target", i)): r for i, r in enumerate(results) if isinstance(r, dict)}
    if not isinstance(results, dict):
        return Content(words(results))
    rows = []
    for target, result in results.items():
        if not isinstance(result, dict):
            rows.append((target, words(result), None, None))
            continue
        ok = result.get("ok")
        mark = "compiles" if ok else ("does not compile" if ok is False else "?")
        rows.append(
            (target, mark, result.get("seconds"), result.get("message") or result.get("error"))
        )
    return table(("target", "result", "seconds", "compiler says"), rows)


def table(headers: tuple[str, ...], rows: list[tuple]) -> Content:
    """Columns aligned in monospace, the header bold; empty cells as a dash."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    last = len(headers) - 1

    def line(values) -> str:
        return "  ".join(v if i == last else v.ljust(widths[i]) for i, v in enumerate(values))

    lines = [Content.styled(line(headers), "bold")]
    lines += [Content(line(r)) for r in cells]
    return Content("\n").join(lines)


def fact_lines(facts: list[tuple[str, object]]) -> Content:
    """``label  value`` lines, labels aligned, values in words."""
    if not facts:
        return Content("")
    width = max(len(label) for label, _ in facts)
    return Content("\n").join(
        Content.assemble((label.ljust(width) + "  ", "$text-muted"), words(value))
        for label, value in facts
    )


def _cell(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_cell(v) for v in value) + "]" if value else "-"
    return "-" if value is None or value == "" else words(value)


def words(value: object) -> str:
    """Any report value as a person reads it: no braces, no quotes, no JSON."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        return (
            ", ".join(f"{str(k).replace('_', ' ')} {words(v)}" for k, v in value.items()) or "none"
        )
    if isinstance(value, list | tuple):
        return ", ".join(words(v) for v in value) or "none"
    return str(value)


def writers_content(claims: object, attempts: object, probe: object = None) -> Content:  # noqa: C901 - listed in tests/test_complexity.py
    """What the test writers did: claims (model or probe), the probe's search, and the
    tests tried with why each was kept or rejected (the stage-2 transcript)."""
    parts: list[Content] = []
    if isinstance(probe, dict) and probe:
        text = probe_text({"probe": probe})
        if probe.get("probes") is not None:
            text += f" ({probe['probes']} inputs tried)"
        parts.append(Content.assemble(("probe: ", "bold"), text))
    elif probe:
        parts.append(Content.assemble(("probe: ", "bold"), words(probe)))
    if isinstance(claims, list):  # a probe that found nothing claims nothing
        claims = shown_claims({"claims": claims}) + [c for c in claims if not isinstance(c, dict)]
    for claim in claims if isinstance(claims, list) else ([claims] if claims else []):
        if isinstance(claim, dict):
            who = claim.get("by") or claim.get("writer") or claim.get("origin") or "writer"
            what = claim.get("claim") or claim.get("kind") or claim.get("verdict") or "claim"
            reason = claim.get("reason") or claim.get("why") or ""
            line = Content.assemble((f"{who}: ", "bold"), (str(what).upper(), "bold"))
            if reason:
                line = Content.assemble(line, f": {reason}")
            parts.append(line)
            for key in ("contradicted", "contradiction", "oracle"):
                if claim.get(key):
                    parts.append(Content.styled(f"  {key}: {words(claim[key])}", "$text-error"))
            evidence = claim.get("evidence")
            if isinstance(evidence, dict) and evidence:
                parts.append(
                    fact_lines([(f"  {k.replace('_', ' ')}", v) for k, v in evidence.items()])
                )
        else:
            parts.append(Content(str(claim)))
    for n, attempt in enumerate(attempts if isinstance(attempts, list) else [], 1):
        if not isinstance(attempt, dict):
            parts.append(Content(f"attempt {n}: {attempt}"))
            continue
        outcome = attempt.get("outcome") or attempt.get("status") or attempt.get("verdict") or ""
        reason = attempt.get("reason") or attempt.get("why") or attempt.get("error") or ""
        head = f"attempt {n}" + (f" ({attempt['origin']})" if attempt.get("origin") else "")
        line = Content.styled(head, "bold")
        if outcome:
            line = Content.assemble(line, f": {outcome}")
        if reason:
            line = Content.assemble(line, f" — {reason}")
        parts.append(line)
        if attempt.get("reply") and not attempt.get("source"):
            parts.append(Content.styled(str(attempt["reply"]).rstrip(), "$text-muted"))
        source = attempt.get("source") or attempt.get("test")
        if isinstance(source, str) and source.strip():
            parts.append(code_content(source))
    return Content("\n").join(parts)


def test_content(test: dict) -> Content:
    head = Content.styled(str(test.get("name", "?")), "bold")
    facts = [origin_words(test)] if test.get("origin") else []
    if test.get("status"):
        facts.append(f"{test['status']} on the original")
    if test.get("kills"):
        facts.append(f"kills {len(test['kills'])}")
    if facts:
        head = Content.assemble(head, (f"  ({', '.join(facts)})", "$text-muted"))
    source = test.get("source")
    return Content("\n").join([head, code_content(source)]) if source else head


def inline(data: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in data.items())
