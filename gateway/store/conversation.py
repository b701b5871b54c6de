"""The conversation's statements, on either database: the inbox, sessions, rows, the compression
commit, search, delivery marks (:class:`~gateway.store.protocols.ConversationStore`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from agent.compression.markers import SUMMARY_PREFIX
from agent.messages import JSON
from gateway.store.active_rows import ActiveRows
from gateway.store.chat_models import SqlChatModels
from gateway.store.connection import new_session_id
from gateway.store.dashboard import record_compression, record_turn
from gateway.store.dialect import Database
from gateway.store.errors import SessionEnded
from gateway.store.inbox import InboxWriter
from gateway.store.message_rows import (
    insert_active_list,
    insert_messages,
    pending_delivery,
    search_hit,
)
from gateway.store.queue_rows import (
    delete_inbox,
    inbox_entry,
    mark_inbox_in_history,
    mark_reminder_sent,
)
from gateway.store.records import (
    KEEP,
    AnchorRecord,
    CompressionCommit,
    CompressionMark,
    InboxEntry,
    Keep,
    NewMessage,
    PendingDelivery,
    SearchHit,
    SessionOrigin,
    SessionRecord,
    StoredMessage,
    UsageTotals,
    Waiting,
)
from gateway.store.session_rows import (
    anchor_at,
    insert_session,
    move_session_on,
    save_engine_state,
    session_record,
    set_anchor,
)

_CURRENT_SESSION = "SELECT * FROM sessions WHERE session_key = ? AND ended_at IS NULL"
_INBOX = "SELECT * FROM inbox WHERE session_key = ? ORDER BY id"


class SqlConversation(SqlChatModels):
    """:class:`~gateway.store.protocols.ConversationStore` on a :class:`Connection`."""

    def __init__(self, connection: Database) -> None:
        self.connection = connection
        self._inbox = InboxWriter(connection)
        #: What this database says its own way (docs/design.md#postgresql).
        self.sql = connection.dialect
        self._active = ActiveRows()  # kept between turns: gateway/store/active_rows.py

    # -- inbox ---------------------------------------------------------------------------

    async def enqueue(self, entry: InboxEntry) -> bool:
        """Messages stored at the same moment share a commit (gateway/store/inbox.py)."""
        return await self._inbox.enqueue(entry)

    async def remember_inbound(self, dedupe_key: str) -> bool:
        async with self.connection.transaction() as db:
            cursor = await db.execute(
                "INSERT INTO inbound_seen(dedupe_key, seen_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                (dedupe_key, time.time()),
            )
        return cursor.rowcount == 1

    async def inbox(self, session_key: str) -> list[InboxEntry]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(_INBOX, (session_key,))
        return [inbox_entry(row) for row in rows]

    async def waiting(self, session_key: str) -> Waiting:
        """What the session's lane reads each time it wakes, in one trip: undelivered
        replies, the inbox and, when the inbox holds anything, the current session and
        its active rows."""

        async def read(db: Any) -> Waiting:
            replies = await db.fetch_all(self.sql.PENDING_DELIVERIES, {"key": session_key})
            inbox = await db.fetch_all(_INBOX, (session_key,))
            waiting = Waiting(
                [pending_delivery(row) for row in replies], [inbox_entry(row) for row in inbox]
            )
            if waiting.inbox:
                found = await db.fetch_all(_CURRENT_SESSION, (session_key,))
                if found:
                    session = session_record(found[0])
                    rows = await self._active.read(db, session.id)
                    return replace(waiting, session=session, history=rows)
            return waiting

        return await self.connection.snapshot(read)

    async def forget_seen(self, before: float) -> int:
        async with self.connection.transaction() as db:
            cursor = await db.execute("DELETE FROM inbound_seen WHERE seen_at < ?", (before,))
        return cursor.rowcount

    async def session_keys_with_inbox(self) -> list[str]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                "SELECT session_key FROM inbox GROUP BY session_key ORDER BY MIN(id)"
            )
        return [row[0] for row in rows]

    # -- sessions ------------------------------------------------------------------------

    async def current_session(self, session_key: str) -> SessionRecord | None:
        async with self.connection.read() as db:
            rows = list(await db.fetch_all(_CURRENT_SESSION, (session_key,)))
        return session_record(rows[0]) if rows else None

    async def get_session(self, session_id: str) -> SessionRecord | None:
        async with self.connection.read() as db:
            rows = list(await db.fetch_all("SELECT * FROM sessions WHERE id = ?", (session_id,)))
        return session_record(rows[0]) if rows else None

    async def start_session(
        self,
        origin: SessionOrigin,
        model: str,
        system: NewMessage,
        *,
        parent_id: str | None = None,
    ) -> SessionRecord:
        now = time.time()
        session_id = new_session_id()
        async with self.connection.transaction() as db:
            await insert_session(db, session_id, origin, model, now, parent_id=parent_id)
            await insert_messages(db, self.sql, session_id, [system], now)
        record = await self.get_session(session_id)
        assert record is not None
        return record

    async def end_session(self, session_id: str, reason: str) -> None:
        """End a session (``/new``): its rows stay; the next message opens a new one."""
        now = time.time()
        async with self.connection.transaction() as db:
            await db.execute(
                "UPDATE sessions SET ended_at = ?, end_reason = ?, updated_at = ?"
                " WHERE id = ? AND ended_at IS NULL",
                (now, reason, now, session_id),
            )

    async def save_engine_state(self, session_id: str, state: JSON) -> None:
        async with self.connection.transaction() as db:
            await save_engine_state(db, session_id, state)

    async def set_anchor(self, session_id: str, anchor: AnchorRecord | None) -> None:
        async with self.connection.transaction() as db:
            await set_anchor(db, session_id, anchor)

    # -- messages ------------------------------------------------------------------------

    async def load_active(self, session_id: str) -> list[StoredMessage]:
        return await self.connection.snapshot(partial(self._active.read, session_id=session_id))

    async def commit_turn(
        self,
        session_id: str,
        new: Sequence[NewMessage],
        *,
        consumed_inbox: Sequence[int] = (),
        anchor: AnchorRecord | Keep | None = KEEP,
        usage: UsageTotals | None = None,
        reminder_sent: int | None = None,
    ) -> list[int]:
        """Append a turn's rows, take its inbox entries out, and move the anchor: atomically.

        ``anchor`` is an :class:`AnchorRecord` (a negative ``message_id`` counts back from
        the end of ``new``: -1 is the last row inserted here), ``None`` to clear it, or
        :data:`KEEP` to leave it. ``reminder_sent`` marks that reminder delivered in the
        same transaction; if it was not pending any more, nothing is written (``[]``).
        """
        now = time.time()

        async def turn(db: Any) -> list[int]:
            if reminder_sent is not None and not await mark_reminder_sent(db, reminder_sent, now):
                return []
            ids = await insert_messages(db, self.sql, session_id, new, now)
            await delete_inbox(db, consumed_inbox)
            moved = anchor_at(anchor, ids) if isinstance(anchor, AnchorRecord) else anchor
            await move_session_on(db, session_id, now, moved, usage)
            if usage is not None:
                await record_turn(db, session_id, now, moved, usage)  # docs/design.md#dashboard
            return ids

        return await self.connection.atomically(turn)

    async def archive_and_compress(
        self, session_id: str, compression: CompressionCommit
    ) -> list[int]:
        """Commit a compression in place, in one transaction (docs/design.md#compression-commit).

        The active rows that ``compression.active`` does not keep become ``active=0,
        compacted=1`` (kept, still searchable); the kept ones stay as they are; the new
        ones are inserted in their places; ``originals`` are inserted archived. Inbox
        entries the new list absorbed are marked, not deleted (their turn is still
        owed); the usage anchor is cleared and the compression counted. Returns the id
        of every entry of the new active list.
        """
        now = time.time()
        kept = [item for item in compression.active if isinstance(item, int)]
        async with self.connection.transaction() as db:
            kept_ids = self.sql.id_list(kept)
            await db.execute(self.sql.DROP_IMAGES_OF_ARCHIVED, (session_id, kept_ids))
            await db.execute(self.sql.ARCHIVE_EXCEPT, (session_id, kept_ids))
            await insert_messages(
                db, self.sql, session_id, compression.originals, now, archived=True
            )
            ids = await insert_active_list(db, self.sql, session_id, compression.active, now)
            await mark_inbox_in_history(db, compression.absorbed_inbox)
            await set_anchor(db, session_id, None)
            await db.execute(
                "UPDATE sessions SET compression_count = compression_count + 1, updated_at = ?"
                " WHERE id = ?",
                (now, session_id),
            )
            if compression.engine_state is not None:
                await save_engine_state(db, session_id, compression.engine_state)
            await record_compression(db, session_id, now, compression.mark)
        self._active.forget(session_id)
        return ids

    async def rotate(
        self,
        session_id: str,
        compacted: Sequence[NewMessage],
        *,
        originals: Sequence[NewMessage] = (),
        absorbed_inbox: Sequence[int] = (),
        engine_state: JSON | None = None,
        mark: CompressionMark | None = None,
    ) -> tuple[SessionRecord, list[int]]:
        now = time.time()
        old = await self.get_session(session_id)
        if old is None:
            raise SessionEnded(session_id)
        child_id = new_session_id()
        async with self.connection.transaction() as db:
            ended = await db.execute(
                "UPDATE sessions SET ended_at = ?, end_reason = 'compression', updated_at = ?"
                " WHERE id = ? AND ended_at IS NULL",
                (now, now, session_id),
            )
            if ended.rowcount == 0:
                raise SessionEnded(session_id)
            await insert_messages(db, self.sql, session_id, originals, now)
            origin = SessionOrigin(
                old.session_key, old.platform, old.chat_id, old.thread_id, old.user_id
            )
            await insert_session(
                db,
                child_id,
                origin,
                old.model or "",
                now,
                parent_id=session_id,
                compression_count=old.compression_count + 1,
                engine_state=engine_state if engine_state is not None else old.engine_state,
            )
            ids = await insert_messages(db, self.sql, child_id, compacted, now)
            await mark_inbox_in_history(db, absorbed_inbox)
            await record_compression(db, child_id, now, mark)
        child = await self.get_session(child_id)
        assert child is not None
        return child, ids

    async def search(self, session_id: str, query: str, limit: int = 5) -> list[SearchHit]:
        match = self.sql.fts_query(query)
        if not match:
            return []
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                self.sql.SEARCH,
                {
                    "session": session_id,
                    "match": match,
                    "summary": SUMMARY_PREFIX + "%",
                    "limit": limit,
                },
            )
        return [search_hit(row) for row in rows]

    # -- delivery ------------------------------------------------------------------------

    async def mark_delivered(self, message_ids: Sequence[int]) -> None:
        # Not synced to disk: a mark lost to a power cut means one resend at most, which
        # the delivery path allows; a kill -9 loses nothing (docs/design.md#delivery-guarantee).
        if message_ids:
            ids = ",".join(str(int(i)) for i in message_ids)
            await self.connection.write_unsynced(
                f"UPDATE messages SET pending_delivery = 0 WHERE id IN ({ids})"
            )

    async def pending_deliveries(self, session_key: str | None = None) -> list[PendingDelivery]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(self.sql.PENDING_DELIVERIES, {"key": session_key})
        return [pending_delivery(row) for row in rows]

    # -- catch-up cursors ----------------------------------------------------------------

    async def newest_stored_message_ids(self, platform: str, since: float) -> dict[str, int]:
        """``{chat id: newest platform message id}`` over the user messages of
        ``platform`` stored since ``since`` (epoch seconds), in transcripts or the inbox.

        A chat with nothing stored since then is left out: it had no recent activity.
        """
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                self.sql.NEWEST_STORED_IDS, {"platform": platform, "since": since}
            )
        return {row["chat_id"]: int(row["newest"]) for row in rows}
