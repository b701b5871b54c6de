"""How long the budget check's read takes on a busy month (docs/cost.md#how-budgets-are-enforced).

    python bench/budget_check.py [--rows 40000 400000] [--repeat 50]

For each size, a month of ``--rows`` model calls (200 chats, 500 people) is written to a
fresh SQLite state.db, then the read before every model call is timed: "before", the
single query of migration 12 (every row of the month through ``costs_at``), run on the
same file; "after", ``CostStore.spent`` as it is now (the person's and the chat's day
through covering indexes, the month from ``cost_days``, migration 13). Numbers only.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.store import SQLiteStore
from gateway.store.costs import day_start, month_start

NOW = datetime(2026, 12, 30, 12, 0, tzinfo=UTC).timestamp()
#: The check of migration 12, as it was.
BEFORE = (
    "SELECT"
    " COALESCE(SUM(CASE WHEN person = :person AND at >= :day THEN cost_pusd END), 0),"
    " COALESCE(SUM(CASE WHEN session_key = :chat AND at >= :day THEN cost_pusd END), 0),"
    " COALESCE(SUM(cost_pusd), 0)"
    " FROM costs WHERE at >= :month"
)


def fill(path: Path, rows: int) -> None:
    """A month of calls up to NOW, written in one go (and summed by day as
    ``CostStore.record`` keeps them)."""
    start = month_start(NOW)
    step = (NOW - start) / rows
    pick = random.Random(7)
    calls = [
        (
            start + i * step,
            f"telegram:{pick.randrange(200)}",
            f"telegram:{pick.randrange(500)}",
            "chat",
            "gpt-4o-mini",
            1000,
            100,
            512,
            0,
            pick.randrange(10**9),
        )
        for i in range(rows)
    ]
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO costs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", calls)
        db.execute(
            "INSERT INTO cost_days(day, cost_pusd) SELECT CAST(at / 86400 AS INTEGER) * 86400,"
            " SUM(cost_pusd) FROM costs GROUP BY 1"
        )
        db.execute("ANALYZE")


def before(path: Path, repeat: int) -> float:
    params = {
        "person": "telegram:1",
        "chat": "telegram:1",
        "day": day_start(NOW),
        "month": month_start(NOW),
    }
    with sqlite3.connect(path) as db:
        db.execute(BEFORE, params).fetchall()
        started = time.perf_counter()
        for _ in range(repeat):
            db.execute(BEFORE, params).fetchall()
    return (time.perf_counter() - started) / repeat


async def after(path: Path, repeat: int) -> float:
    async with SQLiteStore(path) as store:
        await store.costs.spent("telegram:1", "telegram:1", NOW)
        started = time.perf_counter()
        for _ in range(repeat):
            await store.costs.spent("telegram:1", "telegram:1", NOW)
    return (time.perf_counter() - started) / repeat


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[40_000, 400_000])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    print(f"{'calls a month':>14} {'before':>10} {'after':>10}")
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / "state.db"
            async with SQLiteStore(path):  # the schema, every migration
                pass
            fill(path, rows)
            old = before(path, args.repeat)
            new = await after(path, args.repeat)
        print(f"{rows:>14,} {old * 1000:>8.2f}ms {new * 1000:>8.2f}ms")


if __name__ == "__main__":
    asyncio.run(main())
