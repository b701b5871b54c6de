"""Benchmark: one gateway on SQLite, one replica on PostgreSQL, two replicas on
PostgreSQL — the same load, measured in the same run (docs/design.md#replicas).

    python bench/replicas.py [--chats 20] [--per-chat 15] [--latency-ms 50]

Each setup is ``nightowl run`` child processes as a user runs them (Telegram in webhook
mode; two replicas get the webhook POSTs in turn, as behind a load balancer), against the
fake Bot API and a fake OpenAI-compatible model in this process that answers after
``--latency-ms``. C private chats talk at once, each sending M messages one after
another (the next after the reply), so every message is one turn. Reported per setup:
turns per second, update-to-reply latency p50/p99, and the ratios the targets are
written in: PostgreSQL with one replica >= 0.7x SQLite's turns/s; two replicas >= 1.3x
one. Needs PostgreSQL (NIGHTOWL_TEST_POSTGRES, default postgresql://127.0.0.1:5432/postgres).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import (  # bench/support.py (the script's own folder)
    cpu_seconds,
    cpu_seconds_of,
    percentile,
)

from tests.child_process import Chat
from tests.e2e.replica_stack import (
    FIRST_USER,
    Balancer,
    Replica,
    free_port,
    replica_config,
    start_replica,
)
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.postgres import TestDatabase


def slow_model(latency: float):
    async def respond(request: Recorded) -> Reply:
        await asyncio.sleep(latency)  # the model's latency
        return Reply(text=f"echo: {request.last_user_text}")

    return respond


async def run_setup(
    name: str, replicas: int, dsn: str | None, chats: int, per_chat: int, latency: float
) -> dict[str, float]:
    telegram = FakeTelegram()
    await telegram.start()
    llm = FakeLLM(responder=slow_model(latency), record_limit=10)
    await llm.start()
    started: list[Replica] = []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        try:
            for index in range(replicas):
                port = free_port()
                config = replica_config(
                    root / f"r{index}", llm, telegram, dsn=dsn, port=port, users=chats
                )
                started.append(await start_replica(f"r{index}", config, port, root, Chat.start))
            latencies: list[float] = []
            async with Balancer(telegram, started) as balancer:

                async def one_chat(index: int) -> None:
                    user = FIRST_USER + index
                    for m in range(per_chat):
                        marker = f"c{index} m{m} "
                        sent = time.monotonic()
                        await balancer.say(user, marker + "how are you?")
                        await telegram.wait_for(
                            lambda marker=marker: any(marker in s.text for s in telegram.sent),
                            within=120,
                        )
                        latencies.append(time.monotonic() - sent)

                cpu_before = _cpu(started)
                began = time.monotonic()
                await asyncio.gather(*(one_chat(i) for i in range(chats)))
                wall = time.monotonic() - began
                cpu = {k: v - cpu_before[k] for k, v in _cpu(started).items()}
        finally:
            for replica in started:
                replica.chat.kill()
                await replica.chat.process.wait()
            await llm.stop()
            await telegram.stop()
    latencies.sort()
    result = {
        "turns_per_s": len(latencies) / wall,
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
    }
    cores = os.cpu_count() or 1
    busy = "  ".join(f"{k} {v / wall / cores:4.0%}" for k, v in cpu.items())
    print(
        f"{name:<24} {result['turns_per_s']:7.1f} turns/s   p50 {result['p50_ms']:6.0f} ms"
        f"   p99 {result['p99_ms']:6.0f} ms   CPU of {cores} cores: {busy}",
        flush=True,
    )
    return result


def _cpu(replicas: list[Replica]) -> dict[str, float]:
    """CPU seconds so far: the gateway replicas, PostgreSQL's processes, and this one
    (the fake Bot API, the fake model and the load). Every process named postgres
    counts: run it on a quiet machine."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "gateways": sum(cpu_seconds(r.chat.process.pid) for r in replicas),
        "postgres": cpu_seconds_of("postgres"),
        "fakes": me.ru_utime + me.ru_stime,
    }


async def main(chats: int, per_chat: int, latency: float) -> None:
    database = TestDatabase()
    await database.create()
    if database.error is not None:
        sys.exit(f"PostgreSQL is needed: {database.error}")
    try:
        print(
            f"{chats} chats x {per_chat} messages, model latency {latency * 1000:.0f} ms,"
            f" {os.cpu_count()} cores"
        )
        sqlite = await run_setup("sqlite, 1 process", 1, None, chats, per_chat, latency)
        one = await run_setup(
            "postgres, 1 replica", 1, await database.fresh_schema(), chats, per_chat, latency
        )
        two = await run_setup(
            "postgres, 2 replicas", 2, await database.fresh_schema(), chats, per_chat, latency
        )
    finally:
        await database.drop()
    print(
        f"postgres 1 replica / sqlite:  {one['turns_per_s'] / sqlite['turns_per_s']:.2f}x"
        " turns/s (target >= 0.7)"
    )
    print(
        f"postgres 2 replicas / 1:      {two['turns_per_s'] / one['turns_per_s']:.2f}x"
        " turns/s (target >= 1.3)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--per-chat", type=int, default=15)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    asyncio.run(main(args.chats, args.per_chat, args.latency_ms / 1000))
