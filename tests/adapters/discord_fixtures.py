"""Shared pieces for the Discord adapter tests: a recording sink and a running adapter.

Each test module wraps these in its own small fixtures (importing fixtures across modules
trips the linter). Every test fails when discord.py or the adapter logged an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from adapters.base import InboundMessage, OutboundMessage
from adapters.discord_adapter import DiscordAdapter, DiscordSettings
from tests.fakes.discord_server import FakeDiscord, running_fake_discord
from tests.fakes.discord_world import FREE_CHANNEL_ID

TOKEN = "test-token-never-logged"


class RecordingSink:
    """The gateway's stand-in: records every InboundMessage; can echo addressed ones."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []
        self.adapter: DiscordAdapter | None = None
        self.echo = False
        self.replies: list[asyncio.Task[list[str]]] = []
        self._changed = asyncio.Condition()

    async def __call__(self, message: InboundMessage) -> None:
        async with self._changed:
            self.messages.append(message)
            self._changed.notify_all()
        if self.echo and message.addressed and self.adapter is not None:
            # Like the gateway: store, return, answer later from another task.
            reply = OutboundMessage(
                platform="discord",
                chat_id=message.chat_id,
                text=f"echo: {message.text}",
                reply_to_message_id=message.platform_message_id,
            )
            self.replies.append(asyncio.create_task(self.adapter.send(reply)))

    async def wait_for(self, count: int, seconds: float = 5.0) -> list[InboundMessage]:
        """Wait until ``count`` messages arrived; returns all of them."""

        async def _wait() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.messages) >= count)

        await asyncio.wait_for(_wait(), seconds)
        return list(self.messages)


class LogCapture(logging.Handler):
    """Collects every record of discord.py and the adapter (handler errors are only logged)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def check(self) -> None:
        """Fail on any logged error, and on the token appearing anywhere in the log."""
        errors = [r.getMessage() for r in self.records if r.levelno >= logging.ERROR]
        assert not errors, errors
        assert not any(TOKEN in self.format(r) for r in self.records), "token was logged"


def settings(**overrides: Any) -> DiscordSettings:
    """Test settings: fast READY, one free-response channel."""
    values: dict[str, Any] = {
        "token": TOKEN,
        "guild_ready_timeout": 0.05,
        "ready_timeout": 5.0,
        "free_response_channels": (str(FREE_CHANNEL_ID),),
    }
    values.update(overrides)
    return DiscordSettings(**values)


@contextlib.asynccontextmanager
async def running_adapter(
    fake: FakeDiscord, *, echo: bool = True, **overrides: Any
) -> AsyncIterator[tuple[DiscordAdapter, RecordingSink]]:
    """A started adapter against ``fake``; fails the test on any logged error."""
    capture = LogCapture()
    loggers = [logging.getLogger("discord"), logging.getLogger("adapters")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(capture)
        logger.setLevel(logging.DEBUG)
    adapter = DiscordAdapter(settings(**overrides))
    sink = RecordingSink()
    sink.adapter, sink.echo = adapter, echo
    try:
        await adapter.start(sink)
        yield adapter, sink
        await asyncio.gather(*sink.replies)
    finally:
        await adapter.stop()
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(capture)
            logger.setLevel(level)
    capture.check()


@contextlib.asynccontextmanager
async def fake_and_adapter(
    **overrides: Any,
) -> AsyncIterator[tuple[FakeDiscord, DiscordAdapter, RecordingSink]]:
    """The fake Discord plus an adapter connected to it."""
    async with (
        running_fake_discord() as fake,
        running_adapter(fake, **overrides) as (adapter, sink),
    ):
        yield fake, adapter, sink
