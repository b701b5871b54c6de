"""A scripted summary model for the compressor's tests: a fake of the external LLM.

Each call takes the next step of its script: a string (the summary), a Completion (e.g.
``finish_reason="length"``), a ProviderError to raise, or :data:`HANG` (never answers,
so the compressor's own timeout has to end the call). With the script exhausted it
answers with :func:`keep_facts`: a summary that keeps every line of the request that
mentions a fact, which makes "a fact survives ten compressions" testable.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.compression.markers import PRUNED_TOOL_OUTPUT, text_of
from agent.providers.base import Completion, Provider, ProviderError, TextCallback, Usage

HANG = object()

FACT = re.compile(r"fact:[^\n\]<]*", re.IGNORECASE)


def keep_facts(messages: list[dict[str, Any]]) -> str:
    """A summary holding every ``fact: ...`` phrase the request mentions, in order."""
    request = "\n".join(text_of(m) for m in messages)
    facts = list(dict.fromkeys(match.strip() for match in FACT.findall(request)))
    body = "\n".join(f"- {fact}" for fact in facts) or "None"
    return f"## Goal\nKeep the conversation going.\n\n## Critical Context\n{body}"


@dataclass
class Call:
    messages: list[dict[str, Any]]
    max_tokens: int
    timeout: float | None

    @property
    def request_text(self) -> str:
        return "\n".join(text_of(m) for m in self.messages)


@dataclass
class ScriptedSummarizer(Provider):
    script: list[Any] = field(default_factory=list)
    responder: Callable[[list[dict[str, Any]]], str] = keep_facts
    name: str = "openai"
    model: str = "summarizer-1"
    base_url: str | None = None
    calls: list[Call] = field(default_factory=list)
    #: Set when a call starts, for tests that need to act while a summary is in flight.
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event | None = None

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        tools: list[dict[str, Any]] | None = None,
        on_text: TextCallback | None = None,
        cache_ttl: str | None = None,
        timeout: float | None = None,
    ) -> Completion:
        self.calls.append(Call(messages, max_tokens, timeout))
        self.started.set()
        if self.release is not None:
            await self.release.wait()
        step = self.script.pop(0) if self.script else None
        if step is HANG:
            await asyncio.Event().wait()
        if isinstance(step, ProviderError):
            raise step
        if isinstance(step, Completion):
            return step
        text = step if isinstance(step, str) else self.responder(messages)
        return Completion(text=text, usage=Usage(prompt_tokens=100, completion_tokens=50))


def pruned_placeholder_count(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("content") == PRUNED_TOOL_OUTPUT)


def conversation(
    exchanges: int, *, chars: int = 400, system: str = "You are nightowl."
) -> list[dict[str, Any]]:
    """A system prompt and ``exchanges`` user/assistant pairs of about ``chars`` each."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"question {i} " + "q" * chars})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * chars})
    return messages


def tool_round(call_id: str, output: str, *, name: str = "read_file") -> list[dict[str, Any]]:
    """An assistant tool call and its result."""
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": output},
    ]


class Clock:
    """Wall-clock seconds the test moves by hand (cooldowns are epoch based)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_engine(
    script: list[Any] | None = None,
    *,
    context_length: int = 128_000,
    clock: Clock | None = None,
    auxiliary: ScriptedSummarizer | None = None,
    **settings: Any,
):
    """A ContextCompressor whose main model is a :class:`ScriptedSummarizer`."""
    from agent.compression.settings import CompressionSettings
    from agent.context_compressor import ContextCompressor

    main = ScriptedSummarizer(script=list(script or []))
    engine = ContextCompressor(
        main=main,
        auxiliary=auxiliary,
        context_length=context_length,
        settings=CompressionSettings(**settings),
        clock=clock or Clock(),
        session_id="sess-1",
    )
    return engine, main
