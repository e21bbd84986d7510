"""Prices: the run's flags win, else the dated table for the default endpoint's models;
"cost unknown" only for a model the table does not list (or another endpoint)."""

from __future__ import annotations

from mutant_gate.cli.summary import tokens_line
from mutant_gate.engine import prices
from mutant_gate.engine.settings import DEFAULT_MODEL, LLMSettings


def _line(settings: LLMSettings) -> str:
    price = prices.price_for(settings)
    tokens = {
        "model": settings.model,
        "calls": 3,
        "cached_calls": 1,
        "prompt": 2_000_000,
        "completion": 1_000_000,
        "cost_usd": prices.cost(2_000_000, 1_000_000, price),
        "price": price,
    }
    line = tokens_line({"tokens": tokens})
    assert line is not None
    return line


def test_the_default_model_is_priced_from_the_dated_table():
    entry = prices.TABLE[DEFAULT_MODEL]
    price = prices.price_for(LLMSettings())
    assert price is not None and price["date"] == prices.TABLE_DATE
    assert price["assumed"] is entry.assumed
    expected = round(2 * entry.price_in + entry.price_out, 6)
    assert prices.cost(2_000_000, 1_000_000, price) == expected
    line = _line(LLMSettings())
    assert f"~${expected:.4f}" in line and prices.TABLE_DATE in line
    assert ("assumed prices" in line) is entry.assumed


def test_flags_win_and_unknown_models_have_no_price():
    flagged = LLMSettings(price_in=1.0, price_out=3.0)
    assert prices.cost(2_000_000, 1_000_000, prices.price_for(flagged)) == 5.0
    assert "(--price-in/--price-out)" in _line(flagged)
    only_in = LLMSettings(model="someone/else", price_in=2.0)
    assert prices.cost(1_000_000, 1_000_000, prices.price_for(only_in)) == 2.0
    unknown = LLMSettings(model="someone/else")
    assert prices.price_for(unknown) is None
    assert "cost unknown" in _line(unknown)
    # the table is the default endpoint's: the same model elsewhere has no price
    elsewhere = LLMSettings(base_url="http://127.0.0.1:9/v1/")
    assert prices.price_for(elsewhere) is None
    assert "cost unknown" not in _line(LLMSettings())
