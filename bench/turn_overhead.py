"""Per-turn overhead of the real turn runner, with a provider that answers instantly.

    python bench/turn_overhead.py [--turns 300]

(a) a fresh session; (b) a session with 50,000 archived rows and 200 active rows.
The archive must never be read on the hot path, so (b) should stay within ~1.2x of (a).
CPU per turn counts every thread (the event loop's and SQLite's). Wall and CPU times
move with whatever else the machine does; to compare two versions of the code, count
instructions instead: ``valgrind --tool=callgrind python bench/turn_overhead.py --turns
N`` for two values of N, the difference divided by the turns between them.
Everything is real (router, inbox, lane, SQLite store in WAL mode, hygiene, the agent
loop, the compressor's gates) except the LLM, which answers in-process with no I/O.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from support import SignalAdapter, percentile  # bench/support.py (the script's own folder)

from adapters.base import InboundMessage
from agent.providers.base import Completion, Provider, Usage
from gateway.app import Gateway
from gateway.build import Providers
from gateway.config.schema import parse_config
from gateway.store import CompressionCommit, NewMessage, SessionOrigin, SQLiteStore


class InstantProvider(Provider):
    name = "openai"
    model = "bench-model"
    base_url = None

    async def complete(self, messages: list[dict[str, Any]], **_: Any) -> Completion:
        # A plausible count without tokenizing: the bench measures the gateway, not this.
        return Completion(
            "Noted.", usage=Usage(prompt_tokens=60 * len(messages), completion_tokens=3)
        )


async def prepare_archive(data_dir: Path, archived: int, active: int) -> None:
    async with SQLiteStore(data_dir / "state.db") as store:
        origin = SessionOrigin("console:bench", "console", "bench")
        system = {"role": "system", "content": "You are a benchmark."}
        session = await store.conversation.start_session(
            origin, "bench-model", NewMessage(system, 6)
        )
        batch = [
            NewMessage(
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"old row {i} " + "x" * 200,
                },
                55,
            )
            for i in range(archived)
        ]
        await store.conversation.commit_turn(session.id, batch)
        keep = [NewMessage(system, 6)] + [
            NewMessage(
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"kept {i} " + "y" * 200,
                },
                55,
            )
            for i in range(active - 1)
        ]
        await store.conversation.archive_and_compress(session.id, CompressionCommit(keep))


#: CPU seconds of the last :func:`measure` (every thread of this process: the event loop
#: and SQLite's), for the CPU per turn the report prints beside the wall time.
cpu_used: list[float] = []


async def measure(data_dir: Path, turns: int) -> list[float]:
    config = parse_config(
        {"data_dir": str(data_dir), "model": {"name": "bench-model", "context_length": 1_000_000}},
        {},
    )
    adapter = SignalAdapter()
    gateway = Gateway(config, [adapter], providers=Providers(InstantProvider()))
    await gateway.start()
    await gateway.database_checked  # the file's quick_check beside the start: not a turn's
    timings = []
    cpu = time.process_time()
    try:
        for i in range(turns):
            adapter.replied.clear()
            started = time.perf_counter()
            await adapter.sink(
                InboundMessage(
                    platform="console",
                    chat_id="bench",
                    user_id="u",
                    text=f"message {i}",
                    chat_type="console",
                )
            )
            await adapter.replied.wait()
            await gateway.lanes.wait_idle()
            timings.append(time.perf_counter() - started)
    finally:
        cpu_used[:] = [time.process_time() - cpu]
        await gateway.stop()
    return timings


def report(label: str, timings: list[float]) -> float:
    ms = sorted(t * 1000 for t in timings)
    median = statistics.median(ms)
    p99 = percentile(ms, 0.99)
    cpu = cpu_used[0] / len(ms) * 1000
    print(
        f"{label:<40} median {median:5.2f} ms   p99 {p99:5.2f} ms   CPU {cpu:4.2f} ms/turn"
        f"   ({len(ms)} turns)"
    )
    return median


async def main(turns: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        fresh, big, small = Path(root, "a"), Path(root, "b"), Path(root, "c")
        await prepare_archive(big, archived=50_000, active=200)
        await prepare_archive(small, archived=0, active=200)
        await measure(Path(root, "warmup"), 20)  # imports, tokenizer, SQLite caches
        a = report("(a) fresh session", await measure(fresh, turns))
        b = report("(b) 50,000 archived + 200 active rows", await measure(big, turns))
        c = report("(c) no archive + 200 active rows", await measure(small, turns))
        print(f"ratio (b)/(a): {b / a:.2f}x   (target <= 1.2x; median target < 5 ms)")
        print(f"ratio (b)/(c): {b / c:.2f}x   (the archive alone; 1.0 means it is never read)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    asyncio.run(main(parser.parse_args().turns))
