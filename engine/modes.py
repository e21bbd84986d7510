"""``--compare-modes``: every mutant again in the other mode; report disagreements.

The verdicts stay the primary mode's (this stage records, it never judges); each
mutant's row gets ``modes`` and the report ``modes`` {compared, agree, disagreements}.
"""

from __future__ import annotations

from collections.abc import Iterator

from .events import CheckFinished, CheckStarted, Event
from .job import JobStatus
from .records import Mutant
from .sandbox import Sandbox
from .stage import Stage, StageContext
from .verdicts import decide, summarize_error
from .vocabulary import ORDER, By


def compare_modes_stage(other_sandbox: Sandbox) -> Stage:
    def run(ctx: StageContext, mutants: list[Mutant]) -> Iterator[Event]:
        primary = ctx.settings.mode
        other = "compiled" if primary == "interpret" else "interpret"
        baseline, _ = ctx.execute(ctx.job_for(None, ctx.settings.timeout_s, other), other_sandbox)
        if baseline.status is not JobStatus.PASSED:
            ctx.ledger.put_section(
                "modes",
                {
                    "compared": [primary, other],
                    "skipped": f"the original fails its own check in {other} mode: "
                    + (summarize_error(baseline.error) or baseline.status.value),
                },
            )
            return
        timeout = ctx.mutant_timeout(baseline.duration_s)
        by_id = {m.id: m for m in mutants}
        jobs = {m.id: ctx.job_for(m.source, timeout, other) for m in mutants}
        disagreements = []
        for event in ctx.run_jobs(jobs, other_sandbox):
            mutant_id, result = event.key, event.result
            if result is None:
                continue
            verdict, by, reason = decide(result)
            mine = ctx.ledger.outcome(mutant_id)
            assert mine is not None
            modes = {
                primary: {"verdict": mine.verdict.value, "by": mine.by, "reason": mine.reason},
                other: {"verdict": verdict.value, "by": by, "reason": reason},
            }
            ctx.ledger.put_row(mutant_id, "modes", modes)
            killed = [v["verdict"] == "killed" for v in modes.values()]
            if killed[0] != killed[1]:
                m = by_id[mutant_id]
                disagreements.append({"id": m.id, "operator": m.operator, "line": m.line, **modes})
        ctx.ledger.put_section(
            "modes",
            {
                "compared": [primary, other],
                "agree": len(mutants) - len(disagreements),
                "disagreements": disagreements,
            },
        )
        yield from ()

    return Stage("compare-modes", run, ORDER)


# -- --mode auto --------------------------------------------------------------------------
#: Operator families whose compiled survivors are judged again where bounds are precise:
#: a widened or dropped mask, a shifted bound or a wrong offset reads or writes memory
#: no check looks at on a GPU, while the interpreter's bounds check (or memcheck) sees it.
RECHECK_FAMILIES = ("masks", "boundaries", "indexing")
AUTO_STAGE = "mode-auto"


def has_cuda_device() -> bool:
    """Whether this machine shows a CUDA device, without importing torch where it
    plainly has none (``CUDA_VISIBLE_DEVICES`` empty, no NVIDIA driver)."""
    import glob
    import os
    import shutil

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    if not glob.glob("/dev/nvidia[0-9]*") and shutil.which("nvidia-smi") is None:
        return False
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def resolve_mode(requested: str) -> tuple[str, bool]:
    """(the mode jobs run in, whether it was chosen by ``auto``)."""
    if requested != "auto":
        return requested, False
    return ("compiled" if has_cuda_device() else "interpret"), True


