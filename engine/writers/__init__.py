"""Test writers: where new tests come from, each believed only once the sandbox proves it.

- ``probe`` (no model, the default): inputs near the own check's calls, original vs
  mutant side by side; a hit becomes a golden-value pytest test (``probe.py``).
- ``llm`` stage 1 (``stage1.py``): the model writes tests from the kernel file alone;
  kept if they pass the original on every seed; they join every mutant's job.
- stage 2 (``stage2.py``, ``--stage2`` or the TUI on chosen survivors): the model
  answers one survivor with a killer test (proved on original and mutant) or an
  EQUIVALENT claim.

``install_writers(run)`` (called by ``Run``) puts the model check and stage 1 in
``run.pre_mutant_stages`` and the probe and stage 2 at the front of
``run.survivor_stages``, so later checks (compile-check, diff-oracle) see what is left.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from ..errors import BadInput
from ..events import Event, WriterNote
from ..records import Mutant
from ..settings import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    KEY_VARIABLES,
    WRITERS,
    LLMSettings,
    WriterSettings,
    api_key,
)
from .common import write_tests
from .llm import LLMClient, LLMError, no_tokens

if TYPE_CHECKING:
    from ..pipeline import Run

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "KEY_VARIABLES",
    "WRITERS",
    "LLMSettings",
    "WriterSettings",
    "Writers",
    "install_writers",
    "run_stage2",
    "write_tests",
]

NO_KEY = f"no API key (set {' or '.join(KEY_VARIABLES)})"


class Writers:
    """The writers of one run: their model client, token count and notes."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.settings: WriterSettings = run.settings.writers
        self.client: LLMClient | None = None
        self.broken: str | None = None  # why the model can no longer be used
        self.checked = False
        self._pending: list[WriterNote] = []

    # -- notes and accounting ----------------------------------------------------
    def note(self, writer: str, message: str, level: str = "info", mutant_id=None) -> WriterNote:
        event = WriterNote(writer, message, level, mutant_id)
        if level != "info":
            notes = self.run.report_extra.setdefault("writers", {}).setdefault("notes", [])
            notes.append({"writer": writer, "level": level, "message": message})
        return event

    def update_tokens(self) -> None:
        if self.client is not None:
            self.run.report_extra["tokens"] = self.client.tokens()

    def model_failed(self, stage: str, exc: LLMError) -> WriterNote:
        self.update_tokens()
        if exc.fatal:
            self.broken = str(exc)
        return self.note(stage, f"{stage} stopped: {exc}", "error")

    def connect(self) -> str | None:
        """Build the model client from the environment's key; why not, or None."""
        if self.client is not None:
            return None
        key = api_key()
        if key is None:
            return NO_KEY
        self.client = LLMClient(self.settings.llm, key, self.run.store)
        self.run.report_extra["tokens"] = self.client.tokens()
        return None

    # -- stages ----------------------------------------------------------------------
    def start(self, run: Run) -> Iterator[Event]:
        """Pre-mutant: every mutant gets ``claims`` and ``attempts``; pending notes go out."""
        for mutant in run.mutants:
            details = run.details.setdefault(mutant.id, {})
            details.setdefault("claims", [])
            details.setdefault("attempts", [])
        yield from self._pending
        self._pending.clear()

    def check_model(self, run: Run) -> Iterator[Event]:
        """Pre-mutant: the model exists at the endpoint (a bad key or model stops the run)."""
        assert self.client is not None
        if self.checked:
            return
        try:
            text = self.client.check_model()
        except LLMError as exc:
            if exc.fatal:
                raise BadInput(f"model endpoint: {exc}") from None
            yield self.note("llm", f"could not check the model list: {exc}; going on", "warning")
            return
        self.checked = True
        yield self.note("llm", text)

    def stage1(self, run: Run) -> Iterator[Event]:
        from .stage1 import stage1

        yield from stage1(run, self)

    def stage2(self, run: Run, survivors: list[Mutant]) -> Iterator[Event]:
        from .stage2 import stage2

        yield from stage2(run, self, survivors)


def install_writers(run: Run) -> Writers:
    """Register the writers the run's settings ask for (see the module docstring)."""
    w = Writers(run)
    s = w.settings
    if s.writer not in WRITERS:
        raise BadInput(f"--writer must be one of {', '.join(WRITERS)}, not {s.writer!r}")
    run.report_extra.setdefault("tokens", no_tokens(s.llm.model if s.wants_model else None))
    run.report_extra.setdefault("writers", {"notes": []})
    pre = [w.start]
    if s.wants_model:
        why = w.connect()
        if why is not None:
            rest = "; the probe writer goes on" if s.probe else ""
            w._pending.append(w.note("llm", f"{why}: model stages skipped{rest}", "warning"))
        else:
            pre.append(w.check_model)
            if s.writer == "llm":
                pre.append(w.stage1)
    run.pre_mutant_stages[:0] = pre
    survivors = []
    if s.probe:
        from .probe import probe_stage

        survivors.append(probe_stage)
    if s.stage2 and w.client is not None:
        survivors.append(w.stage2)
    run.survivor_stages[:0] = survivors
    return w


def run_stage2(run: Run, mutants: Iterable[Mutant | str]) -> Iterator[Event]:
    """Stage 2 on chosen survivors of a run that got past its mutants (the TUI's entry).

    ``run``: the live ``Run`` (its sandbox, cache and writers); ``mutants``: Mutant
    objects or ids; ones no longer ``survived`` are skipped. Yields the usual events
    (``WriterNote``, ``TestRejected``, ``TestAccepted``, ``MutantUpdated``); afterwards
    ``run.report()`` is the updated report. Without a key it yields one error note.
    Call it once the run's mutants are judged (after ``RunFinished``, or at least after
    the last ``MutantFinished``), not while another of the run's stages is running jobs.
    """
    w: Writers = run.writers
    by_id = {m.id: m for m in run.mutants}
    chosen = [
        by_id[m] if isinstance(m, str) else m
        for m in mutants
        if not isinstance(m, str) or m in by_id
    ]
    why = w.connect()
    if why is not None:
        yield w.note("stage2", f"stage 2 needs a model: {why}", "error")
        return
    if w.broken:
        yield w.note("stage2", f"stage 2 stopped: {w.broken}", "error")
        return
    if not w.checked:
        try:
            yield from w.check_model(run)
        except BadInput as exc:
            w.broken = str(exc)
            yield w.note("stage2", str(exc), "error")
            return
    yield from w.stage2(run, chosen)
