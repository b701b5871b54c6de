"""The gateway's inbound sink as adapter tests need it: it records what an adapter hands
over, and can be slow, fail, or answer (like the gateway storing a message and replying)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from adapters.base import InboundMessage
from tests.waiting import CEILING, Recording


class RecordingSink:
    """An ``InboundSink`` that records every message it accepts, in order.

    ``gate``: when set to an Event, each call waits for it before accepting (a slow store).
    ``fail_times``: the next N calls raise RuntimeError (a failing store).
    ``on_message``: awaited with each message after it is recorded (e.g. to echo a reply).
    ``before``: awaited with each message before it is recorded (e.g. reading its images,
    as the gateway does before it stores a message).
    """

    def __init__(self) -> None:
        self.calls = 0
        self.entered = asyncio.Event()
        self.gate: asyncio.Event | None = None
        self.fail_times = 0
        self.on_message: Callable[[InboundMessage], Awaitable[None]] | None = None
        self.before: Callable[[InboundMessage], Awaitable[None]] | None = None
        self._accepted: Recording[InboundMessage] = Recording()

    @property
    def received(self) -> list[InboundMessage]:
        """The messages accepted so far, oldest first."""
        return self._accepted.items

    async def __call__(self, message: InboundMessage) -> None:
        self.calls += 1
        self.entered.set()
        if self.fail_times > 0:
            self.fail_times -= 1
            raise RuntimeError("store unavailable")
        if self.gate is not None:
            await self.gate.wait()
        if self.before is not None:
            await self.before(message)
        await self._accepted.add(message)
        if self.on_message is not None:
            await self.on_message(message)

    async def wait_for(self, count: int, within: float = CEILING) -> list[InboundMessage]:
        """Wait until ``count`` messages were accepted; returns all accepted so far."""
        return await self._accepted.wait_for(count, within)
