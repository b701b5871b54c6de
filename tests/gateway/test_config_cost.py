"""Prices and budgets in config.yaml (gateway/config/cost.py, docs/cost.md)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from gateway.config.cost import budgets, configured_price, model_price, transcription_minute_price
from gateway.config.models import model_choices
from gateway.config.schema import ConfigError, load_config, parse_config

ENV = {"OPENAI_API_KEY": "sk-test"}


def test_prices_and_budgets_default_to_null() -> None:
    config = parse_config({}, ENV)
    assert config.model.price is None and config.auxiliary.compression.price is None
    assert config.media.transcription.price_per_minute is None
    assert (config.budgets.per_user_daily, config.budgets.per_chat_daily) == (None, None)
    assert config.budgets.monthly is None
    # null: the built-in table for the default model at OpenAI's own API
    assert model_price("openai", config.model.name, None, config.model.price) is not None


def test_a_configured_price_is_exact_and_fills_the_vendors_cache_rates() -> None:
    config = parse_config(
        {
            "model": {"name": "my-model", "price": {"input": 0.15, "output": 0.6}},
            "auxiliary": {
                "compression": {
                    "model": "claude-haiku-4-5",
                    "provider": "anthropic",
                    "price": {"input": 1, "output": 5, "cache_write_1h": 2.5},
                }
            },
        },
        ENV,
    )
    main = configured_price(config.model.price, "openai")
    summary = configured_price(config.auxiliary.compression.price, "anthropic")

    assert main is not None and main.input == Decimal("0.15") and main.output == Decimal("0.6")
    assert main.cached_input == Decimal("0.075")
    assert summary is not None
    assert (summary.cached_input, summary.cache_write, summary.cache_write_1h) == (
        Decimal("0.1"),
        Decimal("1.25"),
        Decimal("2.5"),
    )


def test_explicit_zeros_make_a_hosted_model_free_and_null_leaves_it_unknown() -> None:
    free = parse_config({"model": {"price": {"input": 0, "output": 0}}}, ENV).model.price
    hosted = "https://api.example.com/v1"
    priced = model_price("openai", "their-model", hosted, free)
    assert priced is not None and priced.free
    assert model_price("openai", "their-model", hosted, None) is None
    assert model_price("openai", "their-model", "http://127.0.0.1:8000/v1", None) is not None


def test_an_alternative_model_has_its_own_price_never_the_main_one() -> None:
    config = parse_config(
        {
            "model": {"price": {"input": 9, "output": 9}},
            "models": {
                "cheap": {"name": "gpt-4.1-nano", "price": {"input": 0.1, "output": 0.4}},
                "table": {"name": "gpt-4o"},
            },
        },
        ENV,
    )
    choices = model_choices(config.model, config.models)
    assert choices["default"].price == config.model.price
    assert choices["cheap"].price is not None and choices["cheap"].price.input == 0.1
    assert choices["table"].price is None


@pytest.mark.parametrize(
    ("yaml", "problem"),
    [
        ("model:\n  price: {input: 0.15}\n", "config.yaml:2: model.price.output: required"),
        (
            "model:\n  price: {input: -1, output: 1}\n",
            "config.yaml:2: model.price.input: expected a number of at least 0, got -1",
        ),
        (
            "model:\n  price: {input: 1, output: 1, cache: 1}\n",
            "config.yaml:2: model.price.cache: unknown key",
        ),
        (
            "budgets:\n  monthly: -5\n",
            "config.yaml:2: budgets.monthly: expected a number of at least 0, got -5",
        ),
        (
            "budgets:\n  per_user_daily: lots\n",
            'config.yaml:2: budgets.per_user_daily: expected a number of at least 0, got "lots"',
        ),
        (
            "media:\n  transcription:\n    price_per_minute: -0.006\n",
            "config.yaml:3: media.transcription.price_per_minute: expected a number of at least 0",
        ),
        ("budgets: 5\n", "config.yaml:1: budgets: expected a mapping, got 5"),
        (
            "model:\n  price: {input: 0.075, cached_input: 0.15, output: 0.6}\n",
            "config.yaml:2: model.price.cached_input: 0.15 is more than input (0.075); a cached"
            " read never costs more than a fresh one: are the two swapped?",
        ),
        (
            "models:\n  cheap:\n    name: gpt-4.1-nano\n"
            "    price:\n      input: 0.1\n      output: 0.4\n      cached_input: 1\n",
            "config.yaml:7: models.cheap.price.cached_input: 1 is more than input (0.1)",
        ),
        (
            "auxiliary:\n  compression:\n    model: m\n    price: {input: 1, output: 2, cached_input: 3}\n",
            "config.yaml:4: auxiliary.compression.price.cached_input: 3 is more than input (1)",
        ),
    ],
)
def test_wrong_prices_and_budgets_are_refused_with_their_line(
    tmp_path: Path, yaml: str, problem: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml)
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ=ENV)
    assert problem in str(caught.value).replace(f"{tmp_path}/", "")


def test_budgets_become_exact_dollars() -> None:
    config = parse_config({"budgets": {"per_user_daily": 0.1, "monthly": 20}}, ENV)
    caps = budgets(config.budgets)
    assert caps.per_user_daily == Decimal("0.1") and caps.monthly == Decimal(20)
    assert caps.per_chat_daily is None


def test_transcription_price_per_minute() -> None:
    config = parse_config({"media": {"transcription": {"price_per_minute": 0.004}}}, ENV)
    per_minute = config.media.transcription.price_per_minute
    assert transcription_minute_price("whisper-1", None, per_minute) == Decimal("0.004")
    assert transcription_minute_price("whisper-1", None, None) == Decimal("0.006")
    assert transcription_minute_price("large-v3", "https://stt.example.com", None) is None
