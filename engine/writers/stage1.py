"""Stage 1: the model writes tests from the kernel file alone, never seeing a mutant.

A reply's test file is kept only if it passes the original ``runs`` times in a row in
the sandbox (fresh seeds, after the own check and the other tests, exactly as it will
run in every mutant's job). Otherwise the failure goes back to the model, up to
``attempts`` replies. If no reply passes whole, the best one is kept without the test
functions that failed, when what is left passes every run. A test function slower on
the original than its time budget (``proving.time_budget``) is refused like a failing
one, and its time goes back to the model. Accepted tests join the jobs of the mutants
whose kernels they launch, so the report says which of them killed what.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import replace

from ..events import Event, TestAccepted, TestRejected, WriterNote
from ..job import JobResult, JobStatus
from ..kernel_file import TestFile
from ..records import Mutant
from ..stage import StageContext
from . import prompts, proving, reading
from .llm import LLMError, Reply
from .model import ModelSession


def passing_functions(proof: proving.Proof, code: str) -> set[str]:
    """Test functions whose every node passed in every run."""
    names = set(proving.find_test_functions(code))
    for result in proof.runs:
        for o in result.outcomes:
            if not o.name.startswith("test::"):
                continue
            function = o.name.split("::", 1)[1].split("[", 1)[0]
            if o.status != "passed":
                names.discard(function)
    seen = {
        o.name.split("::", 1)[1].split("[", 1)[0]
        for r in proof.runs
        for o in r.outcomes
        if o.name.startswith("test::")
    }
    return names & seen


def drop_functions(code: str, keep: set[str]) -> str:
    """``code`` without its top-level test functions not in ``keep``."""
    tree = ast.parse(code)
    lines = code.splitlines(keepends=True)
    drop: list[tuple[int, int]] = []
    for node in tree.body:
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test")
            and node.name not in keep
        ):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            drop.append((start - 1, node.end_lineno or node.lineno))
    for start, end in sorted(drop, reverse=True):
        del lines[start:end]
    return "".join(lines)


def stage1(ctx: StageContext, w: ModelSession) -> Iterator[Event]:
    client = w.client
    assert client is not None
    settings = ctx.settings.writers
    module = ctx.kernel.module
    # the stage's record: its own dict, put into the run's ``stage1`` section as it grows
    record = ctx.ledger.section("stage1", {"accepted": None, "attempts": []})
    ctx.ledger.put_section("stage1", record)

    messages = prompts.stage1_messages(ctx.kernel)
    name = f"{reading.file_stem(ctx)}_stage1.py"
    best: tuple[int, str, set[str]] | None = None  # (passing functions, code, names)
    slow = False  # a reply was refused for its time on the original
    for attempt in range(1, settings.attempts + 1):
        yield WriterNote(
            "stage1", f"asking {client.settings.model} for tests ({attempt}/{settings.attempts})"
        )
        try:
            reply = client.chat(messages)
        except LLMError as exc:
            yield w.model_failed("stage1", exc)
            return
        w.update_tokens()
        messages.append({"role": "assistant", "content": reply.content})
        code = reading.extract_code(reply.content)
        refused = _refused_unrun(reply, code, module)
        if refused is not None:
            why, kept, retry = refused
            _rejected(ctx, record, {"attempt": attempt, "why": why, **kept})
            yield TestRejected("stage1", attempt, why)
            messages.append(retry)
            continue
        assert code is not None  # refused above otherwise
        code = reading.rename_taken(code, reading.taken_names(ctx))
        test = TestFile(path="", name=name, source=code, origin="stage1")
        proof = proving.prove_on_original(ctx, test, with_checks=True)
        if proof.ok:
            yield from _accept(ctx, record, test, proof, attempt)
            return
        _reject_unproved(ctx, record, proof, code, attempt)
        slow = slow or bool(proof.slow)
        yield TestRejected("stage1", attempt, proof.why)
        best = _better(best, code, passing_functions(proof, code) - set(proof.slow))
        messages.append(prompts.retry_message(proof.feedback or proof.why))
    yield from _after_no_pass(ctx, record, name, best, slow)


def _better(
    best: tuple[int, str, set[str]] | None, code: str, passing: set[str]
) -> tuple[int, str, set[str]] | None:
    """``best`` (passing functions, code, names), or this reply where more of its test
    functions passed."""
    if passing and (best is None or len(passing) > best[0]):
        return (len(passing), code, passing)
    return best


def _after_no_pass(
    ctx: StageContext,
    record: dict,
    name: str,
    best: tuple[int, str, set[str]] | None,
    slow: bool,
) -> Iterator[Event]:
    """No reply passed whole: keep the ``best`` one's passing functions, or say none
    passed (``slow``: a reply was refused for its time on the original)."""
    if best is None:
        why = "passed the original" if not slow else "passed the original within the time budget"
        yield WriterNote("stage1", f"no test file {why}; stage 1 added nothing", "warning")
        return
    _, code, passing = best
    yield from _keep_passing(
        ctx, record, TestFile(path="", name=name, source=code, origin="stage1"), passing
    )


def _reject_unproved(
    ctx: StageContext, record: dict, proof: proving.Proof, code: str, attempt: int
) -> None:
    """A reply whose tests failed the proof on the original, recorded as rejected."""
    entry = {"attempt": attempt, "why": proof.why, "source": code}
    if proof.slow:  # the time each test took on the original, over the budget
        entry["slow"] = proof.slow
    _rejected(ctx, record, entry)


def _keep_passing(
    ctx: StageContext, record: dict, best: TestFile, passing: set[str]
) -> Iterator[Event]:
    """No reply passed whole: the one with the most passing test functions, the others
    dropped, proved again; accepted, or its refusal recorded."""
    attempts = ctx.settings.writers.attempts
    pruned = drop_functions(best.source, passing)
    test = replace(best, source=pruned)
    proof = proving.prove_on_original(ctx, test, with_checks=True)
    if proof.ok:
        yield WriterNote(
            "stage1", f"keeping the {len(passing)} test functions that passed every run"
        )
        yield from _accept(ctx, record, test, proof, attempts)
    else:
        _rejected(ctx, record, {"attempt": "pruned", "why": proof.why, "source": pruned})
        yield TestRejected("stage1", attempts, f"pruned file: {proof.why}")


def _rejected(ctx: StageContext, record: dict, entry: dict) -> None:
    """A rejected attempt into the stage's record (``attempts``), and the record saved."""
    record["attempts"].append(entry)
    ctx.ledger.put_section("stage1", record)


