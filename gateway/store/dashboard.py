"""What the operator's dashboard reads (docs/design.md#dashboard), and the two records it
charts, written by the conversation's own commits: a turn's stats (``turn_stats``) and a
compression's mark (``compactions``).

Reads only: the dashboard's actions (compress now, forget, pairing) go through the parts
of the gateway that own them. The statements are plain SQL both databases accept.
"""

from __future__ import annotations

from typing import Any

from gateway.store.dashboard_records import (
    CompressionRecord,
    SessionOverview,
    Totals,
    TurnStat,
)
from gateway.store.dialect import Database
from gateway.store.message_rows import MESSAGE_COLUMNS, stored_message
from gateway.store.records import AnchorRecord, CompressionMark, StoredMessage, UsageTotals
from gateway.store.session_rows import session_record

# -- written in the conversation's transactions -------------------------------------------


async def record_turn(
    db: Any, session_id: str, now: float, anchor: object, usage: UsageTotals
) -> None:
    """One ``turn_stats`` row, inside the transaction that stores the turn (a commit with
    usage): when, the prompt size the model last saw (the anchor's, if it has one), the
    turn's usage."""
    prompt_tokens = anchor.prompt_tokens if isinstance(anchor, AnchorRecord) else None
    await db.execute(
        "INSERT INTO turn_stats(session_id, at, prompt_tokens, usage_prompt, usage_completion,"
        " usage_cache_read, requests) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            session_id,
            now,
            prompt_tokens,
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cache_read_tokens,
            usage.requests,
        ),
    )


async def record_compression(
    db: Any, session_id: str, now: float, mark: CompressionMark | None
) -> None:
    """One ``compactions`` row, inside the transaction that commits the compression (when
    the committer said what it did)."""
    if mark is None:
        return
    await db.execute(
        "INSERT INTO compactions(session_id, at, trigger_source, method, tokens_before,"
        " tokens_after, messages_before, messages_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session_id,
            now,
            mark.trigger_source,
            mark.method,
            mark.tokens_before,
            mark.tokens_after,
            mark.messages_before,
            mark.messages_after,
        ),
    )


#: Above every row id: "before nothing" (a typed bound both databases read alike).
_AFTER_EVERY_ID = 2**62

#: A session and the ones it was rotated from (docs/design.md#rotation): one conversation.
_LINEAGE = """
WITH RECURSIVE lineage(id) AS (
    SELECT CAST(:session AS TEXT) UNION SELECT s.parent_session_id FROM sessions s
    JOIN lineage l ON s.id = l.id WHERE s.parent_session_id IS NOT NULL
)
"""

_SESSIONS = """
SELECT s.*,
    (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id AND m.active = 1) AS active_rows,
    (SELECT COALESCE(SUM(m.token_count), 0) FROM messages m
        WHERE m.session_id = s.id AND m.active = 1) AS active_tokens,
    (SELECT COUNT(*) FROM messages m
        WHERE m.session_id = s.id AND m.active = 0 AND m.compacted = 1) AS archived_rows
FROM sessions s WHERE s.ended_at IS NULL ORDER BY s.updated_at DESC
"""


