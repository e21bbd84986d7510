"""The model as the writers meet it: one client per run, its token count and notes.

``ModelSession`` connects lazily (the key is read from the environment, never stored
in settings, reports or jobs), checks once that the endpoint lists the model, and
turns model failures into notes; a fatal one (a refused key) stops the model stages
for the rest of the run (``broken``). ``missing_key`` is the rule the faces check
before anything runs: a model stage asked for with no key is one line, exit 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import BadInput
from ..events import WriterNote
from ..settings import KEY_VARIABLES, WriterSettings, api_key
from ..stage import StageContext

if TYPE_CHECKING:  # the client is imported when a run connects to a model, not before
    from .llm import LLMClient, LLMError

NO_KEY = f"no API key (set {' or '.join(KEY_VARIABLES)})"


def no_tokens(model: str | None = None) -> dict:
    """The report's ``tokens`` section before any model call."""
    return {
        "prompt": 0,
        "completion": 0,
        "cost_usd": None,
        "model": model,
        "calls": 0,
        "cached_calls": 0,
        "retries": 0,
    }


def missing_key(settings: WriterSettings) -> str | None:
    """Why a run with ``settings`` cannot start: a model stage is asked for (``--writer
    llm``, ``--stage2``) and no key is set. One line, or None."""
    if not settings.wants_model or api_key() is not None:
        return None
    asked = [
        f
        for f, on in (("--writer llm", settings.writer == "llm"), ("--stage2", settings.stage2))
        if on
    ]
    instead = {
        ("--writer llm",): "use --writer probe",
        ("--stage2",): "leave out --stage2",
    }.get(tuple(asked), "use --writer probe without --stage2")
    verb = "need" if len(asked) > 1 else "needs"
    return (
        f"{' and '.join(asked)} {verb} a model key: set {' or '.join(KEY_VARIABLES)} (or {instead})"
    )


class ModelSession:
    """The writers' model client for one run, and what the report says of it."""

    def __init__(self, ctx: StageContext) -> None:
        self.ctx = ctx
        self.settings: WriterSettings = ctx.settings.writers
        self.client: LLMClient | None = None
        self.broken: str | None = None  # why the model can no longer be used
        self.checked = False
        model = self.settings.llm.model if self.settings.wants_model else None
        ctx.ledger.update_section("tokens", lambda had: had, no_tokens(model))
        ctx.ledger.update_section("writers", lambda had: had, {"notes": []})

    def note(self, writer: str, message: str, level: str = "info", mutant_id=None) -> WriterNote:
        """A writer's note; warnings and errors are kept in the report (``writers.notes``)."""
        event = WriterNote(writer, message, level, mutant_id)
        if level != "info":
            said = {"writer": writer, "level": level, "message": message}
            self.ctx.ledger.update_section(
                "writers", lambda had: {**had, "notes": [*had.get("notes", []), said]}, {}
            )
        return event

    def update_tokens(self) -> None:
        if self.client is not None:
            self.ctx.ledger.put_section("tokens", self.client.tokens())

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
        from .llm import LLMClient

        self.client = LLMClient(self.settings.llm, key, self.ctx.store)
        self.ctx.ledger.put_section("tokens", self.client.tokens())
        return None

    def check_model(self) -> WriterNote | None:
        """The model exists at the endpoint; a bad key or model raises ``BadInput``."""
        from .llm import LLMError

        assert self.client is not None
        if self.checked:
            return None
        try:
            text = self.client.check_model()
        except LLMError as exc:
            if exc.fatal:
                raise BadInput(f"model endpoint: {exc}") from None
            return self.note("llm", f"could not check the model list: {exc}; going on", "warning")
        self.checked = True
        return self.note("llm", text)
