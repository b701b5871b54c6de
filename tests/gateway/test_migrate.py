"""``nightowl migrate``: a SQLite state.db with archived rows, a waiting message, a
reminder and a paired user, copied into an empty PostgreSQL database and read back
through the store's views there (docs/design.md#postgresql)."""

from __future__ import annotations

import io
from pathlib import Path

import asyncpg
import pytest

from gateway.config.schema import parse_config
from gateway.conversation.pairing import Pairing
from gateway.ops.migrate import TABLES, migrate
from gateway.store import (
    CompressionCommit,
    InboxEntry,
    NewMessage,
    Reminder,
    SessionOrigin,
    SQLiteStore,
    StoreError,
)
from gateway.store.postgres import PostgresStore
from gateway.store.transfer import NOT_COPIED

ORIGIN = SessionOrigin("telegram:5", "telegram", "5", None, "7")


def row(role: str, content: str) -> NewMessage:
    return NewMessage({"role": role, "content": content}, 5)


async def fill(path: Path) -> None:
    async with SQLiteStore(path) as store:
        session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
        await store.conversation.commit_turn(
            session.id, [row("user", f"my cat is called Tom, part {i}") for i in range(6)]
        )
        system = (await store.conversation.load_active(session.id))[0]
        await store.conversation.archive_and_compress(
            session.id, CompressionCommit([system.id, row("user", "[CONTEXT COMPACTION] pets")])
        )
        await store.conversation.enqueue(
            InboxEntry(
                "telegram:5",
                "telegram",
                "5",
                {"role": "user", "content": "still there?"},
                3,
                True,
                user_id="7",
                dedupe_key="telegram:5:99",
            )
        )
        await store.scheduling.add_reminder(
            Reminder("telegram:5", "telegram", "5", "water the plants", 2_000_000_000.0)
        )
        await Pairing(store.pairing).request("telegram", "8", "Eve", "8")  # a code waits


async def test_a_sqlite_database_moves_to_postgres_whole(tmp_path: Path, postgres_dsn: str) -> None:
    config = parse_config({"data_dir": str(tmp_path)}, {})
    await fill(config.database_path)
    out = io.StringIO()
    assert await migrate(config, postgres_dsn, out) == 0
    assert "✗" not in out.getvalue() and "✓ messages: 8 → 8" in out.getvalue()

    async with SQLiteStore(config.database_path) as sqlite, PostgresStore(postgres_dsn) as pg:
        assert await pg.operator.export_rows("telegram:5") == await sqlite.operator.export_rows(
            "telegram:5"
        )
        session = await pg.conversation.current_session("telegram:5")
        assert session is not None and session.compression_count == 1
        hits = await pg.conversation.search(session.id, "cat Tom")
        assert len(hits) == 5 and all(hit.archived for hit in hits)  # archived, found
        assert [e.message for e in await pg.conversation.inbox("telegram:5")] == [
            {"role": "user", "content": "still there?"}
        ]
        [reminder] = await pg.scheduling.pending_reminders()
        assert reminder.text == "water the plants"
        # New rows continue after the copied ids.
        (new_id,) = await pg.conversation.commit_turn(session.id, [row("user", "after")])
        assert new_id > max(m.id for _, m in await sqlite.operator.export_rows("telegram:5"))
        # The same update again is still a duplicate there.
        duplicate = InboxEntry(
            "telegram:5",
            "telegram",
            "5",
            {"role": "user", "content": "x"},
            1,
            True,
            dedupe_key="telegram:5:99",
        )
        assert not await pg.conversation.enqueue(duplicate)

    with pytest.raises(StoreError, match="already holds nightowl data"):
        await migrate(config, postgres_dsn, io.StringIO())


async def test_every_postgres_table_is_copied(postgres_dsn: str) -> None:
    async with PostgresStore(postgres_dsn):
        pass  # the schema
    connection = await asyncpg.connect(postgres_dsn)
    try:
        tables = {
            r["table_name"]
            for r in await connection.fetch(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        }
    finally:
        await connection.close()
    assert tables - {"nightowl_schema", "pairing_revision", *NOT_COPIED} == set(TABLES)
