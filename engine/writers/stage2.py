"""Stage 2: the model answers one survivor at a time, with a killer test or EQUIVALENT.

It sees the survivor's diff, the kernel file and the current tests. A killer test
counts only when the sandbox shows it passing the original (every seed) and failing
the mutant; every rejected attempt is kept on the mutant (``attempts``, with why) and
its reason goes back to the model, up to ``attempts`` replies. EQUIVALENT is recorded
as the model's claim (``claims``) and nothing more: the verdict stays ``survived``
until execution backs the claim (``checks/claims.py``: the oracle finds the outputs
identical, poisoned lanes included, and the probe found no difference); only then is
the mutant ``equivalent`` and left out of the adjusted score, listed there.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator

from ..events import Event, TestRejected, WriterNote
from ..kernel_file import TestFile
from ..records import Mutant, Verdict
from ..stage import StageContext
from . import prompts, proving, reading
from .llm import LLMError, Reply
from .model import ModelSession

_EQUIVALENT = re.compile(r"^[ \t>*_`#]*EQUIVALENT\b[ \t*_`]*[:\-\u2013\u2014]?\s*(.*)", re.S | re.M)

NO_ANSWER = (
    "Your reply has neither a ```python code block nor a line starting with EQUIVALENT. "
    "Reply with the whole killer test file in one ```python block, or `EQUIVALENT: <reason>`."
)


def equivalent_reason(text: str, anywhere: bool = False) -> str | None:
    """The reason of an ``EQUIVALENT`` answer: the reply's first word, or (``anywhere``)
    the first word of any line. None when the reply does not say it."""
    text = (text or "").strip()
    match = _EQUIVALENT.search(text) if anywhere else _EQUIVALENT.match(text)
    if match is None:
        return None
    return " ".join(match.group(1).split()) or "(no reason given)"


def stage2(ctx: StageContext, w: ModelSession, survivors: list[Mutant]) -> Iterator[Event]:
    assert w.client is not None
    for mutant in survivors:
        if ctx.ledger.verdict(mutant.id) is not Verdict.SURVIVED:
            continue
        if w.broken:
            yield WriterNote("stage2", f"stage 2 stopped: {w.broken}", "error")
            return
        stopped = yield from _ask_about(ctx, w, mutant)
        if stopped:
            return
    yield from _probe_claimed(ctx, survivors)


def _ask_about(ctx: StageContext, w: ModelSession, mutant: Mutant) -> Generator[Event, None, bool]:
    """The model's replies on one survivor, until a killer test is accepted, it claims the
    mutant equivalent, or the attempts run out; True where a model failure stops stage 2."""
    client = w.client
    assert client is not None
    settings = ctx.settings.writers
    messages = _first_messages(ctx, mutant)
    name = f"{reading.file_stem(ctx)}_stage2_{mutant.id}.py"
    for attempt in range(1, settings.attempts + 1):
        yield WriterNote(
            "stage2",
            f"asking {client.settings.model} about {mutant.id} ({mutant.operator}, line "
            f"{mutant.line}; {attempt}/{settings.attempts})",
            mutant_id=mutant.id,
        )
        try:
            reply = client.chat(messages)
        except LLMError as exc:
            yield w.model_failed("stage2", exc)
            return exc.fatal
        w.update_tokens()
        messages.append({"role": "assistant", "content": reply.content})
        reason, code = _reason_and_code(reply.content)
        if reason is not None:
            yield _claim_equivalent(ctx, mutant, reason, reply.cached)
            return False
        if code is None:
            why = _no_answer_why(reply)
            _reject(ctx, mutant, attempt, why, None, reply.content)
            yield TestRejected("stage2", attempt, why, mutant.id)
            messages.append({"role": "user", "content": NO_ANSWER})
            continue
        problem = reading.static_problem(code, ctx.kernel.module)
        if problem is not None:
            _reject(ctx, mutant, attempt, problem, code)
            yield TestRejected("stage2", attempt, problem, mutant.id)
            messages.append(prompts.retry_message(problem[0].upper() + problem[1:] + "."))
            continue
        code = reading.rename_taken(code, reading.taken_names(ctx))
        test = TestFile(path="", name=name, source=code, origin="stage2")
        proof = proving.prove_killer(ctx, proving.Asked(test, mutant))
        if not proof.ok:
            _reject(ctx, mutant, attempt, proof.why, code)
            yield TestRejected("stage2", attempt, proof.why, mutant.id)
            messages.append(prompts.retry_message(proof.feedback or proof.why))
            continue
        yield from proving.accept_killer(ctx, "stage2", test, mutant, proof, ctx.mutants)
        return False
    return False


def _first_messages(ctx: StageContext, mutant: Mutant) -> list[dict]:
    """The conversation's opening about a survivor: its diff, why it survived, and what
    the probe found (``prompts.stage2_messages``)."""
    probe = ctx.ledger.details(mutant.id).get("probe", {}).get("result", "")
    outcome = ctx.ledger.outcome(mutant.id)
    return prompts.stage2_messages(
        ctx.kernel, mutant.diff, outcome.reason if outcome else "", probe
    )


def _reason_and_code(content: str) -> tuple[str | None, str | None]:
    """A reply's EQUIVALENT reason (looked for anywhere in it when it has no code either)
    and its test code; None for what it lacks."""
    reason = equivalent_reason(content)
    code = reading.extract_code(content)
    if reason is None and code is None:
        reason = equivalent_reason(content, anywhere=True)
    return reason, code


def _no_answer_why(reply: Reply) -> str:
    """Why a reply with neither code nor EQUIVALENT is rejected (cut off, if it was)."""
    why = "no code and no EQUIVALENT in the reply"
    if reply.finish_reason == "length":
        why += " (it was cut off at the token limit)"
    return why


def _claim_equivalent(ctx: StageContext, mutant: Mutant, reason: str, cached: bool) -> WriterNote:
    """The model's EQUIVALENT answer kept as its claim, and said. A claim, not a verdict:
    it excludes the mutant from the adjusted score only once execution backs it
    (``checks/claims.py``, after the writers)."""
    proving.add_claim(
        ctx,
        mutant.id,
        {
            "by": "stage2",
            "claim": "equivalent",
            "reason": reason,
            "cached": cached,
            "evidence": None,
        },
    )
    return WriterNote(
        "stage2",
        f"the model claims {mutant.id} is equivalent: {reason}",
        mutant_id=mutant.id,
    )


def _probe_claimed(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """A claim needs the probe's evidence (``checks/claims.py``): where the probe did not
    run on a survivor the model called equivalent (``--writer none``, the explorer's
    chosen survivors), run it now. A hit kills the mutant and so refutes the claim."""
    unprobed = [
        m
        for m in survivors
        if ctx.ledger.verdict(m.id) is Verdict.SURVIVED
        and any(c.get("by") == "stage2" for c in proving.claims(ctx, m.id))
        and not ctx.ledger.details(m.id).get("probe")
    ]
    if not unprobed:
        return
    from .probe.stage import probe_stage

    yield WriterNote(
        "stage2", f"{len(unprobed)} equivalence claims need the probe's evidence: probing them"
    )
    yield from probe_stage(ctx, unprobed)


def _reject(
    ctx: StageContext, mutant: Mutant, attempt: int, why: str, source: str | None, reply: str = ""
) -> None:
    entry: dict = {"by": "stage2", "attempt": attempt, "why": why, "source": source}
    if reply:
        entry["reply"] = reply[:2000]
    proving.add_attempt(ctx, mutant.id, entry)
