"""Row helpers of the SQLite store: statements shared by its transactions, and the
conversions between rows and the records in :mod:`gateway.store.records`."""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import aiosqlite

from agent.messages import Message
from gateway.store.dialect import Dialect
from gateway.store.records import (
    AnchorRecord,
    InboxEntry,
    Keep,
    NewMessage,
    PendingDelivery,
    Reminder,
    SearchHit,
    SessionOrigin,
    SessionRecord,
    StoredMessage,
    UsageTotals,
)


def read_only_uri(path: str | Path) -> str:
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"


# -- row helpers -------------------------------------------------------------------------


async def user_version(db: aiosqlite.Connection) -> int:
    rows = await db.execute_fetchall("PRAGMA user_version")
    return int(next(iter(rows))[0])


async def insert_session(
    db: aiosqlite.Connection,
    session_id: str,
    origin: SessionOrigin,
    model: str,
    now: float,
    *,
    parent_id: str | None = None,
    compression_count: int = 0,
    engine_state: dict[str, Any] | None = None,
) -> None:
    await db.execute(
        "INSERT INTO sessions(id, session_key, platform, chat_id, thread_id, user_id, model,"
        " parent_session_id, created_at, updated_at, compression_count, engine_state)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session_id,
            origin.session_key,
            origin.platform,
            origin.chat_id,
            origin.thread_id,
            origin.user_id,
            model,
            parent_id,
            now,
            now,
            compression_count,
            json.dumps(engine_state or {}),
        ),
    )


async def insert_messages(
    db: Any,
    sql: Dialect,
    session_id: str,
    new: Sequence[NewMessage],
    now: float,
    *,
    archived: bool = False,
    seqs: Sequence[float | None] | None = None,
) -> list[int]:
    """Insert rows (``archived``: as ``active=0, compacted=1`` originals); returns ids.

    ``seqs`` places rows in the conversation; None (the default) appends: the row's
    ``seq`` is the id it gets, above every seq the table holds.
    """
    ids = []
    places = seqs if seqs is not None else [None] * len(new)
    for row, seq in zip(new, places, strict=True):
        message = row.message
        content = message.get("content")
        parts = None
        if isinstance(content, list):
            parts = json.dumps(content, ensure_ascii=False)
            content = "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
        tool_calls = message.get("tool_calls")
        cursor = await db.execute(
            sql.INSERT_MESSAGE,
            (
                session_id,
                message["role"],
                content,
                parts,
                json.dumps(tool_calls, ensure_ascii=False) if tool_calls else None,
                message.get("tool_call_id"),
                message.get("name"),
                now,
                row.token_count,
                row.platform_message_id,
                int(row.pending_delivery),
                int(not archived),
                int(archived),
                seq,
            ),
        )
        ids.append(cast(int, cursor.lastrowid))  # set by every INSERT
    return ids


def places_between(known: Sequence[float | None]) -> list[float | None]:
    """Seqs for the ``None`` entries of an active list, keeping the known ones' order.

    A run of new rows between two kept rows is spread evenly between their seqs; a run
    before the first kept row goes just below it; a run after the last kept row gets
    None (appended: seq = id).
    """
    result = list(known)
    index = 0
    while index < len(result):
        if result[index] is not None:
            index += 1
            continue
        end = index
        while end < len(result) and result[end] is None:
            end += 1
        low = result[index - 1] if index > 0 else None
        high = result[end] if end < len(result) else None
        count = end - index
        if high is not None:
            start = low if low is not None else high - count - 1
            step = (high - start) / (count + 1)
            for offset in range(count):
                result[index + offset] = start + step * (offset + 1)
        index = end
    return result


async def insert_active_list(
    db: Any,
    sql: Dialect,
    session_id: str,
    active: Sequence[int | NewMessage],
    now: float,
) -> list[int]:
    """Make ``active`` (kept row ids and new rows, in order) the active list's order.

    Kept rows keep their id and their seq; new rows are inserted in the places between
    them. Returns the id of every entry.
    """
    kept = [item for item in active if isinstance(item, int)]
    rows = await db.execute_fetchall(sql.SEQS_OF, (sql.id_list(kept),))
    seq_of = {row[0]: row[1] for row in rows}
    places = places_between([seq_of[i] if isinstance(i, int) else None for i in active])
    ids: list[int] = []
    for item, seq in zip(active, places, strict=True):
        if isinstance(item, int):
            ids.append(item)
        else:
            ids += await insert_messages(db, sql, session_id, [item], now, seqs=[seq])
    return ids


async def mark_reminder_sent(db: aiosqlite.Connection, reminder_id: int, now: float) -> bool:
    """Mark a reminder delivered; False when it was not pending any more."""
    cursor = await db.execute(
        "UPDATE reminders SET sent_at = ? WHERE id = ? AND sent_at IS NULL", (now, reminder_id)
    )
    return cursor.rowcount == 1


async def mark_inbox_in_history(db: aiosqlite.Connection, ids: Sequence[int]) -> None:
    if ids:
        await db.executemany("UPDATE inbox SET in_history = 1 WHERE id = ?", [(i,) for i in ids])


async def delete_inbox(db: aiosqlite.Connection, ids: Sequence[int]) -> None:
    if ids:
        await db.executemany("DELETE FROM inbox WHERE id = ?", [(i,) for i in ids])


_ANCHOR_SET = (
    "anchor_prompt_tokens = ?, anchor_completion_tokens = ?, anchor_message_id = ?,"
    " anchor_fingerprint = ?, anchor_route = ?, anchor_ratio = ?, anchor_overhead = ?"
)
_USAGE_SET = (
    "usage_prompt = usage_prompt + ?, usage_completion = usage_completion + ?,"
    " usage_cache_read = usage_cache_read + ?, usage_cache_write = usage_cache_write + ?,"
    " usage_requests = usage_requests + ?"
)


