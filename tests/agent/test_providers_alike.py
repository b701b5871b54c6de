"""What the OpenAI and the Anthropic provider do alike, each with its real SDK against
the fake server: timeouts, a closed port, a failing callback, a reply without usage, the
failures that are "other"."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest

from agent.providers import Provider, ProviderError, ProviderSettings, make_provider
from tests.agent.provider_calls import Deltas, chat, failure
from tests.fakes.llm_server import FakeLLM, Reply

KEY = "sk-test-SECRET-0123456789abcdef"
APIS = ["openai", "anthropic"]


def base_url(api: str, port: int) -> str:
    return f"http://127.0.0.1:{port}" + ("/v1" if api == "openai" else "")


def settings(api: str, port: int) -> ProviderSettings:
    return ProviderSettings(api, "test-model", KEY, base_url(api, port), timeout=5, max_retries=0)


@pytest.fixture(params=APIS)
async def provider(request: pytest.FixtureRequest, fake_llm: FakeLLM) -> AsyncIterator[Provider]:
    provider = make_provider(settings(request.param, fake_llm.port))
    yield provider
    await provider.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_timeout(provider: Provider, fake_llm: FakeLLM, stream: bool) -> None:
    fake_llm.script(Reply(hang=True))

    assert (await failure(provider, KEY, stream=stream, timeout=0.2)).kind == "timeout"


async def test_a_stream_that_stalls_is_a_timeout(provider: Provider, fake_llm: FakeLLM) -> None:
    # Two tokens, then silence with the connection open (the anthropic SDK lets this
    # read's timeout out unwrapped: it must still be a ProviderError of kind timeout).
    fake_llm.script(Reply("one two three four", tokens_per_second=50, stall_after=2))
    deltas = Deltas()

    with pytest.raises(ProviderError) as caught:
        await provider.complete(chat(), max_tokens=32, on_text=deltas, timeout=0.3)

    assert caught.value.kind == "timeout"
    assert "".join(deltas.pieces) == "one two"


async def test_a_slow_stream_outlasts_its_timeout(provider: Provider, fake_llm: FakeLLM) -> None:
    # The timeout bounds the silence between tokens, not the reply: 12 tokens at 20 a
    # second take 0.55 s, more than twice the 0.25 s timeout.
    words = " ".join(f"w{i}" for i in range(12))
    fake_llm.script(Reply(words, tokens_per_second=20))
    deltas = Deltas()

    completion = await provider.complete(chat(), max_tokens=64, on_text=deltas, timeout=0.25)

    (request,) = fake_llm.requests
    assert completion.text == words and len(deltas.pieces) == 12
    assert request.tokens[-1][0] - request.tokens[0][0] > 2 * 0.25


@pytest.mark.parametrize("api", APIS)
async def test_network_error_on_a_closed_port(api: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = make_provider(settings(api, port))
    try:
        error = await failure(provider, KEY, stream=True)
    finally:
        await provider.aclose()

    assert error.kind == "network"


async def test_callback_errors_propagate_unchanged(provider: Provider) -> None:
    async def broken(_: str) -> None:
        raise KeyError("delivery failed")

    with pytest.raises(KeyError, match="delivery failed"):
        await provider.complete(chat(), max_tokens=32, on_text=broken)


@pytest.mark.parametrize("stream", [False, True])
async def test_reply_without_usage_gives_none(
    provider: Provider, fake_llm: FakeLLM, stream: bool
) -> None:
    fake_llm.script(Reply("fine", usage=None))

    completion = await provider.complete(
        chat(), max_tokens=32, on_text=Deltas() if stream else None
    )

    assert (completion.text, completion.usage) == ("fine", None)


async def test_a_cut_reply_finishes_with_length(provider: Provider, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply("cut sho", finish_reason="length"))

    assert (await provider.complete(chat(), max_tokens=2)).finish_reason == "length"


@pytest.mark.parametrize("status", [401, 403])
async def test_auth(provider: Provider, fake_llm: FakeLLM, status: int) -> None:
    fake_llm.script(Reply(status=status, error_message=f"Incorrect API key provided: {KEY}"))

    error = await failure(provider, KEY)

    assert error.kind == "auth"
    assert "Incorrect API key provided" in str(error)


@pytest.mark.parametrize(
    ("provider", "reply", "stream", "detail"),
    [
        ("openai", Reply(status=500), False, ""),
        ("openai", Reply(stream_error="server_error", error_message="upstream broke"), True, ""),
        ("openai", Reply(status=502, raw_body="<html>Bad Gateway</html>"), False, ""),
        ("openai", Reply(raw_body="{not json"), False, "json_decode"),
        ("openai", Reply(raw_body="<html>a proxy's page</html>"), False, "json_decode"),
        ("openai", Reply(raw_body="<html>caf\xe9</html>".encode("latin-1")), False, "json_decode"),
        ("openai", Reply(raw_body='data: {"broken\n\n'), True, "json_decode"),
        ("openai", Reply(raw_body='{"id": "x", "choices": []}'), False, "empty_response"),
        ("openai", Reply("partial answer", truncate=True), True, "stream_closed"),
        ("anthropic", Reply(status=500), False, ""),
        ("anthropic", Reply(stream_error="api_error", error_message="Internal error"), True, ""),
        ("anthropic", Reply("partial", truncate=True), True, "stream_closed"),
        ("anthropic", Reply(raw_body="event: message_start\ndata: {oops\n\n"), True, "json_decode"),
    ],
    indirect=["provider"],
)
async def test_other_failures(
    provider: Provider, fake_llm: FakeLLM, reply: Reply, stream: bool, detail: str
) -> None:
    """What no other kind fits (a 500, a broken stream, an unreadable body) is "other",
    with a detail where one helps."""
    fake_llm.script(reply)

    error = await failure(provider, KEY, stream=stream)

    assert (error.kind, error.detail) == ("other", detail)
