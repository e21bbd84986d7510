"""``--compare-modes``: every mutant again in the other mode; report disagreements.

The verdicts stay the primary mode's (this stage records, it never judges); each
mutant's row gets ``modes`` and the report ``modes`` {compared, agree, disagreements}.
"""

from __future__ import annotations

from collections.abc import Iterator

from .events import Event
from .records import Mutant
from .sandbox import Sandbox
from .sandbox.job import JobStatus
from .stage import Stage, StageContext
from .verdicts import decide, summarize_error
from .vocabulary import ORDER


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
        for kind, mutant_id, result in ctx.run_jobs(jobs, other_sandbox):
            if kind == "started" or result is None:
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
