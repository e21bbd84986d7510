"""Text for the inspector, from report rows: pure functions, no widgets.

The report's per-mutant fields grow as the writers and checks land (``oracle``,
``compile``, ``claims``, ``attempts``; the report's ``tests`` with ``source`` and
``kills``). Each renderer takes what is there and ignores what is not, so a
field that arrives in a new shape still shows, as plain data, under "more".
"""

from __future__ import annotations

import json
from functools import lru_cache

from textual.content import Content
from textual.highlight import highlight

from mutant_gate.engine.report import ROW_FIELDS
from mutant_gate.engine.vocabulary import by_words

#: Row fields the inspector shows in their own sections; anything else goes under "more".
KNOWN_FIELDS = ROW_FIELDS | {"oracle", "compile", "claims", "attempts", "probe"}

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


def why(row: dict, state: str) -> str:
    """The verdict in a sentence or two: what decided it, and what to do next."""
    reason = row.get("reason") or ""
    if state == "pending":
        return "Queued: no result yet."
    if state == "running":
        return "Running in the sandbox."
    if state == "killed":
        return f"Killed by {by_words(row.get('by'))}: {reason}"
    if state == "survived":
        return (
            f"Survived: {reason or 'every check passed'}. Nothing tells this bug apart. "
            "Mark it (space) for stage 2, turn on the diff-oracle (o) to see whether "
            "its outputs even differ, or add a test (--tests)."
        )
    if state == "equivalent":
        return f"Claimed equivalent (a claim, not a proof): {reason}"
    if state == "not_compilable":
        return f"Set aside: it does not compile. {reason}"
    if state == "error":
        return f"The harness failed; never counted as killed: {reason}"
    return reason


def oracle_content(oracle: object) -> Content:
    if isinstance(oracle, str):
        return Content(oracle)
    if not isinstance(oracle, dict):
        return Content(plain(oracle))
    parts = [Content.styled(str(oracle.get("sentence") or oracle.get("summary") or ""), "bold")]
    if oracle.get("interpreter_dependent"):
        parts.append(
            Content(
                "Interpreter-dependent: only masked-off lanes change, and those are "
                "undefined on a GPU."
            )
        )
    facts = []
    if oracle.get("launches") is not None:
        facts.append(f"launches compared: {oracle['launches']}")
    if oracle.get("identical") is not None:
        facts.append("identical" if oracle["identical"] else "outputs differ")
    if facts:
        parts.append(Content.styled(", ".join(facts), "$text-muted"))
    for diff in oracle.get("diffs") or []:
        parts.append(Content("  " + (inline(diff) if isinstance(diff, dict) else str(diff))))
    rest = {
        k: v
        for k, v in oracle.items()
        if k
        not in {"sentence", "summary", "interpreter_dependent", "launches", "identical", "diffs"}
    }
    if rest:
        parts.append(Content.styled(plain(rest), "$text-muted"))
    return Content("\n").join(p for p in parts if p.plain)


def compile_content(results: object) -> Content:
    """``{target: {ok, message}}`` as one line per target."""
    if isinstance(results, list):
        results = {str(r.get("target", i)): r for i, r in enumerate(results) if isinstance(r, dict)}
    if not isinstance(results, dict):
        return Content(plain(results))
    lines = []
    for target, result in results.items():
        if not isinstance(result, dict):
            lines.append(Content(f"{target}  {result}"))
            continue
        ok = result.get("ok")
        mark = "✓ compiles" if ok else ("✗ does not compile" if ok is False else "?")
        line = Content.assemble(
            (f"{target}  ", "bold"), (mark, "$text-success" if ok else "$text-error")
        )
        message = result.get("message") or result.get("error")
        if message:
            line = Content.assemble(line, f": {message}")
        lines.append(line)
    return Content("\n").join(lines)


def writers_content(claims: object, attempts: object, probe: object = None) -> Content:
    """What the test writers did: claims (model or probe), the probe's search, and the
    tests tried with why each was kept or rejected (the stage-2 transcript)."""
    parts: list[Content] = []
    if isinstance(probe, dict) and probe:
        text = str(probe.get("result") or "")
        if probe.get("probes") is not None:
            text += f" ({probe['probes']} inputs tried)"
        parts.append(Content.assemble(("probe: ", "bold"), text))
    elif probe:
        parts.append(Content.assemble(("probe: ", "bold"), plain(probe)))
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
                    parts.append(Content.styled(f"  {key}: {plain(claim[key])}", "$text-error"))
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
    facts = [f"{k} {test[k]}" for k in ("origin", "status") if test.get(k)]
    if test.get("kills"):
        facts.append(f"kills {len(test['kills'])}")
    if facts:
        head = Content.assemble(head, (f"  ({', '.join(facts)})", "$text-muted"))
    source = test.get("source")
    return Content("\n").join([head, code_content(source)]) if source else head


def inline(data: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in data.items())


def plain(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=1, sort_keys=True, default=str)
