"""The scheduler's data in the store, on either database: reminders (docs/design.md#tools) and idle sessions (docs/design.md#idle-compression)."""

from __future__ import annotations

import time

from gateway.store.dialect import Database
from gateway.store.queue_rows import mark_reminder_sent, reminder_record
from gateway.store.records import (
    IdleSession,
    Reminder,
)


class SqlScheduling:
    """:class:`~gateway.store.protocols.SchedulingStore` on a :class:`Connection`."""

    def __init__(self, connection: Database) -> None:
        self.connection = connection

    # -- reminders (docs/design.md#tools) -------------------------------------------------------------

    async def add_reminder(self, reminder: Reminder) -> Reminder:
        """Store a pending reminder; returns it with its id and creation time."""
        now = time.time()
        async with self.connection.transaction() as db:
            cursor = await db.execute(
                "INSERT INTO reminders(session_key, platform, chat_id, thread_id, text, due_at,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    reminder.session_key,
                    reminder.platform,
                    reminder.chat_id,
                    reminder.thread_id,
                    reminder.text,
                    reminder.due_at,
                    now,
                ),
            )
        stored = await self.get_reminder(int(cursor.lastrowid or 0))
        assert stored is not None
        return stored

    async def get_reminder(self, reminder_id: int) -> Reminder | None:
        async with self.connection.read() as db:
            rows = list(await db.fetch_all("SELECT * FROM reminders WHERE id = ?", (reminder_id,)))
        return reminder_record(rows[0]) if rows else None

    async def pending_reminders(self, session_key: str | None = None) -> list[Reminder]:
        """Reminders not delivered yet (all chats, or one), soonest first."""
        where = "sent_at IS NULL" + (" AND session_key = ?" if session_key is not None else "")
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                f"SELECT * FROM reminders WHERE {where} ORDER BY due_at, id",
                () if session_key is None else (session_key,),
            )
        return [reminder_record(row) for row in rows]

    async def mark_reminder_sent(self, reminder_id: int) -> bool:
        async with self.connection.transaction() as db:
            return await mark_reminder_sent(db, reminder_id, time.time())

    # -- idle compression (docs/design.md#idle-compression) -----------------------------------------------------

    async def idle_sessions(self, idle_since: float, min_tokens: int = 0) -> list[IdleSession]:
        """Current sessions untouched since ``idle_since`` holding >= ``min_tokens`` active.

        Left out: sessions with messages waiting in the inbox (their turn comes first) and
        sessions with no new row since :meth:`mark_idle_compressed` (idle compression's own pause, docs/design.md#idle-compression).
        Tokens are the stored per-row counts of active rows, read through the index.
        """
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                "SELECT s.id, s.session_key, s.updated_at, COUNT(m.id) AS messages,"
                " COALESCE(SUM(m.token_count), 0) AS tokens"
                " FROM sessions s JOIN messages m"
                "  ON m.session_id = s.id AND m.active = 1"
                " WHERE s.ended_at IS NULL AND s.updated_at <= ?"
                "  AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.session_key = s.session_key)"
                " GROUP BY s.id"
                " HAVING SUM(m.token_count) >= ?"
                "  AND (s.idle_compressed_through IS NULL OR MAX(m.id) > s.idle_compressed_through)"
                " ORDER BY s.updated_at",
                (idle_since, min_tokens),
            )
        return [
            IdleSession(
                session_id=row["id"],
                session_key=row["session_key"],
                active_messages=row["messages"],
                active_tokens=row["tokens"],
                updated_at=row["updated_at"],
            )
            for row in rows
        ]

    async def mark_idle_compressed(self, session_id: str) -> None:
        """Idle compression looked at every row ``session_id`` has now; skip it until more."""
        async with self.connection.transaction() as db:
            await db.execute(
                "UPDATE sessions SET idle_compressed_through ="
                " (SELECT MAX(id) FROM messages WHERE session_id = ?) WHERE id = ?",
                (session_id, session_id),
            )