def _anchor_values(anchor: AnchorRecord | None) -> tuple[Any, ...]:
    if anchor is None:
        return (None, None, None, None, None, None, None)
    return (
        anchor.prompt_tokens,
        anchor.completion_tokens,
        anchor.message_id,
        anchor.fingerprint,
        anchor.route,
        anchor.ratio,
        anchor.overhead,
    )


async def set_anchor(db: Any, session_id: str, anchor: AnchorRecord | None) -> None:
    await db.execute(
        f"UPDATE sessions SET {_ANCHOR_SET} WHERE id = ?", (*_anchor_values(anchor), session_id)
    )


async def move_session_on(
    db: Any,
    session_id: str,
    now: float,
    anchor: AnchorRecord | Keep | None,
    usage: UsageTotals | None,
) -> None:
    """After a turn, in one statement: ``updated_at``, the anchor (unless kept) and the
    usage totals (when given)."""
    sets, values = ["updated_at = ?"], [now]
    if not isinstance(anchor, Keep):
        sets.append(_ANCHOR_SET)
        values += _anchor_values(anchor)
    if usage is not None:
        sets.append(_USAGE_SET)
        values += (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.requests,
        )
    await db.execute(f"UPDATE sessions SET {', '.join(sets)} WHERE id = ?", (*values, session_id))


async def save_engine_state(
    db: aiosqlite.Connection, session_id: str, state: dict[str, Any]
) -> None:
    await db.execute(
        "UPDATE sessions SET engine_state = ? WHERE id = ?", (json.dumps(state), session_id)
    )


def anchor_at(anchor: AnchorRecord, ids: list[int]) -> AnchorRecord | None:
    """Resolve a negative ``message_id`` (an index into the rows just inserted) to a row id."""
    index = anchor.message_id
    if index >= 0:
        return anchor
    if -len(ids) <= index:
        return AnchorRecord(
            anchor.prompt_tokens,
            anchor.completion_tokens,
            ids[index],
            anchor.fingerprint,
            anchor.route,
            anchor.ratio,
            anchor.overhead,
        )
    return None


def inbox_entry(row: aiosqlite.Row) -> InboxEntry:
    return InboxEntry(
        id=row["id"],
        session_key=row["session_key"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        user_id=row["user_id"],
        message=json.loads(row["message"]),
        token_count=row["token_count"],
        addressed=bool(row["addressed"]),
        platform_message_id=row["platform_message_id"],
        created_at=row["created_at"],
        in_history=bool(row["in_history"]),
        chat_type=row["chat_type"],
    )


def search_hit(row: aiosqlite.Row) -> SearchHit:
    return SearchHit(
        message_id=row["id"],
        role=row["role"],
        snippet=row["snippet"],
        created_at=row["created_at"],
        archived=not row["active"],
    )


def pending_delivery(row: aiosqlite.Row) -> PendingDelivery:
    return PendingDelivery(
        message_id=row["id"],
        session_key=row["session_key"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        text=row["content"] or "",
        reply_to=row["reply_to"],
    )


def session_record(row: aiosqlite.Row) -> SessionRecord:
    anchor = None
    if row["anchor_message_id"] is not None:
        anchor = AnchorRecord(
            prompt_tokens=row["anchor_prompt_tokens"],
            completion_tokens=row["anchor_completion_tokens"],
            message_id=row["anchor_message_id"],
            fingerprint=row["anchor_fingerprint"],
            route=row["anchor_route"],
            ratio=row["anchor_ratio"],
            overhead=row["anchor_overhead"],
        )
    return SessionRecord(
        id=row["id"],
        session_key=row["session_key"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        user_id=row["user_id"],
        model=row["model"],
        parent_session_id=row["parent_session_id"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        ended_at=row["ended_at"],
        end_reason=row["end_reason"],
        anchor=anchor,
        engine_state=json.loads(row["engine_state"] or "{}"),
        compression_count=row["compression_count"],
        usage=UsageTotals(
            prompt_tokens=row["usage_prompt"],
            completion_tokens=row["usage_completion"],
            cache_read_tokens=row["usage_cache_read"],
            cache_write_tokens=row["usage_cache_write"],
            requests=row["usage_requests"],
        ),
    )


def reminder_record(row: aiosqlite.Row) -> Reminder:
    return Reminder(
        id=row["id"],
        session_key=row["session_key"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        text=row["text"],
        due_at=row["due_at"],
        created_at=row["created_at"],
        sent_at=row["sent_at"],
    )


def stored_message(row: aiosqlite.Row) -> StoredMessage:
    # Positional access: this runs for every active row of every turn.
    (row_id, role, content, parts, tool_calls, call_id, tool_name, tokens, created, pmid) = row[:10]
    message: Message = {"role": role, "content": json.loads(parts) if parts else content}
    if tool_calls:
        message["tool_calls"] = json.loads(tool_calls)
    if call_id is not None:
        message["tool_call_id"] = call_id
    if tool_name is not None:
        message["name"] = tool_name
    return StoredMessage(row_id, message, tokens, created, pmid, bool(row[10]), bool(row[11]))


#: The columns :func:`stored_message` reads, in its order.
MESSAGE_COLUMNS = (
    "m.id, m.role, m.content, m.parts, m.tool_calls, m.tool_call_id, m.tool_name,"
    " m.token_count, m.created_at, m.platform_message_id, m.active, m.compacted"
)
