"""What a model's tokens cost: the run's own prices, else a small dated default table.

Prices are USD per million prompt (``in``) / completion (``out``) tokens. The run's
``--price-in``/``--price-out`` (or ``price-in``/``price-out`` in ``[tool.mutant-gate]``)
win. Without them, a model of the default endpoint that ``TABLE`` lists is priced from
it, and the report names the table's date and whether its figures are assumptions. Any
other model, or another endpoint, has no price: "cost unknown".

The table's figures are ASSUMPTIONS (``assumed=True``): they were not read off the
provider's price list. The one figure behind them is the project's own study, where
343,276 tokens of the default model cost about $0.17 at list price, about $0.50 per
million tokens blended over prompt and completion; it is used for both. Replace them
(and set ``assumed=False``, with the source) once the provider's list is checked.
"""

from __future__ import annotations

from dataclasses import dataclass

from .settings import DEFAULT_BASE_URL, DEFAULT_MODEL, LLMSettings

#: When the table's figures were last set.
TABLE_DATE = "2026-12-02"


@dataclass(frozen=True)
class Price:
    price_in: float
    price_out: float
    source: str
    assumed: bool = True


TABLE: dict[str, Price] = {
    DEFAULT_MODEL: Price(
        0.50,
        0.50,
        "assumed: ~$0.50 per million tokens blended, from the project's study "
        "(343,276 tokens, about $0.17); not checked against the provider's price list",
    ),
}


def _same_endpoint(url: str) -> bool:
    return url.rstrip("/") == DEFAULT_BASE_URL.rstrip("/")


def price_for(settings: LLMSettings) -> dict | None:
    """The prices a run's tokens are costed at (the report's ``tokens.price``), or None."""
    if settings.price_in is not None or settings.price_out is not None:
        return {
            "in": settings.price_in or 0.0,
            "out": settings.price_out or 0.0,
            "source": "the run's --price-in/--price-out",
            "date": None,
            "assumed": False,
        }
    price = TABLE.get(settings.model) if _same_endpoint(settings.base_url) else None
    if price is None:
        return None
    return {
        "in": price.price_in,
        "out": price.price_out,
        "source": price.source,
        "date": TABLE_DATE,
        "assumed": price.assumed,
    }


def cost(prompt: int, completion: int, price: dict | None) -> float | None:
    if price is None:
        return None
    return round(prompt / 1e6 * price["in"] + completion / 1e6 * price["out"], 6)


def price_words(price: dict | None) -> str:
    """How a cost was reached, in a few words."""
    if price is None:
        return ""
    at = f"${price['in']:g}/${price['out']:g} per million prompt/completion tokens"
    if price.get("date") is None:
        return f"at {at} (--price-in/--price-out)"
    kind = "assumed prices" if price.get("assumed") else "list prices"
    return f"at {at}, {kind} of {price['date']} (--price-in/--price-out to set)"
