"""Compile-check: do the survivors compile for real CUDA targets? No GPU needed.

The interpreter runs kernels that the compiler rejects (a loop-carried variable
that changes type, a ``tl.dot`` the target lacks...), so a survivor may be a bug
no GPU would ever run. Three sandbox steps, all cached:

1. ``trace:capture`` runs the original's checks in the interpreter and records
   every launch's signature as Triton's launcher would specialise it
   (``harness/trace.py``).
2. ``compiler:run`` compiles the original with those signatures for each target
   (``harness/compiler.py``). A target the original fails on is skipped, with the
   compiler's reason; if none is left the check is skipped.
3. the same for every survivor, in parallel, compiling only the launched kernels
   that contain the mutated function. A survivor that fails on a target becomes
   ``not_compilable`` with the compiler's message.

Per mutant the report gets ``compile``: {target: {ok, message, seconds}} (plus
``detail``, the compiler's full tail, on failure); the run gets
``checks.compile``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from statistics import mean

from ..events import CheckFinished, CheckStarted, Event
from ..job import Job, JobResult
from ..records import Mutant
from ..stage import StageContext
from ..vocabulary import CHECK_NAMES
from . import harness_jobs

CHECK = CHECK_NAMES["compile-check"]
#: Compile time allowed per signature and target, on top of a fixed allowance.
SECONDS_PER_COMPILE = 10.0


def _capture(ctx: StageContext) -> tuple[list[dict], int, str | None]:
    """(signatures, launches, why not) from a traced run of the original's checks."""
    request = {"job": harness_jobs.checks_job(ctx, None).to_json()}
    job = harness_jobs.harness_job(ctx, "trace:capture", "trace", request, ctx.settings.timeout_s)
    result, _ = ctx.execute(job)
    data = harness_jobs.harness_data(result, "trace")
    if data is None:
        return [], 0, f"the traced run of the original failed: {harness_jobs.failure(result)}"
    if data["status"] != "passed":
        return [], 0, f"the traced run of the original did not pass: {data['error'][:300]}"
    trace = data["trace"]
    if not trace["signatures"]:
        return [], trace["launches"], "the checks launch no kernel: nothing to compile"
    return trace["signatures"], trace["launches"], None


def _compile_job(
    ctx: StageContext,
    source: str | None,
    signatures: list[dict],
    targets: list[str],
    kernels: list[str],
) -> Job:
    request = {
        "job": harness_jobs.checks_job(ctx, source).to_json(),
        "kernel": ctx.kernel.name,
        "signatures": signatures,
        "targets": targets,
        "kernels": kernels,
    }
    chosen = [s for s in signatures if not kernels or s["kernel"] in kernels]
    timeout = 30.0 + SECONDS_PER_COMPILE * len(chosen) * len(targets)
    return harness_jobs.harness_job(ctx, "compiler:run", CHECK, request, timeout)


def _per_target(result: JobResult) -> tuple[dict | None, str | None]:
    """({target: result}, None), or (None, why the job gave no answer)."""
    data = harness_jobs.harness_data(result, CHECK)
    if data is None:
        return None, harness_jobs.failure(result)
    return data["compile"], None


