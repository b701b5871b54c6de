"""Calling a provider in tests: a short chat, a recorder of streamed text, a tool round
trip, and a call that must fail (with the API key nowhere in the error)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.providers import Provider, ProviderError
from agent.providers.base import Completion, ToolCall


def chat(text: str = "hello") -> list[dict[str, Any]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]


class Deltas:
    """An ``on_text`` callback that keeps every streamed piece."""

    def __init__(self) -> None:
        self.pieces: list[str] = []

    async def __call__(self, text: str) -> None:
        self.pieces.append(text)


async def failure(
    provider: Provider, key: str, *, stream: bool = False, **kwargs: Any
) -> ProviderError:
    """The ProviderError a short chat ends in; ``key`` must not show in it."""
    with pytest.raises(ProviderError) as caught:
        await provider.complete(
            chat(), max_tokens=32, on_text=Deltas() if stream else None, **kwargs
        )
    assert key not in str(caught.value) and key not in repr(caught.value)
    return caught.value


async def time_tool_round_trip(
    provider: Provider, tools: list[dict[str, Any]]
) -> tuple[ToolCall, Completion]:
    """Ask "time?" (the fake scripted to call ``current_time`` with zone UTC), check the
    call, and send its result "12:00" back: (the call, the completion after it)."""
    first = await provider.complete(chat("time?"), max_tokens=64, tools=tools)
    assert first.finish_reason == "tool_calls"
    (call,) = first.tool_calls
    assert (call.name, call.parsed_arguments()) == ("current_time", {"zone": "UTC"})
    history = [
        *chat("time?"),
        first.as_message(),
        {"role": "tool", "tool_call_id": call.id, "content": "12:00"},
    ]
    return call, await provider.complete(history, max_tokens=64, tools=tools)
