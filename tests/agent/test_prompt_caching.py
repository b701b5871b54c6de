"""Prompt caching breakpoints and policy (SPEC P1–P3), plus what reaches the wire."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agent.prompt_caching import (
    apply_anthropic_cache_control,
    caching_enabled,
    caching_log_line,
    resolve_cache_ttl,
)
from agent.providers import ProviderSettings, make_provider
from tests.fakes.llm_server import FakeLLM

FIVE_MIN = {"type": "ephemeral"}
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}


def conversation(turns: int = 6) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are nightowl."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i}"})
        messages.append({"role": "assistant", "content": f"answer {i}"})
    return messages


def markers_in(value: Any) -> int:
    return json.dumps(value).count('"cache_control"')


def test_system_and_last_three_non_system_messages_are_marked() -> None:
    marked = apply_anthropic_cache_control(conversation(), "5m")

    assert marked[0]["content"] == [
        {"type": "text", "text": "You are nightowl.", "cache_control": FIVE_MIN}
    ]
    for message in marked[-3:]:
        assert message["content"][-1]["cache_control"] == FIVE_MIN
    for message in marked[1:-3]:
        assert markers_in(message) == 0, message
    assert markers_in(marked) == 4


@pytest.mark.parametrize("turns", [0, 1, 2, 10])
def test_never_more_than_four_breakpoints(turns: int) -> None:
    messages = conversation(turns)
    messages.insert(3, {"role": "system", "content": "a second system note"})

    assert markers_in(apply_anthropic_cache_control(messages, "1h")) <= 4


def test_without_system_prompt_only_the_last_three_are_marked() -> None:
    messages = conversation(3)[1:]
    marked = apply_anthropic_cache_control(messages)

    assert [markers_in(m) for m in marked] == [0, 0, 0, 1, 1, 1]


def test_one_hour_ttl_marker() -> None:
    marked = apply_anthropic_cache_control(conversation(1), "1h")

    assert marked[0]["content"][0]["cache_control"] == ONE_HOUR
    assert marked[-1]["content"][0]["cache_control"] == ONE_HOUR


def test_list_content_gets_the_marker_on_its_last_block() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"}, image]}]

    marked = apply_anthropic_cache_control(messages)

    assert "cache_control" not in marked[0]["content"][0]
    assert marked[0]["content"][1]["cache_control"] == FIVE_MIN


@pytest.mark.parametrize("empty", [None, "", []])
def test_empty_content_gets_the_marker_on_the_message(empty: Any) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    messages = [{"role": "assistant", "content": empty, "tool_calls": [call]}]

    marked = apply_anthropic_cache_control(messages)

    assert marked[0]["cache_control"] == FIVE_MIN
    assert marked[0]["content"] == empty


def test_tool_messages_are_marked_only_for_native_anthropic() -> None:
    messages = [{"role": "tool", "tool_call_id": "c1", "content": "42"}]

    native = apply_anthropic_cache_control(messages, native_anthropic=True)
    routed = apply_anthropic_cache_control(messages, native_anthropic=False)

    assert native[0]["cache_control"] == FIVE_MIN
    assert native[0]["content"] == "42"
    assert routed == messages


def test_input_is_never_mutated() -> None:
    messages = conversation(3)
    messages[2]["content"] = [{"type": "text", "text": "listed"}]
    before = copy.deepcopy(messages)

    marked = apply_anthropic_cache_control(messages, "1h")

    assert messages == before
    assert marked != before


def test_markers_are_independent_objects() -> None:
    marked = apply_anthropic_cache_control(conversation(2))
    marked[-1]["content"][0]["cache_control"]["ttl"] = "changed"

    assert marked[-2]["content"][0]["cache_control"] == FIVE_MIN


@pytest.mark.parametrize(
    ("provider", "model", "base_url", "expected"),
    [
        ("anthropic", "claude-sonnet-4-5", None, True),
        ("anthropic", "claude-3-5-haiku", "https://proxy.example/anthropic", True),
        ("openai", "anthropic/claude-sonnet-4", "https://openrouter.ai/api/v1", True),
        ("openai", "anthropic/Claude-Opus-4", "https://OpenRouter.ai/api/v1", True),
        ("openai", "claude-sonnet-4", None, False),
        ("openai", "claude-sonnet-4", "http://localhost:11434/v1", False),
        ("openai", "openai/gpt-4o", "https://openrouter.ai/api/v1", False),
        ("openai", "gpt-4o-mini", None, False),
    ],
)
def test_caching_enabled_for_claude_on_anthropic_or_openrouter(
    provider: str, model: str, base_url: str | None, expected: bool
) -> None:
    assert caching_enabled(provider, model, base_url) is expected


@pytest.mark.parametrize(
    ("setting", "human_paced", "expected"),
    [
        ("5m", True, "5m"),
        ("1h", False, "1h"),
        ("auto", True, "1h"),
        ("auto", False, "5m"),
        ("AUTO", True, "1h"),
    ],
)
def test_resolve_cache_ttl(setting: str, human_paced: bool, expected: str) -> None:
    assert resolve_cache_ttl(setting, human_paced=human_paced) == expected


def test_resolve_cache_ttl_refuses_unknown_settings() -> None:
    with pytest.raises(ValueError, match="5m, 1h or auto"):
        resolve_cache_ttl("10m", human_paced=True)


def test_log_lines() -> None:
    assert (
        caching_log_line("claude-sonnet-4-5", "anthropic", "1h")
        == "Prompt caching: ENABLED (claude-sonnet-4-5 via anthropic, 1h TTL)"
    )
    assert (
        caching_log_line("gpt-4o-mini", "openai", None)
        == "Prompt caching: DISABLED (gpt-4o-mini via openai)"
    )


async def test_anthropic_request_on_the_wire_carries_the_markers(fake_llm: FakeLLM) -> None:
    provider = make_provider(
        ProviderSettings(
            "anthropic", "claude-test-1", "k", fake_llm.anthropic_base_url, max_retries=0
        )
    )
    try:
        await provider.complete(conversation(3), max_tokens=64, cache_ttl="1h")
        await provider.complete(conversation(3), max_tokens=64)
    finally:
        await provider.aclose()

    cached, plain = (r.body for r in fake_llm.requests)
    assert cached["system"][-1]["cache_control"] == ONE_HOUR
    marked = [m for m in cached["messages"] if markers_in(m)]
    assert marked == cached["messages"][-3:]
    assert markers_in(cached) == 4
    assert markers_in(plain) == 0


async def test_openrouter_claude_request_carries_markers_but_plain_openai_does_not(
    fake_llm: FakeLLM,
) -> None:
    routes = [
        (fake_llm.openrouter_base_url, "anthropic/claude-sonnet-4"),
        (fake_llm.openai_base_url, "anthropic/claude-sonnet-4"),
        (fake_llm.openrouter_base_url, "openai/gpt-4o"),
    ]
    for base_url, model in routes:
        provider = make_provider(ProviderSettings("openai", model, "k", base_url, max_retries=0))
        try:
            await provider.complete(conversation(2), max_tokens=64, cache_ttl="5m")
        finally:
            await provider.aclose()

    openrouter_claude, direct, openrouter_gpt = (r.body for r in fake_llm.requests)
    assert openrouter_claude["messages"][0]["content"][0]["cache_control"] == FIVE_MIN
    assert markers_in(openrouter_claude) == 4
    assert markers_in(direct) == 0
    assert markers_in(openrouter_gpt) == 0
