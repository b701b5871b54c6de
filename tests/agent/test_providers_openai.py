"""The OpenAI provider with the real SDK against the fake server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from agent.providers import Provider, ProviderSettings, Usage, make_provider
from agent.providers.openai import OpenAIProvider
from tests.agent.provider_calls import Deltas, chat, failure, time_tool_round_trip
from tests.fakes.llm_server import FakeLLM, Reply

KEY = "sk-test-SECRET-0123456789abcdef"


@pytest.fixture
async def provider(fake_llm: FakeLLM) -> AsyncIterator[Provider]:
    provider = make_provider(
        ProviderSettings(
            "openai", "gpt-test", KEY, fake_llm.openai_base_url, timeout=5, max_retries=0
        )
    )
    yield provider
    await provider.aclose()


def test_make_provider_builds_the_openai_route() -> None:
    provider = make_provider(ProviderSettings("openai", "gpt-4o-mini", KEY, "http://h/v1"))

    assert isinstance(provider, OpenAIProvider)
    assert provider.name == "openai"
    assert provider.route == "openai:http://h/v1:gpt-4o-mini"
    with pytest.raises(ValueError, match="unknown provider"):
        make_provider(ProviderSettings("bedrock", "m"))


async def test_text_reply(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply("Hello there.", usage=(120, 4)))

    completion = await provider.complete(chat(), max_tokens=32)

    assert completion.text == "Hello there."
    assert completion.finish_reason == "stop"
    assert completion.usage == Usage(prompt_tokens=120, completion_tokens=4)
    body = fake_llm.requests[0].body
    assert body["model"] == "gpt-test"
    assert body["max_tokens"] == 32
    assert body["messages"] == chat()
    assert fake_llm.requests[0].api_key == KEY


async def test_only_wire_keys_reach_the_server(provider: Provider, fake_llm: FakeLLM) -> None:
    messages = [
        {"role": "user", "content": "hi", "id": 7, "token_count": 3, "created_at": "today"},
        {"role": "assistant", "content": "yo", "tool_calls": [], "name": None, "active": 1},
        {"role": "user", "content": "again", "platform_message_id": "42"},
    ]

    await provider.complete(messages, max_tokens=16)

    assert fake_llm.requests[0].messages == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "again"},
    ]


async def test_tool_calls_round_trip(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply("", tool_calls=[("current_time", {"zone": "UTC"})]), Reply("It is noon."))
    tools = [{"type": "function", "function": {"name": "current_time", "parameters": {}}}]

    call, second = await time_tool_round_trip(provider, tools)

    assert second.text == "It is noon."
    sent = fake_llm.requests[1].body
    assert sent["tools"] == tools
    assert sent["messages"][2]["tool_calls"] == [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": "current_time", "arguments": '{"zone": "UTC"}'},
        }
    ]
    assert sent["messages"][3] == {"role": "tool", "content": "12:00", "tool_call_id": call.id}


async def test_streaming_reports_each_delta_and_usage(
    provider: Provider, fake_llm: FakeLLM
) -> None:
    text = "one two three four five six"
    fake_llm.script(Reply(text, usage=(300, 9), cache_read=200))
    deltas = Deltas()

    completion = await provider.complete(chat(), max_tokens=32, on_text=deltas)

    assert len(deltas.pieces) > 1
    assert "".join(deltas.pieces) == completion.text == text
    assert completion.usage == Usage(prompt_tokens=300, completion_tokens=9, cache_read_tokens=200)
    assert fake_llm.requests[0].body["stream_options"] == {"include_usage": True}


async def test_streaming_tool_calls_are_assembled(provider: Provider, fake_llm: FakeLLM) -> None:
    calls = [("session_search", {"query": "deploy", "limit": 5}), ("current_time", {})]
    fake_llm.script(Reply("Checking.", tool_calls=calls))

    completion = await provider.complete(chat(), max_tokens=32, on_text=Deltas())

    assert completion.finish_reason == "tool_calls"
    assert [(c.name, c.parsed_arguments()) for c in completion.tool_calls] == [
        ("session_search", {"query": "deploy", "limit": 5}),
        ("current_time", {}),
    ]
    assert len({c.id for c in completion.tool_calls}) == 2


async def test_tool_calls_with_a_stop_finish_reason_still_say_tool_calls(
    provider: Provider, fake_llm: FakeLLM
) -> None:
    # Some servers (older Ollama) answer tool calls with finish_reason "stop".
    fake_llm.script(Reply("", tool_calls=[("current_time", {})], finish_reason="stop"))

    completion = await provider.complete(chat(), max_tokens=32)

    assert completion.finish_reason == "tool_calls"
    assert completion.tool_calls[0].name == "current_time"


async def test_extra_headers_reach_the_server(fake_llm: FakeLLM) -> None:
    settings = ProviderSettings(
        "openai",
        "m",
        KEY,
        fake_llm.openai_base_url,
        max_retries=0,
        extra_headers={"X-Title": "nightowl"},
    )
    provider = make_provider(settings)
    try:
        await provider.complete(chat(), max_tokens=8)
    finally:
        await provider.aclose()

    assert fake_llm.requests[0].headers["x-title"] == "nightowl"


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_overflow_learns_the_window(
    provider: Provider, fake_llm: FakeLLM, stream: bool
) -> None:
    fake_llm.context_window = 20

    error = await failure(provider, KEY, stream=stream)

    assert error.kind == "overflow"
    assert error.context_limit == 20
    assert error.status == 400


async def test_overflow_from_a_vllm_style_server(provider: Provider, fake_llm: FakeLLM) -> None:
    message = (
        "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum "
        "context length is 4096 tokens and your request has 3500 input tokens"
    )
    fake_llm.script(Reply(status=400, error_type="BadRequestError", error_message=message))

    error = await failure(provider, KEY)

    assert (error.kind, error.context_limit) == ("overflow", 4096)


async def test_overflow_from_llama_cpp_error_body(provider: Provider, fake_llm: FakeLLM) -> None:
    body = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 9000,
            "n_ctx": 8192,
        }
    }
    fake_llm.script(Reply(status=400, raw_body=json.dumps(body)))

    error = await failure(provider, KEY)

    assert (error.kind, error.context_limit) == ("overflow", 8192)


@pytest.mark.parametrize(
    ("headers", "seconds"), [({"retry-after": "3"}, 3.0), ({"retry-after-ms": "250"}, 0.25)]
)
async def test_rate_limit_carries_retry_after(
    provider: Provider, fake_llm: FakeLLM, headers: dict[str, str], seconds: float
) -> None:
    fake_llm.script(Reply(status=429, headers=headers))

    error = await failure(provider, KEY)

    assert (error.kind, error.retry_after, error.status) == ("rate_limit", seconds, 429)


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=529),
        Reply(status=503, error_message="The engine is currently overloaded"),
        Reply(stream_error="server_error", error_message="The server is overloaded"),
    ],
)
async def test_overloaded(provider: Provider, fake_llm: FakeLLM, reply: Reply) -> None:
    fake_llm.script(reply)

    assert (await failure(provider, KEY, stream=True)).kind == "overloaded"


async def test_wrong_key_is_an_auth_error(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.api_key = "another-key"

    assert (await failure(provider, KEY, stream=True)).kind == "auth"


async def test_error_inside_a_200_body_is_classified(provider: Provider, fake_llm: FakeLLM) -> None:
    body = {"error": {"message": "Provider returned error: overloaded", "code": 502}}
    fake_llm.script(Reply(raw_body=json.dumps(body)))

    assert (await failure(provider, KEY)).kind == "overloaded"


async def test_key_echoed_by_the_server_never_reaches_the_message(
    provider: Provider, fake_llm: FakeLLM
) -> None:
    fake_llm.script(
        Reply(status=400, error_message=f"bad request from key {KEY} with Bearer {KEY}")
    )

    error = await failure(provider, KEY)

    assert "bad request" in str(error)
