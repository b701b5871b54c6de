"""Benchmark: Discord round trips against the fake Discord (gateway websocket + REST).

    python bench/discord_roundtrip.py [--mode adapter|gateway|all] [--messages N]
                                      [--channels C] [--per-channel M]

1. Adapter round trip (``adapter``): N DMs are dispatched as MESSAGE_CREATE; the sink
   answers each through ``adapter.send`` (no gateway, no model). Reported: latency from
   dispatch to the reply reaching the fake's REST API (p50/p95/max), messages per second.
   This is the adapter's share of a user's wait: one gateway event in, one POST out.
2. Gateway round trip (``gateway``): the real gateway as ``nightowl run`` builds it
   (config -> gateway.platforms.discord_adapter, SQLite store, router, lanes, turn runner,
   agent) in a child process, against the fake Discord and an instant OpenAI-compatible
   fake model in this process. C guild channels talk at once; in each, M messages that
   @mention the bot follow one another (the next after the reply, as people do).
   Reported: MESSAGE_CREATE -> reply POST latency median/p99/max, turns per second, and
   the gateway process's CPU seconds and peak RSS (``resource.getrusage`` and bench/rss.py in the child,
   so the fakes and this driver are not counted).
3. Split: a 10,000-character reply with a code fence, split for Discord (no network).

Measured on loopback, 2 cores: adapter p95 ~1 ms; gateway 20 x 50: median ~120 ms, p99
~230 ms, ~155 turns/s, ~5 ms CPU per turn, peak RSS ~86 MB; split of 10k chars ~1 ms. With
20 conversations at once the gateway keeps about one core busy, so the latency is mostly
queueing (channels / turns per second); most of its CPU per turn goes to the openai SDK
building and parsing requests, not to nightowl's own code.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rss import peak_rss_mb  # bench/rss.py (the script's own folder)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import percentile  # bench/support.py (the script's own folder)

from adapters.base import InboundMessage, OutboundMessage
from adapters.chunking import split_message
from adapters.discord_adapter import MESSAGE_LIMIT, DiscordAdapter, DiscordSettings
from tests.fakes.discord_server import FakeDiscord, running_fake_discord
from tests.fakes.discord_world import ALICE, BOT_ID, DM_CHANNEL_ID, GUILD_ID, GUILD_OF
from tests.fakes.llm_server import FakeLLM

TOKEN = "bench-token"
FIRST_CHANNEL = 3_100_000_000_000_001


# -- 1. adapter alone -------------------------------------------------------------------


async def adapter_round_trip(count: int) -> None:
    settings = DiscordSettings(token=TOKEN, guild_ready_timeout=0.05, sync_commands=False)
    async with running_fake_discord() as fake:
        adapter = DiscordAdapter(settings)

        async def echo(message: InboundMessage) -> None:
            reply = OutboundMessage("discord", message.chat_id, f"echo: {message.text}")
            await adapter.send(reply)

        await adapter.start(echo)
        latencies = []
        started = time.perf_counter()
        try:
            for index in range(count):
                dispatched_at = time.perf_counter()
                await fake.dispatch_message(DM_CHANNEL_ID, f"message {index}")
                await fake.wait_for_sent(index + 1, seconds=10)
                latencies.append((time.perf_counter() - dispatched_at) * 1000)
        finally:
            elapsed = time.perf_counter() - started
            await adapter.stop()
    latencies.sort()
    print(f"adapter round trip, {count} messages: {count / elapsed:.0f} msg/s")
    print(
        f"  latency ms: p50 {statistics.median(latencies):.1f}  "
        f"p95 {percentile(latencies, 0.95):.1f}  max {latencies[-1]:.1f}"
    )


# -- 2. through the gateway -------------------------------------------------------------


def serve_gateway(raw_config: dict[str, Any], fake_port: int, ready: Any, stop: Any, report: Any):
    """Child process: the gateway as ``nightowl run`` builds it, until ``stop`` is set."""
    import discord.gateway
    import discord.http
    import yarl

    # The same redirect tests.fakes.discord_server applies, in this process.
    discord.http.Route.BASE = f"http://127.0.0.1:{fake_port}/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(
        f"ws://127.0.0.1:{fake_port}/gateway"
    )
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(_serve_gateway(raw_config, ready, stop, report))


async def _serve_gateway(raw_config: dict[str, Any], ready: Any, stop: Any, report: Any) -> None:
    from gateway.app import Gateway
    from gateway.build import discord_adapter
    from gateway.config.schema import parse_config

    config = parse_config(raw_config, {})
    gateway = Gateway(config, [discord_adapter(config)])
    await gateway.start()
    at_start, rss_at_start = resource.getrusage(resource.RUSAGE_SELF), peak_rss_mb()
    ready.set()
    try:
        await asyncio.get_running_loop().run_in_executor(None, stop.wait)
    finally:
        await gateway.stop(drain_seconds=5)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu = usage.ru_utime + usage.ru_stime
        start_cpu = at_start.ru_utime + at_start.ru_stime
        # A plain tuple: the child's classes live in __mp_main__, which the parent lacks.
        report.put((cpu - start_cpu, start_cpu, peak_rss_mb(), rss_at_start))


class ReplyClock:
    """When each user message got its reply, indexed incrementally so many waiters stay
    cheap (the fake re-checks every waiter on every REST call it records)."""

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake
        self.seen = 0
        self.answered_at: dict[int, float] = {}

    def answered(self, message_id: int) -> bool:
        now = time.perf_counter()
        for sent in self.fake.sent[self.seen :]:
            reference = sent.payload.get("message_reference")
            if reference:
                self.answered_at.setdefault(int(reference["message_id"]), now)
        self.seen = len(self.fake.sent)
        return message_id in self.answered_at


async def one_channel(fake: FakeDiscord, clock: ReplyClock, channel_id: int, count: int):
    latencies = []
    for index in range(count):
        dispatched_at = time.perf_counter()
        data = await fake.dispatch_message(channel_id, f"<@{BOT_ID}> message {index}")
        message_id = int(data["id"])
        await fake.wait_until(lambda mid=message_id: clock.answered(mid), seconds=30)
        latencies.append((clock.answered_at[message_id] - dispatched_at) * 1000)
    return latencies


async def create_channels(fake: FakeDiscord, ids: list[int]) -> None:
    """CHANNEL_CREATE for text channels in the guild, as when a moderator adds them."""
    for n, channel_id in enumerate(ids):
        GUILD_OF[channel_id] = GUILD_ID  # the fake world's messages there carry the guild
        await fake.dispatch("CHANNEL_CREATE", {
            "id": str(channel_id), "type": 0, "guild_id": str(GUILD_ID), "name": f"room-{n}",
            "position": n + 2, "permission_overwrites": [], "nsfw": False,
        })  # fmt: skip


async def gateway_round_trip(channels: int, per_channel: int) -> None:
    context = multiprocessing.get_context("spawn")
    ready, stop, report = context.Event(), context.Event(), context.Queue()
    channel_ids = [FIRST_CHANNEL + n for n in range(channels)]
    async with running_fake_discord() as fake, FakeLLM(record_limit=10) as llm:
        with tempfile.TemporaryDirectory() as data_dir:
            raw = {
                "data_dir": data_dir,
                "model": {"base_url": llm.openai_base_url, "name": "fake-model",
                          "api_key": "bench", "max_retries": 0},
                "platforms": {"discord": {"enabled": True, "token": TOKEN,
                                          "allowed_channels": channel_ids,
                                          "allowed_users": [ALICE["id"]]}},
            }  # fmt: skip
            child = context.Process(
                target=serve_gateway, args=(raw, fake.port, ready, stop, report)
            )
            child.start()
            try:
                if not await asyncio.to_thread(ready.wait, 60):
                    raise TimeoutError("the gateway did not start within 60 s")
                await create_channels(fake, channel_ids)
                clock = ReplyClock(fake)
                started = time.perf_counter()
                results = await asyncio.gather(
                    *(one_channel(fake, clock, cid, per_channel) for cid in channel_ids)
                )
                elapsed = time.perf_counter() - started
            finally:
                stop.set()
                cpu_seconds, start_cpu, peak_mb, after_start_mb = await asyncio.to_thread(
                    report.get, True, 30
                )
                await asyncio.to_thread(child.join, 30)
    latencies = sorted(value for channel in results for value in channel)
    turns = llm.request_count
    print(f"gateway round trip, {channels} channels x {per_channel} messages ({turns} turns):")
    print(
        f"  MESSAGE_CREATE -> reply ms: median {statistics.median(latencies):.1f}  "
        f"p99 {percentile(latencies, 0.99):.1f}  max {latencies[-1]:.1f}"
    )
    print(f"  {turns / elapsed:.0f} turns/s over {elapsed:.1f} s")
    print(
        f"  gateway process: {cpu_seconds:.2f} CPU s after start ({cpu_seconds / turns * 1000:.1f}"
        f" ms/turn; start-up {start_cpu:.2f} s), peak RSS {peak_mb:.0f} MB"
        f" ({after_start_mb:.0f} MB after start)"
    )


# -- 3. split ---------------------------------------------------------------------------


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("adapter", "gateway", "all"), default="all")
    parser.add_argument("--messages", type=int, default=200, help="adapter round trips")
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--per-channel", type=int, default=50)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.mode in ("adapter", "all"):
        asyncio.run(adapter_round_trip(args.messages))
    if args.mode in ("gateway", "all"):
        asyncio.run(gateway_round_trip(args.channels, args.per_channel))
    if args.mode in ("adapter", "all"):
        split_timing()


if __name__ == "__main__":
    main()
