"""Fixtures for adapter tests: a fake Telegram server and a recording sink."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.fakes.sink import RecordingSink
from tests.fakes.telegram_server import FakeTelegram


def fast_settings(server: FakeTelegram, **overrides: Any) -> TelegramSettings:
    """Settings pointing at the fake, with intervals short enough for quick tests."""
    values: dict[str, Any] = {
        "token": server.token,
        "base_url": server.base_url,
        "base_file_url": server.base_file_url,
        "poll_timeout": 1.0,
        "health_timeout_seconds": 30.0,
        "retry_backoff": 0.01,
        "typing_delay": 0.0,
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
