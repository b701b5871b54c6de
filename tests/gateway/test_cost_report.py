"""What /usage and /status say of costs (gateway/cost/report.py, docs/cost.md#what-people-see):
a call with no price is never $0, and the sentences read as sentences."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from agent.cost.budget import Budgets
from gateway.cost.report import today_line, usage_lines
from gateway.store import CostRecord, SQLiteStore

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC).timestamp()
CHAT = "telegram:-1001"


def call(cost: str | None, person: str = "telegram:42") -> CostRecord:
    price = None if cost is None else Decimal(cost)
    return CostRecord(NOW - 60, CHAT, person, "chat", "m", 1000, 10, 0, 0, price)


async def said_of(tmp_path: Path, *calls: CostRecord) -> tuple[list[str], str]:
    async with SQLiteStore(tmp_path / "state.db") as store:
        for record in calls:
            await store.costs.record(record)
        usage = await usage_lines(
            store.costs,
            CHAT,
            "telegram",
            "42",
            group=True,
            conversation_since=NOW - 3600,
            budgets=Budgets(),
            now=NOW,
        )
        return usage, await today_line(store.costs, CHAT, now=NOW)


async def test_calls_with_no_price_only_are_said_in_words_never_as_dollars(
    tmp_path: Path,
) -> None:
    usage, status = await said_of(tmp_path, call(None), call(None))
    assert usage == [
        "Cost of this conversation: unknown — 2 model calls (replies, summaries, memory notes)"
        " with no price",
        "This chat: 2 unpriced calls today · 2 unpriced calls this month (UTC)",
        "Your share: 2 unpriced calls today · 2 unpriced calls this month",
    ]
    assert status == "Spent today in this chat: unknown (2 unpriced calls)"


async def test_a_sum_with_some_unpriced_calls_is_at_least_its_dollars(tmp_path: Path) -> None:
    usage, status = await said_of(tmp_path, call("0.45"), call(None, person="telegram:7"))
    assert usage[0] == (
        "Cost of this conversation: at least $0.45 over 2 model calls"
        " (replies, summaries, memory notes); 1 has no price"
    )
    assert usage[1] == (
        "This chat: $0.45 + 1 unpriced call today · $0.45 + 1 unpriced call this month (UTC)"
    )
    assert usage[2] == "Your share: $0.45 today · $0.45 this month"
    assert status == "Spent today: $0.45 + 1 unpriced call in this chat"
