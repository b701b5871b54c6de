"""A big store: 100,000 stored sessions and a million archived rows, against an empty one.

    python bench/big_store.py [--sessions 100000] [--archived 10] [--turns 200]

The database is built in seconds through the store's own schema and connection
(``gateway/store/bulk.py: seed_conversations``, ``executemany`` in batches). Then the
real gateway (router, inbox, lanes, hygiene, agent; an instant in-process model, as in
bench/turn_overhead.py) starts on it in a fresh child process, and reported are: start
time, the turns' cost (median/p99: a turn in one of the stored sessions and in a new
chat), the periodic passes over all sessions (idle compression scan, delivery retry),
the process's CPU per turn and its RSS after start and at the end. The same on an empty
store beside it; ratios big/empty. Nothing here may grow with the store: target <= 1.2x
for start, turns and RSS (the archive is never read on the hot path). One thing does,
by design: the ``PRAGMA quick_check`` of the whole file that runs beside every start of
a SQLite store (a file damaged in its middle opens fine); it is timed on its own (about
a second of one core for 400 MB here), and the turns are measured after it.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


async def seed(data_dir: Path, sessions: int, archived: int) -> float:
    from gateway.store import SQLiteStore
    from gateway.store.bulk import seed_conversations

    started = time.perf_counter()
    async with SQLiteStore(data_dir / "state.db") as store:
        await seed_conversations(store.connection, sessions, archived, platform="console")
    return time.perf_counter() - started


async def _turns(gateway: Any, adapter: Any, chat: str, count: int) -> list[float]:
    from adapters.base import InboundMessage

    timings = []
    for i in range(count):
        adapter.replied.clear()
        started = time.perf_counter()
        message = InboundMessage(
            platform="console", chat_id=chat, user_id="u", text=f"message {i}", chat_type="console"
        )
        await adapter.sink(message)
        await adapter.replied.wait()
        await gateway.lanes.wait_idle()
        timings.append((time.perf_counter() - started) * 1000)
    return sorted(timings)


async def _measure(data_dir: str, turns: int) -> dict[str, float]:
    from rss import peak_rss_mb  # bench/rss.py
    from support import SignalAdapter  # bench/support.py
    from turn_overhead import InstantProvider  # bench/turn_overhead.py

    from gateway.app import Gateway
    from gateway.build import Providers
    from gateway.config.schema import parse_config
    from gateway.store.errors import damage_found

    config = parse_config(
        {"data_dir": data_dir, "model": {"name": "bench-model", "context_length": 1_000_000}}, {}
    )
    adapter = SignalAdapter()
    began = time.perf_counter()
    gateway = Gateway(config, [adapter], providers=Providers(InstantProvider()))
    await gateway.start()
    start_s = time.perf_counter() - began
    result: dict[str, float] = {"start s": start_s, "RSS after start MB": peak_rss_mb()}
    try:
        # The whole file's quick_check runs beside every start (gateway/app.py): it grows
        # with the store, by design. Timed on its own (once more, alone), the turns after it.
        await gateway.database_checked
        began, cpu = time.perf_counter(), time.process_time()
        await damage_found(config.database_path)
        result["integrity check beside the start s"] = time.perf_counter() - began
        result["integrity check CPU s"] = time.process_time() - cpu
        await _turns(gateway, adapter, "warmup", 20)
        cpu = time.process_time()
        stored = await _turns(gateway, adapter, "c5", turns)  # a stored session (big store)
        fresh = await _turns(gateway, adapter, "fresh", turns)  # a chat with no session yet
        cpu_ms = (time.process_time() - cpu) * 1000 / (2 * turns)
        result |= {
            "turn in a stored session: median ms": statistics.median(stored),
            "turn in a stored session: p99 ms": percentile(stored, 0.99),
            "turn in a new chat: median ms": statistics.median(fresh),
            "turn in a new chat: p99 ms": percentile(fresh, 0.99),
            "CPU ms per turn": cpu_ms,
        }
        began = time.perf_counter()
        await gateway.scheduler.idle.scan()
        result["idle compression scan ms"] = (time.perf_counter() - began) * 1000
        began = time.perf_counter()
        await gateway.scheduler.retry_deliveries()
        result["delivery retry pass ms"] = (time.perf_counter() - began) * 1000
    finally:
        await gateway.stop()
    result["peak RSS MB"] = peak_rss_mb()
    return result


def _child(data_dir: str, turns: int, report: Any) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    report.put(asyncio.run(_measure(data_dir, turns)))


def measure(data_dir: Path, turns: int) -> dict[str, float]:
    """One fresh process on ``data_dir``: its RSS is the gateway's alone."""
    context = multiprocessing.get_context("spawn")
    report = context.Queue()
    child = context.Process(target=_child, args=(str(data_dir), turns, report))
    child.start()
    result: dict[str, float] = report.get(timeout=600)
    child.join(60)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--archived", type=int, default=10, help="archived rows per session")
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        empty, big = Path(root, "empty"), Path(root, "big")
        empty.mkdir()
        big.mkdir()
        asyncio.run(seed(empty, 0, 0))
        seconds = asyncio.run(seed(big, args.sessions, args.archived))
        size = (big / "state.db").stat().st_size / 2**20
        rows = args.sessions * (args.archived + 1)
        print(
            f"seeded {args.sessions:,} sessions, {rows:,} rows "
            f"({args.sessions * args.archived:,} archived) in {seconds:.1f} s: {size:.0f} MB"
        )
        small = measure(empty, args.turns)
        large = measure(big, args.turns)
    print(f"{'':40} {'empty':>9} {'big':>9} {'ratio':>7}  target")
    for name, value in small.items():
        target = "" if any(k in name for k in ("scan", "retry", "integrity")) else "<= 1.2"
        ratio = f"{large[name] / value:6.2f}x" if value else "      -"
        print(f"{name:40} {value:9.2f} {large[name]:9.2f} {ratio}  {target}")


if __name__ == "__main__":
    main()
