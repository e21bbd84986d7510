"""Stage 2: the model answers one survivor at a time, with a killer test or EQUIVALENT.

It sees the survivor's diff, the kernel file and the current tests. A killer test
counts only when the sandbox shows it passing the original (every seed) and failing
the mutant; every rejected attempt is kept on the mutant (``attempts``, with why) and
its reason goes back to the model, up to ``attempts`` replies. EQUIVALENT is recorded
as the model's claim (``claims``) and the verdict becomes ``equivalent``, which is a
claim too: excluded from the adjusted score and listed there, never a kill; the
diff-oracle weighs it next, and a killer test accepted later still kills it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..events import Event, TestAccepted, TestRejected, WriterNote
from ..kernel_file import TestFile
from ..records import Mutant, MutantOutcome, Verdict
from . import common, prompts
from .llm import LLMError

if TYPE_CHECKING:
    from ..pipeline import Run
    from . import Writers

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


def stage2(run: Run, w: Writers, survivors: list[Mutant]) -> Iterator[Event]:
    client = w.client
    assert client is not None
    settings = run.settings.writers
    for mutant in survivors:
        if run.outcomes.get(mutant.id) is None or (
            run.outcomes[mutant.id].verdict is not Verdict.SURVIVED
        ):
            continue
        if w.broken:
            yield WriterNote("stage2", f"stage 2 stopped: {w.broken}", "error")
            return
        probe = run.details.get(mutant.id, {}).get("probe", {}).get("result", "")
        messages = prompts.stage2_messages(
            run.kernel, mutant.diff, run.outcomes[mutant.id].reason, probe
        )
        name = f"{common.file_stem(run)}_stage2_{mutant.id}.py"
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
                if exc.fatal:
                    return
                break
            w.update_tokens()
            messages.append({"role": "assistant", "content": reply.content})
            reason = equivalent_reason(reply.content)
            code = common.extract_code(reply.content)
            if reason is None and code is None:
                reason = equivalent_reason(reply.content, anywhere=True)
            if reason is not None:
                common.claims(run, mutant.id).append(
                    {"by": "stage2", "claim": "equivalent", "reason": reason}
                )
                # The verdict ``equivalent`` is a claim (excluded from the adjusted score and
                # listed there); the diff-oracle, after the writers, weighs it.
                old = run.outcomes[mutant.id]
                yield run.update(
                    mutant,
                    MutantOutcome(
                        mutant.id,
                        Verdict.EQUIVALENT,
                        None,
                        f"claimed by the model (stage 2): {reason}",
                        old.duration_s,
                        old.cached and reply.cached,
                    ),
                )
                yield WriterNote(
                    "stage2",
                    f"the model claims {mutant.id} is equivalent: {reason}",
                    mutant_id=mutant.id,
                )
                break
            if code is None:
                why = "no code and no EQUIVALENT in the reply"
                if reply.finish_reason == "length":
                    why += " (it was cut off at the token limit)"
                _reject(run, mutant, attempt, why, None, reply.content)
                yield TestRejected("stage2", attempt, why, mutant.id)
                messages.append({"role": "user", "content": NO_ANSWER})
                continue
            problem = common.static_problem(code, run.kernel.module)
            if problem is not None:
                _reject(run, mutant, attempt, problem, code)
                yield TestRejected("stage2", attempt, problem, mutant.id)
                messages.append(prompts.retry_message(problem[0].upper() + problem[1:] + "."))
                continue
            code = common.rename_taken(code, common.taken_names(run))
            test = TestFile(path="", name=name, source=code, origin="stage2")
            proof = common.prove_killer(run, test, mutant)
            if not proof.ok:
                _reject(run, mutant, attempt, proof.why, code)
                yield TestRejected("stage2", attempt, proof.why, mutant.id)
                messages.append(prompts.retry_message(proof.feedback or proof.why))
                continue
            yield from _accept(run, test, mutant, proof)
            break


def _reject(
    run: Run, mutant: Mutant, attempt: int, why: str, source: str | None, reply: str = ""
) -> None:
    entry: dict = {"by": "stage2", "attempt": attempt, "why": why, "source": source}
    if reply:
        entry["reply"] = reply[:2000]
    common.attempts(run, mutant.id).append(entry)


def _accept(run: Run, test: TestFile, mutant: Mutant, proof: common.Proof) -> Iterator[Event]:
    assert proof.mutant is not None
    run.add_tests([test])
    yield run.update(
        mutant, common.outcome_for(mutant, common.killed_outcome(test, proof.mutant, proof.cached))
    )
    kills = [mutant.id]
    pool = [m for m in run.mutants if m.id != mutant.id]
    for other, outcome in common.kill_others(run, test, pool, proof.original_s):
        kills.append(other.id)
        yield run.update(other, outcome)
    functions = tuple(common.find_test_functions(test.source))
    yield TestAccepted("stage2", test.name, functions, mutant.id, tuple(kills))