def _refused_unrun(reply: Reply, code: str | None, module: str) -> tuple[str, dict, dict] | None:
    """Why a reply's code is refused before it runs (no code, or ``static_problem``): the
    reason, what the stage's record keeps of it, and the message back to the model."""
    if code is None:
        why = "no code: the reply has no ```python block"
        if reply.finish_reason == "length":
            why += " (it was cut off at the token limit)"
        return why, {"reply": reply.content[:2000]}, {"role": "user", "content": prompts.NO_CODE}
    problem = reading.static_problem(code, module)
    if problem is None:
        return None
    return problem, {"source": code}, prompts.retry_message(problem[0].upper() + problem[1:] + ".")


def _accept(
    ctx: StageContext, record: dict, test: TestFile, proof: proving.Proof, attempt: int
) -> Iterator[Event]:
    test = replace(test, cases=proof.cases)
    ctx.add_tests([test])
    functions = tuple(proving.find_test_functions(test.source))
    record["accepted"] = {
        "file": test.name,
        "attempt": attempt,
        "tests": list(functions),
        **proving.timing(test),
    }
    ctx.ledger.put_section("stage1", record)
    shown = proving.keep(ctx, test)  # in the run's folder of written tests
    yield TestAccepted("stage1", shown, functions, duration_s=proving.file_time(test))


def stage1_kill_evidence(ctx: StageContext, killed: list[Mutant]) -> Iterator[Event]:
    """Survivor-phase stage on mutants a stage-1 test killed in their own job: the kill
    stands only with behaviour evidence (``verdicts.kill_evidence``: in that test's own
    run the kernel's outputs differ); otherwise the ledger's ``unkill`` makes the mutant
    a survivor again, and the later stages (probe, stage 2, checks) see it."""
    tests = {
        name: test
        for test in ctx.kernel.tests
        if test.origin == "stage1"
        for name in proving.find_test_functions(test.source)
    }
    groups = _kills_by_file(ctx, killed, tests)
    by_name = {t.name: t for t in tests.values()}
    original_s = ctx.baseline.duration_s if ctx.baseline is not None else ctx.settings.timeout_s
    for name, failed in groups.items():
        refused = proving.behaviour(ctx, by_name[name], failed, original_s)
        yield from _unkill_refused(ctx, name, failed, refused)


def _kills_by_file(
    ctx: StageContext, killed: list[Mutant], tests: dict[str, TestFile]
) -> dict[str, dict[str, tuple[Mutant, JobResult]]]:
    """The ``killed`` mutants by the stage-1 test file that killed them (as failed jobs)."""
    groups: dict[str, dict[str, tuple[Mutant, JobResult]]] = {}
    for m in killed:
        test = _killed_by(ctx, m, tests)
        if test is not None:
            groups.setdefault(test.name, {})[m.id] = (m, JobResult(JobStatus.FAILED))
    return groups


def _unkill_refused(
    ctx: StageContext,
    name: str,
    failed: dict[str, tuple[Mutant, JobResult]],
    refused: dict[str, str | None],
) -> Iterator[Event]:
    """Each kill by test file ``name`` refused for want of behaviour evidence: the mutant
    a survivor again, said so."""
    for mid, why in refused.items():
        if why is None:
            continue
        mutant = failed[mid][0]
        yield from ctx.updated(mutant, ctx.ledger.unkill(mid, why, stage="stage1"))
        yield WriterNote("stage1", f"kill of {mid} by {name} refused: {why}", "warning", mid)


def _killed_by(ctx: StageContext, mutant: Mutant, tests: dict[str, TestFile]) -> TestFile | None:
    """The stage-1 test file whose test function (``tests``: by name) killed ``mutant``."""
    outcome = ctx.ledger.outcome(mutant.id)
    by = (outcome.by if outcome else None) or ""
    if not by.startswith("test:"):
        return None
    return tests.get(by.removeprefix("test:").split("[", 1)[0])
