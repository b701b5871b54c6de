"""The operator's view of the store, on either database: list, export, erase, check
(``nightowl sessions``, ``nightowl doctor``). ``forget`` is the only deletion in nightowl.
Where PostgreSQL keeps things its own way, :class:`gateway.store.postgres.PgOperator`."""

from __future__ import annotations

from gateway.store.dialect import Database
from gateway.store.documents import forget_documents
from gateway.store.message_rows import MESSAGE_COLUMNS, stored_message
from gateway.store.records import SessionSummary, StoredMessage


class SqlOperator:
    """:class:`~gateway.store.protocols.OperatorStore` on a :class:`Connection`."""

    def __init__(self, connection: Database) -> None:
        self.connection = connection

    # -- operator tools ------------------------------------------------------------------

    async def list_sessions(self) -> list[SessionSummary]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                "SELECT s.session_key, s.id, s.platform, s.updated_at,"
                " COALESCE(SUM(m.active), 0) AS active,"
                # Archived: compressed away, not a message a budget refused (also inactive).
                " COALESCE(SUM(CASE WHEN m.active = 0 AND m.refused = 0 THEN 1 ELSE 0 END), 0)"
                " AS archived,"
                " COALESCE(SUM(m.refused), 0) AS refused,"
                " COALESCE(SUM(CASE WHEN m.active = 1 THEN m.token_count ELSE 0 END), 0) AS tokens"
                " FROM sessions s LEFT JOIN messages m ON m.session_id = s.id"
                " WHERE s.ended_at IS NULL GROUP BY s.id ORDER BY s.updated_at DESC"
            )
        return [
            SessionSummary(
                session_key=row["session_key"],
                session_id=row["id"],
                platform=row["platform"],
                active_messages=row["active"],
                archived_messages=row["archived"],
                active_tokens=row["tokens"],
                updated_at=row["updated_at"],
                refused_messages=row["refused"],
            )
            for row in rows
        ]

    async def ended_sessions(self, session_key: str | None = None) -> int:
        """How many sessions have ended (by /new or /reset), of ``session_key``
        or of every chat: their messages stay, for ``sessions export``."""
        where = "ended_at IS NOT NULL" + (" AND session_key = ?" if session_key else "")
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                f"SELECT COUNT(*) AS n FROM sessions WHERE {where}",
                (session_key,) if session_key else (),
            )
        return int(rows[0]["n"])

    async def export_rows(self, session_key: str) -> list[tuple[str, StoredMessage]]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                f"SELECT {MESSAGE_COLUMNS}, m.session_id, m.refused, s.ended_at FROM messages m"
                " JOIN sessions s ON s.id = m.session_id"
                " WHERE s.session_key = ? ORDER BY m.id",
                (session_key,),
            )
        # A row of a session /new or /reset ended is no longer sent to the model.
        return [
            (
                row["session_id"],
                stored_message(row)._replace(
                    refused=bool(row["refused"]),
                    active=bool(row["active"]) and row["ended_at"] is None,
                ),
            )
            for row in rows
        ]

    async def forget(self, session_key: str) -> int:
        """Erase everything stored under ``session_key`` — the only deletion in nightowl:
        its sessions and messages, the chat's memory notes (docs/design.md#memory), its
        waiting inbox and its reminders, pending and sent
        (a running gateway re-reads a reminder before sending it, so a forgotten one is
        never sent), its documents (their text too, when no other chat holds them).
        Returns the number of messages erased."""
        async with self.connection.transaction() as db:
            ids = [
                r[0]
                for r in await db.fetch_all(
                    "SELECT id FROM sessions WHERE session_key = ?", (session_key,)
                )
            ]
            marks = ",".join("?" * len(ids)) or "NULL"  # IN (): SQLite only
            cursor = await db.execute(f"DELETE FROM messages WHERE session_id IN ({marks})", ids)
            deleted = cursor.rowcount
            for table in ("turn_stats", "compactions"):  # the dashboard's records of it
                await db.execute(f"DELETE FROM {table} WHERE session_id IN ({marks})", ids)
            await db.execute(
                "UPDATE sessions SET parent_session_id = NULL"
                f" WHERE parent_session_id IN ({marks})",
                ids,
            )
            await db.execute(f"DELETE FROM sessions WHERE id IN ({marks})", ids)
            await db.execute("DELETE FROM inbox WHERE session_key = ?", (session_key,))
            await db.execute("DELETE FROM reminders WHERE session_key = ?", (session_key,))
            await db.execute("DELETE FROM chat_models WHERE session_key = ?", (session_key,))
            await db.execute(
                "DELETE FROM memories WHERE scope = 'chat' AND owner = ?", (session_key,)
            )
            await forget_documents(db, session_key)
        return deleted

    async def integrity_check(self) -> str:
        async with self.connection.read() as db:
            rows = list(await db.fetch_all("PRAGMA integrity_check"))
        return str(rows[0][0])

    async def scrub(self) -> bool:
        """Make erased rows unrecoverable from the file: after :meth:`forget`.

        Deleted rows linger in free pages, the WAL and the full-text index's segments
        (FTS5 only marks them deleted) until those are rewritten: merge the index, rebuild
        the file, and truncate the WAL. False when the WAL could not be truncated (a
        running gateway was reading through the whole busy timeout).
        """
        async with self.connection.read() as db:
            await db.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            await db.execute(
                "INSERT INTO document_parts_fts(document_parts_fts) VALUES ('optimize')"
            )
            await db.execute("VACUUM")
            rows = await db.fetch_all("PRAGMA wal_checkpoint(TRUNCATE)")
        busy = next(iter(rows))[0]
        return not busy
