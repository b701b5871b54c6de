"""What model calls cost, in the store, on both backends (docs/cost.md#what-is-stored)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg

from agent.cost.budget import Spent
from gateway.store import CostHold, CostRecord, NewMessage, SessionOrigin, SQLiteStore
from gateway.store.postgres import PostgresStore
from tests import db

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC).timestamp()
YESTERDAY = datetime(2026, 12, 5, 23, 59, tzinfo=UTC).timestamp()
LAST_MONTH = datetime(2026, 11, 30, 23, 0, tzinfo=UTC).timestamp()


def call(
    at: float, chat: str, person: str | None, cost: str | None, kind: str = "chat"
) -> CostRecord:
    return CostRecord(
        at,
        chat,
        person,
        kind,
        "gpt-4o-mini",
        1000,
        10,
        512,
        0,
        None if cost is None else Decimal(cost),
    )


async def test_spent_sums_exact_costs_per_person_chat_day_and_month(backend_store: Any) -> None:
    costs = backend_store.costs
    # A cost below a microdollar stays exact: 1 cached token of gpt-4o-mini.
    await costs.record(call(NOW, "tg:1", "tg:ann", "0.000000075"))
    await costs.record(call(NOW, "tg:1", "tg:ann", "0.0123456789"))
    await costs.record(call(NOW, "tg:1", None, "0.5", kind="summary"))  # housekeeping
    await costs.record(call(NOW, "tg:1", "tg:bob", "0.25"))
    await costs.record(call(NOW, "tg:2", "tg:ann", None))  # unknown price: counts nothing
    await costs.record(call(YESTERDAY, "tg:1", "tg:ann", "1"))
    await costs.record(call(LAST_MONTH, "tg:1", "tg:ann", "100"))

    spent = await costs.spent("tg:ann", "tg:1", NOW)
    assert spent.user_today == Decimal("0.012345753900")  # 0.000000075 + 0.0123456789
    assert spent.chat_today == Decimal("0.762345753900")
    assert spent.month == Decimal("1.762345753900")
    assert (await costs.spent("tg:carl", "tg:3", NOW)).user_today == 0

    by_person = await costs.totals("person", LAST_MONTH - 1, NOW + 1)
    assert [(line.group, line.cost, line.unpriced) for line in by_person] == [
        ("tg:ann", Decimal("101.012345753900"), 1),
        ("(housekeeping)", Decimal("0.5"), 0),
        ("tg:bob", Decimal("0.25"), 0),
    ]
    days = await costs.totals("day", LAST_MONTH - 1, NOW + 1, chat="tg:1")
    assert [line.group for line in days] == ["2026-11-30", "2026-12-05", "2026-12-06"]
    assert days[-1].calls == 4 and days[-1].cache_read_tokens == 4 * 512


async def test_a_refused_message_is_kept_but_never_active(backend_store: Any) -> None:
    chats = backend_store.conversation
    origin = SessionOrigin("console:t", "console", "t")
    session = await chats.start_session(
        origin, "m", NewMessage({"role": "system", "content": "s"}, 1)
    )
    ids = await backend_store.costs.keep_refused(
        session.id, [NewMessage({"role": "user", "content": "a very long paste"}, 5)], []
    )
    assert len(ids) == 1
    active = await chats.load_active(session.id)
    assert [m.message["content"] for m in active] == ["s"]
    assert await chats.search(session.id, "paste") == []
    exported = await backend_store.operator.export_rows("console:t")
    assert any(row.message.get("content") == "a very long paste" for _, row in exported)


async def test_a_hold_counts_as_spent_until_let_go_or_expired(backend_store: Any) -> None:
    """docs/cost.md#calls-side-by-side: what the budget check sees while calls run."""
    costs = backend_store.costs
    await costs.record(call(NOW, "tg:1", "tg:ann", "0.10"))

    def hold(name: str, at: float, amount: str, until: float = NOW + 900) -> CostHold:
        return CostHold(name, at, "tg:1", "tg:ann", Decimal(amount), until)

    seen: list[Spent] = []
    assert await costs.hold(hold("a", NOW, "0.30"), lambda spent: not seen.append(spent))
    assert seen == [Spent(Decimal("0.10"), Decimal("0.10"), Decimal("0.10"))]  # before it
    # Refused: nothing kept. A hold of yesterday counts to the month only, a dead
    # process's long expired one to nothing.
    assert not await costs.hold(hold("no", NOW, "5"), lambda spent: False)
    assert await costs.hold(hold("old", YESTERDAY, "0.02"), lambda spent: True)
    assert await costs.hold(hold("dead", NOW - 1000, "7", until=NOW - 100), lambda spent: True)
    await costs.record(call(NOW, "tg:2", "tg:bob", "0.05"))
    assert await costs.spent("tg:ann", "tg:1", NOW) == Spent(
        Decimal("0.40"), Decimal("0.40"), Decimal("0.47")
    )
    await costs.release("a")
    assert await costs.spent("tg:ann", "tg:1", NOW) == Spent(
        Decimal("0.10"), Decimal("0.10"), Decimal("0.17")
    )
    await costs.drop_holds()
    assert (await costs.spent("tg:ann", "tg:1", NOW)).month == Decimal("0.15")


