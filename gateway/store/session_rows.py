"""Session rows: the statements that write a session's row (its anchor, usage, engine
state) inside a view's transaction, and the row read back as a
:class:`~gateway.store.records.SessionRecord`."""

from __future__ import annotations

import json
from typing import Any

from gateway.store.dialect import Handle, Row
from gateway.store.records import AnchorRecord, Keep, SessionOrigin, SessionRecord, UsageTotals


async def insert_session(
    db: Handle,
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


async def set_anchor(db: Handle, session_id: str, anchor: AnchorRecord | None) -> None:
    await db.execute(
        f"UPDATE sessions SET {_ANCHOR_SET} WHERE id = ?", (*_anchor_values(anchor), session_id)
    )


async def move_session_on(
    db: Handle,
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


async def save_engine_state(db: Handle, session_id: str, state: dict[str, Any]) -> None:
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


def session_record(row: Row) -> SessionRecord:
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
