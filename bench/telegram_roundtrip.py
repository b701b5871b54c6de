"""Benchmark: the Telegram adapter's own round trip against the fake Bot API server.

    python bench/telegram_roundtrip.py [messages]

1. Round trip: N private messages are pushed into the fake; the sink answers each one
   through ``adapter.send`` (no gateway, no model). Reported: latency from push to the
   reply reaching the fake (p50/p95/max) and messages per second. This is the adapter's
   share of a user's wait: one getUpdates long poll wake-up, one sendMessage.
2. Split + format: a 10,000-character Markdown reply with a code fence is split for
   Telegram and converted to HTML (no network).

Targets: p95 round trip < 50 ms on loopback; split + format of 10k chars < 20 ms.
The gateway's store and turn runner are not in this loop; a full gateway round trip
belongs in a gateway benchmark.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.base import InboundMessage, OutboundMessage
from adapters.telegram import TelegramAdapter, TelegramSettings
from adapters.telegram.delivery import Sender
from adapters.telegram.formatting import markdown_to_telegram_html
from tests.fakes.telegram_server import FakeTelegram


async def round_trip(count: int) -> None:
    server = FakeTelegram()
    await server.start()
    settings = TelegramSettings(
        token=server.token, base_url=server.base_url, base_file_url=server.base_file_url
    )
    adapter = TelegramAdapter(settings)

    async def echo(message: InboundMessage) -> None:
        reply = OutboundMessage("telegram", message.chat_id, f"**echo** {message.text}")
        await adapter.send(reply)

    await adapter.start(echo)
    latencies = []
    started = time.perf_counter()
    try:
        for index in range(count):
            pushed_at = time.perf_counter()
            server.push_text(1000 + index % 7, f"message {index}")
            await server.wait_sent(index + 1, within=5)
            latencies.append((time.perf_counter() - pushed_at) * 1000)
    finally:
        elapsed = time.perf_counter() - started
        await adapter.stop()
        await server.stop()
    latencies.sort()
    p95 = latencies[int(len(latencies) * 0.95) - 1]
    print(f"round trip, {count} messages: {count / elapsed:.0f} msg/s")
    print(
        f"  latency ms: p50 {statistics.median(latencies):.1f}  p95 {p95:.1f}"
        f"  max {latencies[-1]:.1f}"
    )


def split_and_format() -> None:
    prose = "Here is the reasoning, step by step, with *emphasis* and `code`. " * 80
    code = "\n".join(f"    total_{i} = add(value_{i}, 1)" for i in range(150))
    text = f"{prose}\n\n```python\n{code}\n```\n\nDone."
    settings = TelegramSettings(token="1:bench")
    sender = Sender(settings, bot=None, caller=None)  # type: ignore[arg-type]  # no sends
    runs = 50
    started = time.perf_counter()
    for _ in range(runs):
        chunks = sender.split(text)
        for chunk in chunks:
            markdown_to_telegram_html(chunk)
    per_run = (time.perf_counter() - started) / runs * 1000
    print(f"split + format {len(text):,} chars into {len(chunks)} messages: {per_run:.1f} ms")


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    asyncio.run(round_trip(count))
    split_and_format()


if __name__ == "__main__":
    main()