async def test_checks_at_once_on_two_replicas_never_both_take_the_last_of_a_budget(
    postgres_dsn: str,
) -> None:
    """Forty checks at once, half on each of two stores of one PostgreSQL database, each
    holding $0.30 against $1: exactly three are allowed (the advisory lock makes each
    check see every hold before it; without it, a dozen were)."""
    limit = Decimal(1)

    def admits(spent: Spent) -> bool:
        return spent.month + Decimal("0.30") <= limit

    async with PostgresStore(postgres_dsn) as one, PostgresStore(postgres_dsn) as two:
        holds = [
            CostHold(f"h{n}", NOW, "tg:1", "tg:ann", Decimal("0.30"), NOW + 900) for n in range(40)
        ]
        allowed = await asyncio.gather(
            *((one if n % 2 else two).costs.hold(h, admits) for n, h in enumerate(holds))
        )
        spent = await one.costs.spent("tg:ann", "tg:1", NOW)
    assert allowed.count(True) == 3
    assert spent.month == Decimal("0.90")


async def test_migration_13_sums_the_days_already_stored(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "state.db") as store:
        await store.costs.record(call(LAST_MONTH, "tg:1", "tg:ann", "100"))
        await store.costs.record(call(YESTERDAY, "tg:1", "tg:ann", "1"))
        await store.costs.record(call(NOW, "tg:1", "tg:ann", "0.25"))
        await store.costs.record(call(NOW, "tg:1", "tg:bob", None))
    # Back to the schema before it, as a gateway of migration 12 left the file.
    db.execute(tmp_path / "state.db", "DROP TABLE cost_holds")  # migration 15's
    db.execute(tmp_path / "state.db", "DROP TABLE alerts_told")  # migration 14's
    db.execute(tmp_path / "state.db", "DROP TABLE cost_days")
    db.execute(tmp_path / "state.db", "DROP INDEX costs_chat_spent")
    db.execute(tmp_path / "state.db", "DROP INDEX costs_person_spent")
    db.execute(tmp_path / "state.db", "CREATE INDEX costs_chat ON costs(session_key, at)")
    db.execute(tmp_path / "state.db", "CREATE INDEX costs_person ON costs(person, at)")
    db.execute(tmp_path / "state.db", "PRAGMA user_version=12")
    async with SQLiteStore(tmp_path / "state.db") as store:
        spent = await store.costs.spent("tg:ann", "tg:1", NOW)
        await store.costs.record(call(NOW, "tg:2", "tg:carl", "0.5"))
        after = await store.costs.spent("tg:carl", "tg:2", NOW)
    assert spent == Spent(Decimal("0.25"), Decimal("0.25"), Decimal("1.25"))
    assert after == Spent(Decimal("0.5"), Decimal("0.5"), Decimal("1.75"))


async def test_migration_13_on_postgresql_sums_the_days_already_stored(postgres_dsn: str) -> None:
    dsn = postgres_dsn
    async with PostgresStore(dsn) as store:
        await store.costs.record(call(LAST_MONTH, "tg:1", "tg:ann", "100"))
        await store.costs.record(call(YESTERDAY, "tg:1", "tg:ann", "1"))
        await store.costs.record(call(NOW, "tg:1", "tg:ann", "0.25"))
    # Back to the schema before it, as a replica of migration 12 left the database.
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(
            "DROP TABLE cost_holds; DROP TABLE alerts_told; DROP TABLE cost_days;"  # 15 to 13
            " DROP INDEX costs_chat_spent; DROP INDEX costs_person_spent;"
            " CREATE INDEX costs_chat ON costs(session_key, at);"
            " CREATE INDEX costs_person ON costs(person, at);"
            " UPDATE nightowl_schema SET version = 12"
        )
    finally:
        await connection.close()
    async with PostgresStore(dsn) as store:
        spent = await store.costs.spent("tg:ann", "tg:1", NOW)
    assert spent == Spent(Decimal("0.25"), Decimal("0.25"), Decimal("1.25"))
