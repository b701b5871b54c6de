"""An in-process gateway for tests: real store, real providers against the fake LLM, and
a recording adapter standing in for a chat platform."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from adapters.base import (
    Adapter,
    BotBlocked,
    ChatMoved,
    InboundMessage,
    InboundSink,
    OutboundMessage,
    PlatformTraits,
)
from adapters.console import ConsoleAdapter
from adapters.discord_adapter import DiscordAdapter
from adapters.telegram import TelegramAdapter
from gateway.app import Gateway
from gateway.config.schema import Config, parse_config
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.waiting import CEILING, Recording

#: What the real adapters declare of their platforms (docs/design.md#platform-traits).
TRAITS = {a.platform: a.traits for a in (ConsoleAdapter, DiscordAdapter, TelegramAdapter)}


class RecordingAdapter(Adapter):
    """A platform that records what the gateway sends and lets tests inject messages;
    it is what the real adapter of its name says its platform is, unless told ``traits``."""

    def __init__(self, platform: str = "console", traits: PlatformTraits | None = None) -> None:
        self.platform = platform
        self.traits = traits or TRAITS.get(platform, PlatformTraits())
        self.typing_spans: list[tuple[str, str]] = []  # ("start" | "stop", chat_id)
        self._sink: InboundSink | None = None
        self._outbox: Recording[OutboundMessage] = Recording()

    @property
    def sent(self) -> list[OutboundMessage]:
        """What the gateway sent through this platform, oldest first."""
        return self._outbox.items

    async def start(self, sink: InboundSink) -> None:
        self._sink = sink

    async def stop(self) -> None:
        self._sink = None

    async def send(self, message: OutboundMessage) -> list[str]:
        await self._outbox.add(message)
        return [str(len(self.sent))]

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str, thread_id: str | None = None) -> AsyncIterator[None]:
        self.typing_spans.append(("start", chat_id))
        try:
            yield
        finally:
            self.typing_spans.append(("stop", chat_id))

    async def say(self, text: str, *, chat_id: str = "t", **fields: Any) -> None:
        """Deliver ``text`` to the gateway as a message from this platform."""
        assert self._sink is not None, "adapter not started"
        fields.setdefault("user_id", "u1")
        fields.setdefault("chat_type", "console" if self.platform == "console" else "private")
        await self._sink(
            InboundMessage(platform=self.platform, chat_id=chat_id, text=text, **fields)
        )

    async def tell(self, event: ChatMoved | BotBlocked) -> None:
        """Deliver a chat event to the gateway, as this platform's adapter would."""
        assert self._sink is not None, "adapter not started"
        await self._sink(event)

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [m.text for m in self.sent if chat_id is None or m.chat_id == chat_id]

    async def wait_sent(self, count: int, within: float = CEILING) -> list[str]:
        """Wait until ``count`` messages were sent; returns the text of all sent so far."""
        await self._outbox.wait_for(count, within)
        return self.texts()


def make_config(
    data_dir: Path, llm: FakeLLM, *, environ: dict[str, str] | None = None, **sections: Any
) -> Config:
    """A config pointing the openai provider at the fake; ``sections`` merge into YAML;
    ``${VAR}`` is read from ``environ`` (none by default)."""
    raw: dict[str, Any] = {
        "data_dir": str(data_dir),
        "model": {"base_url": llm.openai_base_url, "name": "fake-model", "max_retries": 0},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    return parse_config(raw, environ or {})


@contextlib.asynccontextmanager
async def running_gateway(
    config: Config, *adapters: Adapter, **kwargs: Any
) -> AsyncIterator[Gateway]:
    gateway = Gateway(config, list(adapters) or [RecordingAdapter()], **kwargs)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop(drain_seconds=5)


class HeldAnswers:
    """A model that keeps back its answers to the ``matching`` requests until
    :meth:`release`: a turn the test holds in flight.

    Use :meth:`respond` as the fake LLM's responder (or inside one, e.g. ``summarizing``);
    :meth:`wait_held` returns once a matching request arrived."""

    def __init__(
        self,
        answer: Callable[[Recorded], Reply] = lambda request: Reply("ok"),
        matching: Callable[[Recorded], bool] = lambda request: True,
    ) -> None:
        self._answer = answer
        self._matching = matching
        self._held = asyncio.Event()
        self._released = asyncio.Event()

    async def respond(self, request: Recorded) -> Reply:
        if self._matching(request) and not self._released.is_set():
            self._held.set()
            await self._released.wait()
        return self._answer(request)

    async def wait_held(self, within: float = CEILING) -> None:
        await asyncio.wait_for(self._held.wait(), within)

    def release(self) -> None:
        self._released.set()


async def turns_done(gateway: Gateway, within: float = CEILING) -> None:
    """Wait until no turn is running: the gateway did all it was given so far."""
    assert await gateway.lanes.wait_idle(within), f"turns still running after {within}s"


def is_summary_request(request: Recorded) -> bool:
    system = request.messages[0] if request.messages else {}
    return str(system.get("content", "")).startswith("You are the summarization step")


def is_memory_flush(request: Recorded) -> bool:
    """The silent call before a compression that keeps facts (docs/design.md#memory-flush)."""
    system = request.messages[0] if request.messages else {}
    return str(system.get("content", "")).startswith("You are the memory step")


def is_turn_request(request: Recorded) -> bool:
    """A request of a turn: neither a summary nor a memory flush."""
    return not is_summary_request(request) and not is_memory_flush(request)


def memory_block(request: Recorded) -> str | None:
    """The memory block a turn's request carries after its system prompt, if any."""
    for message in request.messages:
        content = message.get("content")
        text = content if isinstance(content, str) else str(content)
        if message.get("role") == "system" and "[nightowl memory]" in text[:40]:
            return text
    return None


def conversation_of(request: Recorded) -> list[dict[str, Any]]:
    """A turn's request without its memory block: the stored conversation as sent."""
    block = memory_block(request)
    return [
        m
        for m in request.messages
        if not (m.get("role") == "system" and block is not None and block in str(m.get("content")))
    ]


FACT = re.compile(r"fact:[^\n\]<\"]*", re.IGNORECASE)


def summarizing(answer: Callable[[Recorded], Reply | Awaitable[Reply]] | None = None):
    """A fake-LLM responder: summary requests get a short summary keeping every
    ``fact: ...`` phrase they contain; other requests go to ``answer`` (default: "ok")."""

    async def respond(request: Recorded) -> Reply:
        if is_summary_request(request):
            facts = dict.fromkeys(m.strip() for m in FACT.findall(request.all_text))
            body = "\n".join(f"- {fact}" for fact in facts) or "- nothing notable"
            return Reply(f"## Goal\nChat.\n\n## Critical Context\n{body}")
        if answer is None:
            return Reply("ok")
        reply = answer(request)
        return await reply if inspect.isawaitable(reply) else reply

    return respond