def auto_recheck_stage(interpreter: Sandbox) -> Stage:
    """``--mode auto`` on a GPU: compiled survivors of mask, bound and offset operators
    are judged again in the interpreter (its bounds check), or under compute-sanitizer
    where the interpreter cannot run the original. A kill there kills the mutant; each
    row's ``modes.decided`` says which mode its verdict comes from."""

    def run(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
        chosen = [m for m in survivors if m.family in RECHECK_FAMILIES]
        chosen_ids = {m.id for m in chosen}
        for m in ctx.mutants:
            if m.id not in chosen_ids and ctx.ledger.verdict(m.id) is not None:
                ctx.ledger.put_row(m.id, "modes", {"decided": "compiled"})
        if not chosen:
            ctx.ledger.put_section("modes", {"auto": {"rechecked": 0, "killed": 0}})
            return
        yield CheckStarted(None, AUTO_STAGE, total=len(chosen))
        judge, sandbox, jobs, why = _recheck_jobs(ctx, chosen, interpreter)
        killed = 0
        done = 0
        for event in ctx.run_jobs(jobs, sandbox) if jobs else ():
            mutant_id, result = event.key, event.result
            if result is None:
                continue
            done += 1
            mutant = next(m for m in chosen if m.id == mutant_id)
            verdict, by, reason = decide(result)
            mine = ctx.ledger.outcome(mutant_id)
            assert mine is not None
            row = {
                "compiled": {"verdict": mine.verdict.value, "by": mine.by, "reason": mine.reason},
                judge: {"verdict": verdict.value, "by": by, "reason": reason},
                "decided": "compiled",
            }
            if verdict.value == "killed":
                outcome = ctx.ledger.kill(
                    mutant_id,
                    by=by or By.OWN_CHECK,
                    reason=f"{reason} [{judge}; passed compiled]",
                    duration_s=result.duration_s,
                    cached=event.cached,
                    stage=AUTO_STAGE,
                    evidence=f"survived compiled; {judge}: {reason}",
                )
                if outcome is not None:
                    killed += 1
                    row["decided"] = judge
                    yield from ctx.updated(mutant, outcome)
            ctx.ledger.put_row(mutant_id, "modes", row)
            yield CheckFinished(mutant, AUTO_STAGE, f"{judge}: {verdict.value}", done, len(jobs))
        for m in chosen:
            if m.id not in jobs:
                ctx.ledger.put_row(m.id, "modes", {"decided": "compiled", "recheck": why})
        summary = {"rechecked": len(jobs), "killed": killed, "by": judge}
        if why:
            summary["note"] = why
        ctx.ledger.put_section("modes", {"auto": summary})
        line = f"mode auto: {killed} of {len(jobs)} compiled survivors killed in {judge}"
        yield CheckFinished(None, AUTO_STAGE, why or line, len(jobs), len(jobs))

    return Stage(AUTO_STAGE, run)


def _recheck_jobs(
    ctx: StageContext, chosen: list[Mutant], interpreter: Sandbox
) -> tuple[str, Sandbox | None, dict, str]:
    """(judge, sandbox, jobs, note): the interpreter where it runs the original,
    else memcheck on the GPU, else nothing (with why)."""
    from dataclasses import replace

    original = ctx.job_for(None, ctx.settings.timeout_s, "interpret")
    baseline, _ = ctx.execute(original, interpreter)
    if baseline.status is JobStatus.PASSED:
        timeout = ctx.mutant_timeout(baseline.duration_s)
        jobs = {m.id: ctx.job_for(m.source, timeout, "interpret") for m in chosen}
        return "interpret", interpreter, jobs, ""
    cannot = summarize_error(baseline.error) or baseline.status.value
    sanitized = replace(ctx.job_for(None, ctx.settings.timeout_s, "compiled"), sanitize=True)
    baseline, _ = ctx.execute(sanitized)
    if baseline.status is not JobStatus.PASSED:
        why = (
            f"not rechecked: the original fails in the interpreter ({cannot}) and under "
            f"compute-sanitizer ({summarize_error(baseline.error) or baseline.status.value})"
        )
        return "sanitize", None, {}, why
    timeout = ctx.mutant_timeout(baseline.duration_s)
    jobs = {
        m.id: replace(ctx.job_for(m.source, timeout, "compiled"), sanitize=True) for m in chosen
    }
    return "sanitize", None, jobs, ""