class SqlDashboard:
    """:class:`~gateway.store.protocols.DashboardStore` on a :class:`Connection`."""

    def __init__(self, connection: Database) -> None:
        self.connection = connection

    async def sessions(self) -> list[SessionOverview]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(_SESSIONS)
        overviews = []
        for row in rows:
            record = session_record(row)
            overviews.append(
                SessionOverview(
                    session_key=record.session_key,
                    session_id=record.id,
                    platform=record.platform,
                    chat_id=record.chat_id,
                    thread_id=record.thread_id,
                    model=record.model,
                    created_at=record.created_at,
                    updated_at=record.updated_at,
                    active_messages=int(row["active_rows"]),
                    archived_messages=int(row["archived_rows"]),
                    active_tokens=int(row["active_tokens"]),
                    anchor_tokens=record.anchor.prompt_tokens if record.anchor else None,
                    compression_count=record.compression_count,
                    engine_state=record.engine_state,
                    usage=record.usage,
                )
            )
        return overviews

    async def turn_history(self, session_id: str, limit: int = 2000) -> list[TurnStat]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                _LINEAGE + "SELECT session_id, at, prompt_tokens, usage_prompt,"
                " usage_completion, usage_cache_read, requests FROM turn_stats"
                " WHERE session_id IN (SELECT id FROM lineage) ORDER BY at DESC LIMIT :limit",
                {"session": session_id, "limit": limit},
            )
        return [
            TurnStat(
                session_id=row["session_id"],
                at=row["at"],
                prompt_tokens=row["prompt_tokens"],
                usage=UsageTotals(
                    prompt_tokens=row["usage_prompt"],
                    completion_tokens=row["usage_completion"],
                    cache_read_tokens=row["usage_cache_read"],
                    requests=row["requests"],
                ),
            )
            for row in reversed(list(rows))
        ]

    async def compressions(self, session_id: str, since: float = 0.0) -> list[CompressionRecord]:
        """The conversation's compressions since ``since``, oldest first."""
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                _LINEAGE + "SELECT * FROM compactions"
                " WHERE session_id IN (SELECT id FROM lineage) AND at >= :since ORDER BY at",
                {"session": session_id, "since": since},
            )
        return [
            CompressionRecord(
                session_id=row["session_id"],
                at=row["at"],
                mark=CompressionMark(
                    trigger_source=row["trigger_source"],
                    method=row["method"],
                    tokens_before=row["tokens_before"],
                    tokens_after=row["tokens_after"],
                    messages_before=row["messages_before"],
                    messages_after=row["messages_after"],
                ),
            )
            for row in rows
        ]

    async def messages(
        self, session_id: str, *, before: int | None = None, limit: int = 100
    ) -> list[StoredMessage]:
        """The conversation's rows, active and archived, in the order they were stored:
        the ``limit`` newest before row id ``before`` (all when None)."""
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                _LINEAGE + f"SELECT {MESSAGE_COLUMNS} FROM messages m"
                " WHERE m.session_id IN (SELECT id FROM lineage)"
                " AND (m.active = 1 OR m.compacted = 1) AND m.id < :before"
                " ORDER BY m.id DESC LIMIT :limit",
                {
                    "session": session_id,
                    "before": _AFTER_EVERY_ID if before is None else before,
                    "limit": limit,
                },
            )
        return [stored_message(row) for row in reversed(list(rows))]

    async def totals(self, since: float) -> Totals:
        async with self.connection.read() as db:
            turns = next(
                iter(
                    await db.fetch_all(
                        "SELECT COUNT(*), COALESCE(SUM(usage_prompt), 0),"
                        " COALESCE(SUM(usage_completion), 0), COALESCE(SUM(usage_cache_read), 0)"
                        " FROM turn_stats WHERE at >= ?",
                        (since,),
                    )
                )
            )
            by_platform = await db.fetch_all(
                "SELECT s.platform, COUNT(*) FROM turn_stats t JOIN sessions s"
                " ON s.id = t.session_id WHERE t.at >= ? GROUP BY s.platform",
                (since,),
            )
            by_trigger = await db.fetch_all(
                "SELECT trigger_source, COUNT(*) FROM compactions WHERE at >= ?"
                " GROUP BY trigger_source",
                (since,),
            )
            counts = next(
                iter(
                    await db.fetch_all(
                        "SELECT (SELECT COUNT(*) FROM sessions WHERE updated_at >= ?),"
                        " (SELECT COUNT(*) FROM inbox),"
                        " (SELECT COUNT(*) FROM messages WHERE pending_delivery = 1),"
                        " (SELECT COUNT(*) FROM reminders WHERE sent_at IS NULL)",
                        (since,),
                    )
                )
            )
        return Totals(
            since=since,
            turns=int(turns[0]),
            prompt_tokens=int(turns[1]),
            completion_tokens=int(turns[2]),
            cache_read_tokens=int(turns[3]),
            turns_by_platform={str(r[0]): int(r[1]) for r in by_platform},
            sessions_active=int(counts[0]),
            compressions_by_trigger={str(r[0]): int(r[1]) for r in by_trigger},
            inbox_pending=int(counts[1]),
            undelivered_replies=int(counts[2]),
            reminders_pending=int(counts[3]),
        )
