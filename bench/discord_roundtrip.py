"""Benchmark: Discord round trips against the fake Discord (gateway websocket + REST).

    python bench/discord_roundtrip.py [messages]

1. Adapter round trip: N DMs are dispatched as MESSAGE_CREATE; the sink answers each
   through ``adapter.send`` (no gateway, no model). Reported: latency from dispatch to
   the reply reaching the fake's REST API (p50/p95/max) and messages per second. This is
   the adapter's share of a user's wait: one gateway event in, one POST out.
2. Gateway round trip: the same through the real gateway (router, store, lane, turn
   runner, agent) with an OpenAI-compatible fake model that echoes instantly. The
   difference to (1) is the gateway's own cost per turn (SQLite writes, hygiene, prompt
   assembly); the model's time is zero here.
3. Split: a 10,000-character reply with a code fence, split for Discord (no network).

Targets on loopback: adapter p95 < 50 ms; gateway p95 < 150 ms; split < 10 ms.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.base import InboundMessage, OutboundMessage
from adapters.chunking import split_message
from adapters.discord_adapter import MESSAGE_LIMIT, DiscordAdapter, DiscordSettings
from tests.fakes.discord_server import FakeDiscord, running_fake_discord
from tests.fakes.discord_world import ALICE, DM_CHANNEL_ID
from tests.fakes.llm_server import FakeLLM

SETTINGS = DiscordSettings(token="bench-token", guild_ready_timeout=0.05, sync_commands=False)


async def measure(fake: FakeDiscord, count: int) -> tuple[list[float], float]:
    """Dispatch ``count`` DMs one at a time; latency (ms) until each reply was posted."""
    latencies = []
    started = time.perf_counter()
    for index in range(count):
        sent_before = len(fake.sent)
        dispatched_at = time.perf_counter()
        await fake.dispatch_message(DM_CHANNEL_ID, f"message {index}")
        await fake.wait_for_sent(sent_before + 1, seconds=10)
        latencies.append((time.perf_counter() - dispatched_at) * 1000)
    return latencies, time.perf_counter() - started


def report(title: str, latencies: list[float], elapsed: float) -> None:
    latencies = sorted(latencies)
    p95 = latencies[max(0, int(len(latencies) * 0.95) - 1)]
    print(f"{title}, {len(latencies)} messages: {len(latencies) / elapsed:.0f} msg/s")
    print(
        f"  latency ms: p50 {statistics.median(latencies):.1f}  p95 {p95:.1f}"
        f"  max {latencies[-1]:.1f}"
    )


async def adapter_round_trip(count: int) -> None:
    async with running_fake_discord() as fake:
        adapter = DiscordAdapter(SETTINGS)

        async def echo(message: InboundMessage) -> None:
            reply = OutboundMessage("discord", message.chat_id, f"echo: {message.text}")
            await adapter.send(reply)

        await adapter.start(echo)
        try:
            latencies, elapsed = await measure(fake, count)
        finally:
            await adapter.stop()
    report("adapter round trip", latencies, elapsed)


async def gateway_round_trip(count: int) -> None:
    from gateway.app import Gateway
    from gateway.config import parse_config

    async with running_fake_discord() as fake, FakeLLM() as llm:
        with tempfile.TemporaryDirectory() as data_dir:
            raw = {
                "data_dir": data_dir,
                "model": {"provider": "openai", "name": "fake-model", "api_key": "bench",
                          "base_url": llm.openai_base_url, "context_length": 32_000},
                "platforms": {"discord": {"enabled": True, "token": SETTINGS.token,
                                          "allowed_users": [ALICE["id"]]}},
            }  # fmt: skip
            config = parse_config(raw)
            gateway = Gateway(config, [DiscordAdapter(SETTINGS)])
            await gateway.start()
            try:
                latencies, elapsed = await measure(fake, count)
            finally:
                await gateway.stop(drain_seconds=5)
    report("gateway round trip", latencies, elapsed)


def split_timing() -> None:
    prose = "Here is the reasoning, step by step, with *emphasis* and `code`. " * 80
    code = "\n".join(f"    total_{i} = add(value_{i}, 1)" for i in range(150))
    text = f"{prose}\n\n```python\n{code}\n```\n\nDone."
    runs = 50
    started = time.perf_counter()
    for _ in range(runs):
        chunks = split_message(text, MESSAGE_LIMIT)
    per_run = (time.perf_counter() - started) / runs * 1000
    print(f"split {len(text):,} chars into {len(chunks)} messages: {per_run:.2f} ms")


async def run_part(name: str, part: Callable[[], Awaitable[None]]) -> None:
    try:
        await part()
    except Exception as error:  # one part failing (e.g. a WIP gateway) must not hide the others
        print(f"{name}: failed: {type(error).__name__}: {error}")


async def main(count: int) -> None:
    logging.basicConfig(level=logging.WARNING)
    await run_part("adapter round trip", lambda: adapter_round_trip(count))
    await run_part("gateway round trip", lambda: gateway_round_trip(count))
    split_timing()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 200))
