"""Message rows: inserting them in their place in the conversation (``seq``,
docs/design.md#compression-commit), and a row read back as a
:class:`~gateway.store.records.StoredMessage` (or a search hit, or a reply owed)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

from agent.messages import Message
from gateway.store.dialect import Dialect, Handle, Row
from gateway.store.records import NewMessage, PendingDelivery, SearchHit, StoredMessage

#: The columns :func:`stored_message` reads, in its order.
MESSAGE_COLUMNS = (
    "m.id, m.role, m.content, m.parts, m.tool_calls, m.tool_call_id, m.tool_name,"
    " m.token_count, m.created_at, m.platform_message_id, m.active, m.compacted"
)


async def insert_messages(
    db: Handle,
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
    db: Handle,
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
    rows = await db.fetch_all(sql.SEQS_OF, (sql.id_list(kept),))
    seq_of = {row[0]: row[1] for row in rows}
    places = places_between([seq_of[i] if isinstance(i, int) else None for i in active])
    ids: list[int] = []
    for item, seq in zip(active, places, strict=True):
        if isinstance(item, int):
            ids.append(item)
        else:
            ids += await insert_messages(db, sql, session_id, [item], now, seqs=[seq])
    return ids


def stored_message(row: Row) -> StoredMessage:
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


def search_hit(row: Row) -> SearchHit:
    return SearchHit(
        message_id=row["id"],
        role=row["role"],
        snippet=row["snippet"],
        created_at=row["created_at"],
        archived=not row["active"],
    )


def pending_delivery(row: Row) -> PendingDelivery:
    return PendingDelivery(
        message_id=row["id"],
        session_key=row["session_key"],
        platform=row["platform"],
        chat_id=row["chat_id"],
        thread_id=row["thread_id"],
        text=row["content"] or "",
        reply_to=row["reply_to"],
    )
