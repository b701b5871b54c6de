"""Fixtures for adapter tests: a fake Telegram server and a recording sink."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from adapters.base import InboundMessage
from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.fakes.telegram_server import FakeTelegram


class RecordingSink:
    """The gateway's sink as tests need it: records messages, can block, fail or answer.

    ``gate``: when set to an Event, each call waits for it before returning (a slow store).
    ``fail_times``: the next N calls raise RuntimeError (a failing store).
    ``on_message``: awaited with each message after it is recorded (e.g. to echo a reply).
    """

    def __init__(self) -> None:
        self.received: list[InboundMessage] = []
        self.calls = 0
        self.gate: asyncio.Event | None = None
        self.fail_times = 0
        self.on_message: Callable[[InboundMessage], Awaitable[None]] | None = None
        self.entered = asyncio.Event()
        self._changed = asyncio.Condition()

    async def __call__(self, message: InboundMessage) -> None:
        self.calls += 1
        self.entered.set()
        if self.fail_times > 0:
            self.fail_times -= 1
            raise RuntimeError("store unavailable")
        if self.gate is not None:
            await self.gate.wait()
        self.received.append(message)
        async with self._changed:
            self._changed.notify_all()
        if self.on_message is not None:
            await self.on_message(message)

    async def wait_for(self, count: int, within: float = 3.0) -> list[InboundMessage]:
        """Wait until ``count`` messages arrived; returns all received so far."""
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: len(self.received) >= count), within
            )
        return self.received


def fast_settings(server: FakeTelegram, **overrides: Any) -> TelegramSettings:
    """Settings pointing at the fake, with intervals short enough for quick tests."""
    values: dict[str, Any] = {
        "token": server.token,
        "base_url": server.base_url,
        "base_file_url": server.base_file_url,
        "poll_timeout": 1.0,
        "health_timeout_seconds": 30.0,
        "retry_backoff": 0.01,
        "typing_interval": 0.05,
        "stream_edit_interval": 0.1,
        "stop_timeout": 2.0,
    }
    values.update(overrides)
    return TelegramSettings(**values)


@pytest.fixture
async def telegram_server() -> AsyncIterator[FakeTelegram]:
    server = FakeTelegram()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
def sink() -> RecordingSink:
    return RecordingSink()


@pytest.fixture
async def start_telegram(
    telegram_server: FakeTelegram, sink: RecordingSink
) -> AsyncIterator[Callable[..., Awaitable[TelegramAdapter]]]:
    """``await start_telegram(dedupe=None, **settings)`` -> a running adapter feeding ``sink``.

    Adapters started this way are stopped at teardown (stop() is idempotent).
    """
    adapters: list[TelegramAdapter] = []

    async def start(dedupe: Any = None, **overrides: Any) -> TelegramAdapter:
        adapter = TelegramAdapter(fast_settings(telegram_server, **overrides), dedupe=dedupe)
        await adapter.start(sink)
        adapters.append(adapter)
        return adapter

    yield start
    for adapter in adapters:
        await adapter.stop()
