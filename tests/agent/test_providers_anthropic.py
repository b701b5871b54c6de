"""The Anthropic provider with the real SDK against the fake server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent.providers import Provider, ProviderError, ProviderSettings, Usage, make_provider
from agent.providers.anthropic import AnthropicProvider
from tests.agent.provider_calls import Deltas, chat, failure, time_tool_round_trip
from tests.fakes.llm_server import FakeLLM, Reply

KEY = "sk-ant-test-SECRET-0123456789abcdef"
MODEL = "claude-test-1"
PNG = "iVBORw0KGgo="


@pytest.fixture
async def provider(fake_llm: FakeLLM) -> AsyncIterator[Provider]:
    provider = make_provider(
        ProviderSettings("anthropic", MODEL, KEY, fake_llm.anthropic_base_url, 5, max_retries=0)
    )
    yield provider
    await provider.aclose()


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def test_make_provider_builds_the_anthropic_route() -> None:
    provider = make_provider(ProviderSettings("anthropic", MODEL, KEY))

    assert isinstance(provider, AnthropicProvider)
    assert provider.route == f"anthropic:default:{MODEL}"


async def test_text_reply_with_system_at_top_level(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply("Hi.", usage=(50, 2)))

    completion = await provider.complete(chat(), max_tokens=64)

    assert (completion.text, completion.finish_reason) == ("Hi.", "stop")
    assert completion.usage == Usage(prompt_tokens=50, completion_tokens=2)
    body = fake_llm.requests[0].body
    assert body["system"] == [{"type": "text", "text": "Be brief."}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert (body["model"], body["max_tokens"]) == (MODEL, 64)
    assert fake_llm.requests[0].api_key == KEY


async def test_tool_calls_round_trip(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply("Let me look.", tool_calls=[("current_time", {"zone": "UTC"})]))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "current_time",
                "description": "The time now",
                "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
            },
        }
    ]

    tool_call, _ = await time_tool_round_trip(provider, tools)

    sent = fake_llm.requests[1].body
    assert sent["tools"] == [
        {
            "name": "current_time",
            "input_schema": tools[0]["function"]["parameters"],
            "description": "The time now",
        }
    ]
    assert sent["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": tool_call.id,
                    "name": "current_time",
                    "input": {"zone": "UTC"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_call.id, "content": "12:00"}],
        },
    ]


async def test_conversion_merges_roles_and_converts_parts(
    provider: Provider, fake_llm: FakeLLM
) -> None:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Alice: morning"},
        {"role": "user", "content": [{"type": "text", "text": "Bob: look"}, image]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("a.1", "session_search", '{"query": "x"}'),
                call("b", "f", "{oops"),
            ],
        },
        {"role": "tool", "tool_call_id": "a.1", "content": "found"},
        {"role": "tool", "tool_call_id": "b", "content": "done"},
        {"role": "user", "content": "thanks"},
    ]

    await provider.complete(messages, max_tokens=64)

    sent = fake_llm.requests[0].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"] == [
        {"type": "text", "text": "Alice: morning"},
        {"type": "text", "text": "Bob: look"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]
    assert sent[1]["content"] == [
        {"type": "tool_use", "id": "a_1", "name": "session_search", "input": {"query": "x"}},
        {"type": "tool_use", "id": "b", "name": "f", "input": {}},
    ]
    assert sent[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "a_1", "content": "found"},
        {"type": "tool_result", "tool_use_id": "b", "content": "done"},
        {"type": "text", "text": "thanks"},
    ]


async def test_conversation_opens_with_a_user_turn(provider: Provider, fake_llm: FakeLLM) -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "assistant", "content": "[CONTEXT COMPACTION] summary"},
        {"role": "user", "content": "go on"},
    ]

    await provider.complete(messages, max_tokens=64)

    assert [m["role"] for m in fake_llm.requests[0].messages] == ["user", "assistant", "user"]


async def test_streaming_reports_each_delta_and_usage(
    provider: Provider, fake_llm: FakeLLM
) -> None:
    text = "one two three four five six"
    fake_llm.script(Reply(text, usage=(400, 7)))
    deltas = Deltas()

    completion = await provider.complete(chat(), max_tokens=64, on_text=deltas)

    assert len(deltas.pieces) > 1
    assert "".join(deltas.pieces) == completion.text == text
    assert completion.usage == Usage(prompt_tokens=400, completion_tokens=7)
    assert fake_llm.requests[0].stream


@pytest.mark.parametrize("stream", [False, True])
async def test_usage_includes_cached_input(
    provider: Provider, fake_llm: FakeLLM, stream: bool
) -> None:
    # The fake sends input_tokens = 1000 - 600 - 100 = 300, as Anthropic would.
    fake_llm.script(Reply("ok", usage=(1000, 5), cache_read=600, cache_write=100))

    completion = await provider.complete(
        chat(), max_tokens=64, on_text=Deltas() if stream else None
    )

    assert completion.usage == Usage(
        prompt_tokens=1000, completion_tokens=5, cache_read_tokens=600, cache_write_tokens=100
    )


async def test_streamed_tool_calls(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply("", tool_calls=[("a", {"x": 1}), ("b", {"y": [1, 2]})]))

    completion = await provider.complete(chat(), max_tokens=64, on_text=Deltas())

    assert completion.finish_reason == "tool_calls"
    assert [(c.name, c.parsed_arguments()) for c in completion.tool_calls] == [
        ("a", {"x": 1}),
        ("b", {"y": [1, 2]}),
    ]


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_prompt_too_long_learns_the_window(
    provider: Provider, fake_llm: FakeLLM, stream: bool
) -> None:
    fake_llm.context_window = 3

    error = await failure(provider, KEY, stream=stream)

    assert (error.kind, error.context_limit, error.status) == ("overflow", 3, 400)
    assert "prompt is too long" in str(error)


async def test_prompt_plus_max_tokens_overflow(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.context_window = 20

    error = await failure(provider, KEY)

    assert (error.kind, error.context_limit) == ("overflow", 20)
    assert "exceed context limit" in str(error)


async def test_rate_limit_carries_retry_after(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(status=429, retry_after=12))

    error = await failure(provider, KEY, stream=True)

    assert (error.kind, error.retry_after) == ("rate_limit", 12.0)


@pytest.mark.parametrize("stream", [False, True])
async def test_overloaded_529(provider: Provider, fake_llm: FakeLLM, stream: bool) -> None:
    fake_llm.script(Reply(status=529))

    error = await failure(provider, KEY, stream=stream)

    assert (error.kind, error.status) == ("overloaded", 529)


async def test_overloaded_mid_stream(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply("partial text here", stream_error="overloaded_error"))
    deltas = Deltas()

    with pytest.raises(ProviderError) as caught:
        await provider.complete(chat(), max_tokens=32, on_text=deltas)

    assert caught.value.kind == "overloaded"
    assert deltas.pieces  # the failure came after text had started flowing
