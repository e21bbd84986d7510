"""What the test writers are asked to do; plain data that lands in the report's settings.

The API key is never part of these settings (nor of the report, the cache or any
sandbox job): it is read from the environment when a client is built.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_BASE_URL = "https://api.tokenfactory.nebius.com/v1/"
DEFAULT_MODEL = "nvidia/nemotron-3-super-120b-a12b"
#: Environment variables read for the key, first one set wins.
KEY_VARIABLES = ("NEBIUS_API_KEY", "OPENAI_API_KEY")
WRITERS = ("none", "probe", "llm")


@dataclass(frozen=True)
class LLMSettings:
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_MODEL
    timeout_s: float = 300.0  # per request; reasoning models think for a while
    retries: int = 4  # on 429, 5xx, timeouts and dropped connections
    backoff_s: float = 2.0  # first wait; doubles per retry (Retry-After wins when sent)
    max_tokens: int | None = 16384
    temperature: float | None = None  # None: the endpoint's default
    #: USD per million prompt / completion tokens for the cost estimate (None: not shown).
    price_in: float | None = None
    price_out: float | None = None


@dataclass(frozen=True)
class WriterSettings:
    #: ``none``; ``probe`` (model-free, the default); ``llm``: stage 1 by the model, then
    #: the probe on what survives it.
    writer: str = "probe"
    stage2: bool = False  # the model answers each remaining survivor
    attempts: int = 3  # model replies per stage-1 file / per survivor in stage 2
    runs: int = 3  # passes on the original, fresh seeds each, before a test is believed
    probes: int = 24  # probe inputs tried per survivor
    write_tests: str | None = None  # directory for accepted tests (the CLI writes them)
    llm: LLMSettings = field(default_factory=LLMSettings)

    @property
    def wants_model(self) -> bool:
        return self.writer == "llm" or self.stage2

    @property
    def probe(self) -> bool:
        return self.writer in ("probe", "llm")


def api_key(environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return next((env[k] for k in KEY_VARIABLES if env.get(k)), None)