def compile_check_stage(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """Survivor stage: compile the original, then every survivor, for each target."""
    targets = list(ctx.settings.compile_targets)
    summary: dict = {
        "targets": targets,
        "checked_targets": [],
        "skipped": None,
        "skipped_targets": {},
        "launches": 0,
        "signatures": [],
        "survivors": len(survivors),
        "not_compilable": 0,
        "errors": 0,
        "seconds_per_survivor": None,
    }
    yield from harness_jobs.publishing(
        ctx, CHECK, summary, _compile_check(ctx, survivors, targets, summary)
    )


def _compile_check(
    ctx: StageContext, survivors: list[Mutant], targets: list[str], summary: dict
) -> Iterator[Event]:
    """The check's work; ``summary`` goes into the run's ``checks`` section when it ends."""
    yield CheckStarted(None, CHECK, total=len(survivors))
    if ctx.settings.mode != "interpret":
        why = "in compiled mode every mutant was already compiled for the device it ran on"
        summary["skipped"] = why
        yield CheckFinished(None, CHECK, f"compile-check skipped: {why}", 0, len(survivors))
        return

    signatures, launches, why = _capture(ctx)
    summary["launches"] = launches
    summary["signatures"] = [_describe(s) for s in signatures]
    if why is None:
        launched = list(dict.fromkeys(s["kernel"] for s in signatures))
        targets, why = _targets_the_original_compiles_for(
            ctx, signatures, targets, launched, summary
        )
    if why is not None:
        summary["skipped"] = why
        yield CheckFinished(None, CHECK, f"compile-check skipped: {why}", 0, len(survivors))
        return
    summary["checked_targets"] = targets
    yield from _check_survivors(ctx, survivors, signatures, targets, launched, summary)


def _targets_the_original_compiles_for(
    ctx: StageContext,
    signatures: list[dict],
    targets: list[str],
    launched: list[str],
    summary: dict,
) -> tuple[list[str], str | None]:
    """Compile the original for every target: (the targets it compiles for, why the
    check is skipped or None); each target left out is noted in ``summary``."""
    result, _ = ctx.execute(_compile_job(ctx, None, signatures, targets, launched))
    original, why = _per_target(result)
    if original is None:
        return targets, f"compiling the original failed: {why}"
    summary["original"] = {t: _row(r) for t, r in original.items()}
    summary["skipped_targets"].update(_failed_targets(original))
    targets = [t for t in targets if original.get(t, {}).get("ok") is True]
    if not targets:
        return targets, "; ".join(f"{t}: {w}" for t, w in summary["skipped_targets"].items())
    return targets, None


def _failed_targets(original: dict) -> dict[str, str]:
    """Each target the original does not compile for (or could not be compiled for),
    with why."""
    failed = {}
    for t, r in original.items():
        if r["ok"] is not True:
            what = "does not compile" if r["ok"] is False else "could not be compiled"
            failed[t] = f"the original {what}: {r['message']}"
    return failed


def _check_survivors(
    ctx: StageContext,
    survivors: list[Mutant],
    signatures: list[dict],
    targets: list[str],
    launched: list[str],
    summary: dict,
) -> Iterator[Event]:
    """Compile every survivor that a launched kernel reaches, for the targets left."""
    jobs, unreached = {}, []
    for mutant in survivors:
        kernels = harness_jobs.reached_kernels(ctx.kernel, mutant, launched)
        if kernels:
            jobs[mutant.id] = _compile_job(ctx, mutant.source, signatures, targets, kernels)
        else:
            unreached.append(mutant)
    yield from _note_unreached(ctx, unreached, targets, len(survivors))
    by_id = {m.id: m for m in survivors}
    done, durations = len(unreached), []
    for event in ctx.run_jobs(jobs):
        mutant, result = by_id[event.key], event.result
        if result is None:  # started
            yield CheckStarted(mutant, CHECK)
            continue
        done += 1
        per_target, error = _per_target(result)
        if per_target is None:
            line = _note_unanswered(ctx, mutant, error, targets, summary)
        else:
            durations.append(result.duration_s)
            line = yield from _judge(ctx, mutant, per_target, targets, summary)
        yield CheckFinished(mutant, CHECK, line, done, len(survivors))
    if durations:
        summary["seconds_per_survivor"] = round(mean(durations), 3)
    yield CheckFinished(None, CHECK, overall(summary), done, len(survivors))


def _note_unreached(
    ctx: StageContext, unreached: list[Mutant], targets: list[str], total: int
) -> Iterator[Event]:
    """A survivor in no launched kernel has nothing to compile: rows saying so."""
    for done, mutant in enumerate(unreached, 1):
        note = f"{mutant.function} is not reached from any launched kernel: nothing to compile"
        ctx.ledger.put_row(
            mutant.id, CHECK, {t: {"ok": None, "message": note, "seconds": 0.0} for t in targets}
        )
        yield CheckFinished(mutant, CHECK, note, done, total)


def _note_unanswered(
    ctx: StageContext, mutant: Mutant, error: str | None, targets: list[str], summary: dict
) -> str:
    """A survivor's compile job gave no answer: an error row per target; its line."""
    summary["errors"] += 1
    ctx.ledger.put_row(
        mutant.id,
        CHECK,
        {
            t: {"ok": None, "message": f"compile-check failed: {error}", "seconds": 0.0}
            for t in targets
        },
    )
    return f"compile-check failed: {error}"


def _judge(
    ctx: StageContext, mutant: Mutant, per_target: dict, targets: list[str], summary: dict
) -> Generator[Event, None, str]:
    """Record a survivor's compile results, setting it aside where a target rejects it;
    returns its line."""
    rows = {t: _row(r, detail=True) for t, r in per_target.items()}
    ctx.ledger.put_row(mutant.id, CHECK, rows)
    failed = [t for t, r in rows.items() if r["ok"] is False]
    if failed:
        summary["not_compilable"] += 1
        message = rows[failed[0]]["message"]
        reason = f"does not compile for {', '.join(failed)}: {message}"
        yield from ctx.updated(mutant, ctx.ledger.set_aside(mutant.id, reason, stage=CHECK))
        return f"not compilable for {', '.join(failed)}: {message}"
    if any(r["ok"] is None for r in rows.values()):
        summary["errors"] += 1
        return "compile-check failed: " + next(
            r["message"] for r in rows.values() if r["ok"] is None
        )
    seconds = sum(r["seconds"] for r in rows.values())
    return f"compiles for {', '.join(targets)} ({seconds:.2f} s)"


def overall(summary: dict) -> str:
    """The check's one line for the summary."""
    if summary.get("skipped"):
        return f"compile-check skipped: {summary['skipped']}"
    targets = ", ".join(summary["checked_targets"])
    line = (
        f"compile-check ({targets}): {summary['not_compilable']} of {summary['survivors']} "
        f"survivors not compilable"
    )
    if summary["errors"]:
        line += f", {summary['errors']} could not be checked"
    if summary["skipped_targets"]:
        line += "; skipped " + "; ".join(
            f"{t} ({w})" for t, w in summary["skipped_targets"].items()
        )
    if summary["seconds_per_survivor"] is not None:
        line += f"; {summary['seconds_per_survivor']:.2f} s per survivor"
    return line


def _row(result: dict, detail: bool = False) -> dict:
    row = {"ok": result["ok"], "message": result["message"], "seconds": result["seconds"]}
    if detail and result.get("detail"):
        row["detail"] = result["detail"]
    return row


def _describe(sig: dict) -> dict:
    """A captured signature as the report shows it: kernel, launches, ``name: type``."""
    args = []
    for name, ty, attr in zip(sig["params"], sig["types"], sig["attrs"], strict=True):
        if ty == "constexpr":
            args.append(f"{name}={sig['constexprs'].get(name)!r}")
        else:
            args.append(f"{name}: {ty}" + (" (divisible by 16)" if attr == "D" else ""))
    return {
        "kernel": sig["kernel"],
        "launches": sig["launches"],
        "arguments": args,
        "options": sig.get("options", {}),
        "autotune": sig.get("autotune"),
    }
