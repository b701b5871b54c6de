"""Prices and the cost of a call (agent/cost/prices.py, docs/cost.md)."""

from __future__ import annotations

from decimal import Decimal

import anthropic
import pytest

from agent.cost.prices import (
    FREE,
    Price,
    cost_of,
    is_local_endpoint,
    price_for,
    table_price,
    to_decimal,
    transcription_cost,
    transcription_price,
)
from agent.providers import ProviderSettings, make_provider
from agent.providers.anthropic import normalise_usage
from agent.providers.base import Usage
from tests.fakes.llm_server import FakeLLM, Reply


@pytest.mark.parametrize(
    ("model", "input_price"),
    [
        ("gpt-4o-mini", "0.15"),
        ("gpt-4o-mini-2024-07-18", "0.15"),  # not gpt-4o's 2.50: the longest prefix wins
        ("gpt-4o-2024-08-06", "2.50"),
        ("gpt-4o-2024-05-13", "5.00"),
        ("openai/gpt-4o", "2.50"),  # a router's vendor prefix
        ("GPT-4.1-mini-2025-04-14", "0.40"),
        ("gpt-4.1", "2.00"),
        ("o1-pro", "150.00"),  # not o1's 15
        ("o4-mini-2025-04-16", "1.10"),
        ("claude-sonnet-4-5-20250929", "3"),
        ("claude-opus-4-1-20250805", "15"),
        ("claude-opus-4-5-20251101", "5"),
        ("claude-haiku-4-5", "1"),
        ("anthropic/claude-3-5-haiku-latest", "0.80"),
    ],
)
def test_the_table_matches_a_name_or_its_snapshots(model: str, input_price: str) -> None:
    price = table_price(model)
    assert price is not None and price.input == Decimal(input_price)


@pytest.mark.parametrize(
    "model",
    [
        "llama3.1:8b",
        "qwen2.5-72b-instruct",
        "gpt4o",
        "mistral-large",
        "gpt-5-pro",  # not gpt-5's price: another model
        "gpt-4o-realtime-preview",
        "claude-opus-4-9",
    ],
)
def test_a_model_in_no_table_has_no_table_price(model: str) -> None:
    assert table_price(model) is None


@pytest.mark.parametrize(
    "base_url",
    [
        "http://localhost:11434/v1",
        "http://127.0.0.1:8080/v1",
        "http://192.168.1.20:8000/v1",
        "http://10.0.0.7/v1",
        "http://172.16.3.4:1234",
        "http://[::1]:8000/v1",
        "http://ollama:11434/v1",  # a compose service
        "http://gpu-box.lan:8000/v1",
        "http://host.docker.internal:11434",
        "http://100.101.102.103:11434/v1",  # Tailscale
        "https://gpu.tail1234.ts.net/v1",
    ],
)
def test_a_local_endpoint_is_free_whatever_the_model(base_url: str) -> None:
    assert is_local_endpoint(base_url)
    assert price_for("llama3.1:8b", base_url) == FREE
    assert price_for("gpt-4o", base_url) == FREE  # a local server named like it


@pytest.mark.parametrize(
    "base_url",
    [
        None,
        "https://api.openai.com/v1",
        "https://openrouter.ai/api/v1",
        "http://8.8.8.8/v1",
        "http://100.128.0.1/v1",  # just past 100.64/10
        "https://local.example.com/v1",
    ],
)
def test_a_hosted_endpoint_is_not_local(base_url: str | None) -> None:
    assert not is_local_endpoint(base_url)


def test_an_unknown_hosted_model_is_unknown_never_free() -> None:
    assert price_for("meta-llama/Llama-3.3-70B", "https://api.together.xyz/v1") is None
    assert price_for("gpt-4o-mini", "https://openrouter.ai/api/v1") == table_price("gpt-4o-mini")
    assert price_for("gpt-4o-mini", None) == table_price("gpt-4o-mini")


def test_a_configured_price_wins_everywhere_and_zero_means_free() -> None:
    mine = Price.per_million("1", "2")
    zero = Price.per_million(0, 0)
    assert price_for("llama3", "http://127.0.0.1:8080/v1", mine) == mine
    assert price_for("gpt-4o", None, mine) == mine
    assert price_for("mystery", "https://example.com/v1", zero) == zero
    assert zero.free and not mine.free


