"""Test writers: where new tests come from, each believed only once the sandbox proves it.

- ``probe`` (no model, the default): inputs near the own check's calls, original vs
  mutant side by side; a hit becomes a golden-value pytest test (``probe.py``).
- ``llm`` stage 1 (``stage1.py``): the model writes tests from the kernel file alone;
  kept if they pass the original on every seed; they join every mutant's job.
- stage 2 (``stage2.py``, ``--stage2`` or the explorer on chosen survivors): the model
  answers one survivor with a killer test (proved on original and mutant) or an
  EQUIVALENT claim.

``writer_stages(ctx)`` returns the stages the settings ask for: the model check before
the baseline (``BEFORE_BASELINE``: a refused key or an unknown model ends the run in one
line before the sandbox has run anything), stage 1 before the mutants, the probe and
stage 2 first among the survivor stages, so later checks (compile-check, diff-oracle)
see what is left. A model stage asked for with no key is ``BadInput`` (``missing_key``),
which the faces check before anything runs. Every writer records into
the verdict ledger through ``proving`` (a proved kill) or ``Ledger.claim``; none sets a
verdict itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import BadInput
from ..events import Event
from ..records import Mutant
from ..settings import WRITERS
from ..stage import BEFORE_MUTANTS, Stage, StageContext
from ..vocabulary import Verdict
from .model import ModelSession, missing_key

__all__ = ["BEFORE_BASELINE", "ModelSession", "stage2_stage", "writer_stages"]

#: The phase of a stage the driver runs after ``RunStarted``, before the baseline.
BEFORE_BASELINE = "before_baseline"


def writer_stages(ctx: StageContext, session: ModelSession) -> list[Stage]:
    """The writers' stages, in order (see the module docstring)."""
    s = session.settings
    if s.writer not in WRITERS:
        raise BadInput(f"--writer must be one of {', '.join(WRITERS)}, not {s.writer!r}")

    def start(ctx: StageContext, mutants: list[Mutant]) -> Iterator[Event]:
        for mutant in ctx.mutants:  # every mutant's row lists its claims and attempts
            for section in ("claims", "attempts"):
                ctx.ledger.update_row(mutant.id, section, lambda had: had, [])
        return iter(())

    stages = [Stage("writers", start, phase=BEFORE_MUTANTS)]
    if s.wants_model:
        stages += _model_stages(session)
    if s.writer == "llm":
        from .stage1 import stage1_kill_evidence

        stages.append(Stage("stage1-evidence", stage1_kill_evidence, (Verdict.KILLED,)))
    if s.probe:
        stages.append(Stage("probe", _probe, ahead=_probe_ahead))
    if s.stage2 and session.client is not None:
        stages.append(stage2_stage(session))
    return stages


def _model_stages(session: ModelSession) -> list[Stage]:
    """The stages a run that asks a model starts with, once its key is there (else a
    ``BadInput``) and the session connected: the model check, then (``--writer llm``)
    stage 1."""
    s = session.settings
    why = missing_key(s)
    if why is not None:
        raise BadInput(why)
    session.connect()
    # verdicts=(): the driver's survivor loop, which takes every other phase, skips it
    stages = [Stage("model-check", _check_model(session), verdicts=(), phase=BEFORE_BASELINE)]
    if s.writer == "llm":
        stages.append(Stage("stage1", _stage1(session), phase=BEFORE_MUTANTS))
    return stages


def _probe(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
    """The probe writer, imported when there are survivors to probe: a run with none (a
    cached rerun of a file whose mutants all die) never loads its inputs or harness."""
    from .probe.stage import probe_stage

    yield from probe_stage(ctx, survivors)


def _probe_ahead(ctx: StageContext) -> None:
    """The probe's first jobs, which need only the original: learning the wrapper calls,
    then the original's runs on the first inputs of the survivors known by then."""
    from .probe.stage import capture_job, originals_ahead

    ctx.start_ahead([capture_job(ctx)], then=lambda result: originals_ahead(ctx, result))


def _check_model(session: ModelSession):
    def run(ctx: StageContext, mutants: list[Mutant]) -> Iterator[Event]:
        note = session.check_model()
        if note is not None:
            yield note

    return run


def _stage1(session: ModelSession):
    def run(ctx: StageContext, mutants: list[Mutant]) -> Iterator[Event]:
        from .stage1 import stage1

        yield from stage1(ctx, session)

    return run


def stage2_stage(session: ModelSession) -> Stage:
    """Stage 2 as a survivor stage; on chosen survivors (the explorer) it first connects
    and checks the model, and says in one error note why it cannot run."""

    def run(ctx: StageContext, survivors: list[Mutant]) -> Iterator[Event]:
        from .stage2 import stage2

        why = session.connect()
        if why is not None:
            yield session.note("stage2", f"stage 2 needs a model: {why}", "error")
            return
        if session.broken:
            yield session.note("stage2", f"stage 2 stopped: {session.broken}", "error")
            return
        if not session.checked:
            try:
                note = session.check_model()
            except BadInput as exc:
                session.broken = str(exc)
                yield session.note("stage2", str(exc), "error")
                return
            if note is not None:
                yield note
        yield from stage2(ctx, session, survivors)

    return Stage("stage2", run)
