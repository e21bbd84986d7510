"""The model client: any OpenAI-compatible endpoint, through the ``openai`` package.

What a demanding user needs from it, and where it is:
- timeouts per request, and retries with exponential backoff on 429, 5xx, timeouts
  and dropped connections (``Retry-After`` wins when the server sends one);
- a bad key (401/403) or an unknown model is one clear line (``LLMError``), never a
  traceback; ``check_model`` looks the model up in the endpoint's model list first
  (ids are case-sensitive and spelled differently across providers);
- every reply must name the requested model (some gateways substitute models
  silently): a mismatch is an ``LLMError``;
- tokens per call and per run, with a cost estimate from per-million prices;
- every request and reply is stored in the cache under the request's content hash,
  so a rerun or a replay spends nothing.
The key lives only in the client object: never in the cache key, the report or a job.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mutant_gate.cache import Store

from ..prices import cost, price_for
from ..settings import LLMSettings

if TYPE_CHECKING:
    import openai

RETRY_AFTER_CAP_S = 60.0


class LLMError(Exception):
    """A model call failed; the message is one line the user can act on.

    ``fatal``: no later call can do better (bad key, unknown or substituted model),
    so the model stages stop; otherwise (retries exhausted) only this call failed.
    """

    def __init__(self, message: str, fatal: bool = True) -> None:
        super().__init__(message)
        self.fatal = fatal


@dataclass(frozen=True)
class Reply:
    content: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    cached: bool


def _body_message(body: dict) -> str | None:
    """The message a JSON error body carries (``error.message``, ``error`` as text, or
    ``detail``); None when it carries none."""
    inner = body.get("error", body)
    if isinstance(inner, dict) and inner.get("message"):
        return str(inner["message"])
    if isinstance(inner, str):
        return inner
    if body.get("detail"):
        return str(body["detail"])
    return None


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    message = _body_message(body) if isinstance(body, dict) else None
    if message is not None:
        return message
    text = str(getattr(exc, "message", "") or exc)
    return text.splitlines()[0] if text else "no message"


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(RETRY_AFTER_CAP_S, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


def names_model(reply_model: str, requested: str) -> bool:
    """The reply is from the requested model: the same id, or a pinned snapshot of it
    (``requested-2025-01-01``, ``requested:v2``, ``requested@rev``)."""
    if reply_model == requested:
        return True
    return any(reply_model.startswith(requested + sep) for sep in ("-", ":", "@"))


class LLMClient:
    def __init__(self, settings: LLMSettings, api_key: str, store: Store | None = None) -> None:
        import openai  # here, not at import: it takes a second to import

        self.settings = settings
        self.store = store
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=api_key,
            timeout=settings.timeout_s,
            max_retries=0,  # retries are ours: counted, backed off, explained
        )
        self._lock = threading.Lock()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.calls = 0
        self.cached_calls = 0
        self.retries = 0

    # -- calls -------------------------------------------------------------
    def _where(self) -> str:
        return self.settings.base_url.rstrip("/")

    def _call(self, fn, what: str):
        """Run one API call with retries; every failure becomes an ``LLMError``."""
        import openai

        s = self.settings
        for attempt in range(s.retries + 1):
            try:
                return fn()
            except openai.OpenAIError as exc:
                why, wait = self._worth_a_retry(exc, what)
            if attempt == s.retries:
                raise LLMError(
                    f"{self._where()}: {what} failed after {attempt + 1} tries: {why}", fatal=False
                )
            with self._lock:
                self.retries += 1
            time.sleep(wait if wait is not None else s.backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    def _worth_a_retry(self, exc: openai.OpenAIError, what: str) -> tuple[str, float | None]:
        """Why a failed call may be tried again, and the wait the server asks for (None:
        our backoff's); raises ``LLMError`` for a failure no retry mends."""
        import openai

        s = self.settings
        if isinstance(exc, openai.APIStatusError):
            refusal = self._refusal(exc, what)
            if refusal is not None:
                raise refusal from None
            return f"{exc.status_code}: {_server_message(exc)}", _retry_after(exc)
        if isinstance(exc, openai.APITimeoutError):
            return f"no answer within {s.timeout_s:g} s", None
        if isinstance(exc, openai.APIConnectionError):
            return f"connection failed ({exc.__cause__ or exc})", None
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise LLMError(f"{self._where()}: {what} failed: {line}") from None

    def _refusal(self, exc: openai.APIStatusError, what: str) -> LLMError | None:
        """The error for a status no retry mends: a refused key (401), a model the key may
        not use (403), an unknown one (404), any other 4xx but 429; None for a 429 or a 5xx."""
        import openai

        s = self.settings
        if isinstance(exc, openai.AuthenticationError):
            return LLMError(f"{self._where()} refused the API key (401): {_server_message(exc)}")
        if isinstance(exc, openai.PermissionDeniedError):
            return LLMError(
                f"{self._where()} does not let this key use {s.model!r} (403): "
                f"{_server_message(exc)}"
            )
        if isinstance(exc, openai.NotFoundError):
            return LLMError(
                f"{self._where()}: {what} not found (404; unknown model {s.model!r}?): "
                f"{_server_message(exc)}"
            )
        if isinstance(exc, openai.RateLimitError | openai.InternalServerError):
            return None
        if exc.status_code < 500:
            return LLMError(
                f"{self._where()} rejected the {what} ({exc.status_code}): {_server_message(exc)}"
            )
        return None

    def check_model(self) -> str:
        """Look the model up in the endpoint's model list; returns a note for the log.

        Raises ``LLMError`` for a bad key or a model the list does not hold.
        """
        s = self.settings
        memo = self._key({"models": s.base_url, "model": s.model})
        if self.store is not None and self.store.get_reply(memo):
            return f"model {s.model} offered by {self._where()} (checked before)"
        try:
            listed = self._call(lambda: list(self._client.models.list()), "model list")
        except LLMError as exc:
            if "(404" in str(exc):
                return f"{self._where()} has no model list; model {s.model} not checked"
            raise
        ids = [getattr(m, "id", "") for m in listed]
        if s.model not in ids:
            raise self._not_listed(ids)
        if self.store is not None:
            self.store.put_reply(memo, {"ok": True})
        return f"model {s.model} offered by {self._where()}"

    def _not_listed(self, ids: list[str]) -> LLMError:
        """The error for a model the list does not hold, with the ids it may have meant."""
        s = self.settings
        near = [i for i in ids if i.lower() == s.model.lower()]
        near += [i for i in difflib.get_close_matches(s.model, ids, n=3) if i not in near]
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        return LLMError(
            f"model {s.model!r} is not in the model list of {self._where()} "
            f"({len(ids)} models; ids are case-sensitive){hint}"
        )

    def chat(self, messages: list[dict]) -> Reply:
        """One chat completion, from the cache when this exact request was made before."""
        s = self.settings
        params: dict = {"model": s.model, "messages": messages}
        if s.max_tokens is not None:
            params["max_tokens"] = s.max_tokens
        if s.temperature is not None:
            params["temperature"] = s.temperature
        key = self._key(
            {"base_url": s.base_url, **params, **({"sample": s.sample} if s.sample else {})}
        )
        reply = self._stored_reply(key)
        if reply is None:
            reply = self._asked(params, key)
        self._count(reply)
        if not names_model(reply.model, s.model):
            raise LLMError(
                f"the reply names model {reply.model or '(none)'!r}, not the requested "
                f"{s.model!r}: {self._where()} substituted another model"
            )
        return reply

    def _stored_reply(self, key: str) -> Reply | None:
        """The reply the cache holds for this request, if any."""
        stored = self.store.get_reply(key) if self.store is not None else None
        if stored is None or "content" not in stored:
            return None
        return Reply(
            content=stored["content"],
            model=stored.get("model", ""),
            prompt_tokens=int(stored.get("prompt_tokens", 0)),
            completion_tokens=int(stored.get("completion_tokens", 0)),
            finish_reason=stored.get("finish_reason"),
            cached=True,
        )

    def _asked(self, params: dict, key: str) -> Reply:
        """The endpoint's reply to the request ``params``, stored in the cache under ``key``."""
        response = self._call(lambda: self._client.chat.completions.create(**params), "chat")
        choice = response.choices[0] if response.choices else None
        usage = response.usage
        reply = Reply(
            content=(choice.message.content if choice and choice.message else None) or "",
            model=response.model or "",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            finish_reason=choice.finish_reason if choice else None,
            cached=False,
        )
        if self.store is not None:
            self.store.put_reply(
                key,
                {
                    "content": reply.content,
                    "model": reply.model,
                    "prompt_tokens": reply.prompt_tokens,
                    "completion_tokens": reply.completion_tokens,
                    "finish_reason": reply.finish_reason,
                    "request_sha256": key,
                },
            )
        return reply

    def _count(self, reply: Reply) -> None:
        """One call into the run's counts: a cached one, or the tokens it spent."""
        with self._lock:
            self.calls += 1
            if reply.cached:
                self.cached_calls += 1
            else:
                self.prompt_tokens += reply.prompt_tokens
                self.completion_tokens += reply.completion_tokens

    # -- accounting ----------------------------------------------------------
    def cost_usd(self) -> float | None:
        """The tokens spent at the run's prices, else the dated table's (``prices.py``);
        None for a model neither prices."""
        return cost(self.prompt_tokens, self.completion_tokens, price_for(self.settings))

    def tokens(self) -> dict:
        """The report's ``tokens``: spent by this run (cached replies cost nothing)."""
        return {
            "prompt": self.prompt_tokens,
            "completion": self.completion_tokens,
            "cost_usd": self.cost_usd(),
            "price": price_for(self.settings),
            "model": self.settings.model,
            "calls": self.calls,
            "cached_calls": self.cached_calls,
            "retries": self.retries,
        }

    @staticmethod
    def _key(request: dict) -> str:
        blob = json.dumps(request, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()
