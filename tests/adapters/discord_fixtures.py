"""Shared pieces for the Discord adapter tests: a running adapter feeding the recording
sink (tests/fakes/sink.py), and a watch on the logs.

Each test module wraps these in its own small fixtures (importing fixtures across modules
trips the linter). Every test fails when discord.py or the adapter logged an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from adapters.base import InboundMessage, OutboundMessage
from adapters.discord_adapter import DiscordAdapter, DiscordSettings
from gateway.conversation.command_registry import MENU
from tests.fakes.discord_server import FakeDiscord, running_fake_discord
from tests.fakes.discord_world import FREE_CHANNEL_ID
from tests.fakes.sink import RecordingSink

TOKEN = "test-token-never-logged"


def echo_later(
    adapter: DiscordAdapter, replies: list[asyncio.Task[list[str]]]
) -> Callable[[InboundMessage], Awaitable[None]]:
    """An ``on_message`` for the sink that answers addressed messages like the gateway
    does: store, return, and answer later from another task (collected in ``replies``)."""

    async def echo(message: InboundMessage) -> None:
        if message.addressed:
            reply = OutboundMessage(
                platform="discord",
                chat_id=message.chat_id,
                text=f"echo: {message.text}",
                reply_to_message_id=message.platform_message_id,
            )
            replies.append(asyncio.create_task(adapter.send(reply)))

    return echo


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
    """Test settings: fast READY, one free-response channel, the gateway's commands."""
    values: dict[str, Any] = {
        "token": TOKEN,
        "slash_commands": MENU,
        "guild_ready_timeout": 0.05,
        "ready_timeout": 5.0,
        "free_response_channels": (str(FREE_CHANNEL_ID),),
    }
    values.update(overrides)
    return DiscordSettings(**values)


@contextlib.asynccontextmanager
async def watching_logs(*names: str) -> AsyncIterator[LogCapture]:
    """Capture every record of the ``names`` loggers (default: discord.py and the
    adapters); on a clean exit, fail on any logged error and on the token in any record."""
    capture = LogCapture()
    loggers = [logging.getLogger(name) for name in names or ("discord", "adapters")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(capture)
        logger.setLevel(logging.DEBUG)
    try:
        yield capture
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(capture)
            logger.setLevel(level)
    capture.check()


@contextlib.asynccontextmanager
async def running_adapter(
    fake: FakeDiscord, *, echo: bool = True, **overrides: Any
) -> AsyncIterator[tuple[DiscordAdapter, RecordingSink]]:
    """A started adapter against ``fake``; fails the test on any logged error."""
    async with watching_logs():
        adapter = DiscordAdapter(settings(**overrides))
        sink = RecordingSink()
        replies: list[asyncio.Task[list[str]]] = []
        if echo:
            sink.on_message = echo_later(adapter, replies)
        try:
            await adapter.start(sink)
            yield adapter, sink
            await asyncio.gather(*replies)
        finally:
            await adapter.stop()


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
