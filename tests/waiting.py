"""How tests wait: on a condition, never on the clock.

A test waits for something that must happen (a reply sent, a request received, a child
process ready) until ``CEILING`` at most. The ceiling only bounds a hang: a healthy run
finishes far sooner, so a loaded machine makes a passing test slower, never a failure.
A test that shows something does *not* wait out a bound (a shutdown timeout, a long poll)
sets that bound well above ``CEILING``.
"""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

CEILING = 30.0

T = TypeVar("T")


class Recording(Generic[T]):
    """What arrived so far, oldest first; a test waits until as many as it expects did."""

    def __init__(self) -> None:
        self.items: list[T] = []
        self._changed = asyncio.Condition()

    async def add(self, item: T) -> None:
        async with self._changed:
            self.items.append(item)
            self._changed.notify_all()

    async def wait_for(self, count: int, within: float = CEILING) -> list[T]:
        """Wait until ``count`` items arrived; returns a copy of all of them so far.

        Raises TimeoutError when fewer arrived within ``within`` seconds."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.items) >= count)
        return list(self.items)
