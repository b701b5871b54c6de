"""What the benchmarks share: a platform that only signals replies, and percentiles."""

from __future__ import annotations

import asyncio

from adapters.base import Adapter, InboundSink, OutboundMessage


class SignalAdapter(Adapter):
    """A platform with no I/O: ``replied`` is set when the gateway sends anything."""

    def __init__(self, platform: str = "console") -> None:
        self.platform = platform
        self.replied = asyncio.Event()

    async def start(self, sink: InboundSink) -> None:
        self.sink = sink

    async def stop(self) -> None:
        pass

    async def send(self, message: OutboundMessage) -> list[str]:
        self.replied.set()
        return []


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value at ``fraction`` (0.99 for p99) of an already sorted list."""
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]