def test_cache_rates_left_out_follow_the_vendor() -> None:
    openai_style = Price.per_million(0.15, 0.60)
    claude = Price.per_million(3, 15, vendor="anthropic")
    listed = Price.per_million(0.15, 0.60, cached_input=0.03)

    assert (openai_style.cached_input, openai_style.cache_write) == (
        Decimal("0.075"),
        Decimal("0.15"),
    )
    assert (claude.cached_input, claude.cache_write, claude.cache_write_1h) == (
        Decimal("0.3"),
        Decimal("3.75"),
        Decimal("6"),
    )
    assert listed.cached_input == Decimal("0.03")


def test_a_float_price_is_read_as_written_and_a_negative_one_refused() -> None:
    assert to_decimal(0.15) == Decimal("0.15")
    assert to_decimal(0.1 + 0.2) != Decimal("0.3")  # what was really written is kept
    with pytest.raises(ValueError):
        to_decimal(-1)
    with pytest.raises(ValueError):
        to_decimal(float("nan"))
    with pytest.raises(ValueError):
        to_decimal("cheap")


def test_openai_cached_tokens_are_part_of_the_prompt() -> None:
    """OpenAI's prompt_tokens includes cached_tokens: 10,000 prompt tokens of which
    8,192 cached pay 1,808 at the input rate and 8,192 at the cached rate."""
    usage = Usage(prompt_tokens=10_000, completion_tokens=500, cache_read_tokens=8_192)
    cost = cost_of(usage, table_price("gpt-4o-mini"))
    assert cost == Decimal("0.0011856")  # (1808*0.15 + 8192*0.075 + 500*0.60) / 1e6


def test_anthropic_input_tokens_exclude_cache_reads_and_writes() -> None:
    """Anthropic's input_tokens is only what is after the last breakpoint; the provider
    adds reads and writes back, and the cost takes each at its own rate."""
    raw = anthropic.types.Usage(
        input_tokens=1_000,
        output_tokens=400,
        cache_read_input_tokens=20_000,
        cache_creation_input_tokens=3_000,
    )
    usage = normalise_usage(raw)
    price = table_price("claude-sonnet-4-5")
    assert usage is not None and usage.prompt_tokens == 24_000
    # 1000*3 + 20000*0.30 + 3000*3.75 + 400*15 = 26,250 per million
    assert cost_of(usage, price) == Decimal("0.02625")
    assert cost_of(usage, price, cache_ttl="1h") == Decimal("0.033")  # writes at 6


async def test_an_anthropic_call_through_the_fake_costs_what_its_usage_implies(
    fake_llm: FakeLLM,
) -> None:
    fake_llm.script(Reply("hi", usage=(24_000, 400), cache_read=20_000, cache_write=3_000))
    provider = make_provider(
        ProviderSettings("anthropic", "claude-sonnet-4-5", "k", fake_llm.anthropic_base_url)
    )
    completion = await provider.complete([{"role": "user", "content": "hello"}], max_tokens=64)
    body_usage = completion.usage
    assert body_usage is not None and body_usage.cache_write_tokens == 3_000
    assert cost_of(body_usage, table_price("claude-sonnet-4-5")) == Decimal("0.02625")


def test_unknown_price_or_usage_is_unknown_cost_unless_free() -> None:
    usage = Usage(prompt_tokens=10, completion_tokens=1)
    assert cost_of(usage, None) is None
    assert cost_of(None, Price.per_million("0.15", "0.60")) is None
    assert cost_of(None, FREE) == 0  # a local server that reports no usage
    assert cost_of(usage, FREE) == 0


def test_many_small_calls_add_up_exactly() -> None:
    price = Price.per_million("0.15", "0.60", cached_input="0.075")
    one = Usage(prompt_tokens=1_337, completion_tokens=17, cache_read_tokens=1_280)
    total = sum((cost_of(one, price) or Decimal(0) for _ in range(10_000)), Decimal(0))
    as_floats = sum(float(cost_of(one, price) or 0) for _ in range(10_000))

    assert total == Decimal("1.1475")  # (57*0.15 + 1280*0.075 + 17*0.6) / 1e6 * 10,000
    assert as_floats != 1.1475  # what this module exists to avoid


def test_transcription_is_priced_per_minute_to_the_second() -> None:
    whisper = transcription_price("whisper-1", None, None)
    assert whisper == Decimal("0.006")
    assert transcription_cost(90.4, whisper) == Decimal("0.009")  # 90 s
    assert transcription_cost(30.5, whisper) == Decimal("0.0031")  # 31 s
    assert transcription_price("whisper-1", "http://127.0.0.1:9000/v1", None) == 0
    assert transcription_price("large-v3", "https://stt.example.com/v1", None) is None
    assert transcription_price("large-v3", "https://stt.example.com/v1", 0.01) == Decimal("0.01")
    assert transcription_cost(60, None) is None
