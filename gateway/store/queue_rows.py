"""Rows that wait for their turn: the inbox's (docs/design.md#inbox) and reminders'
(docs/design.md#tools), the statements that mark them done, and the rows read back as
records."""

from __future__ import annotations

import json
from collections.abc import Sequence

from gateway.store.dialect import Handle, Row
from gateway.store.records import InboxEntry, Reminder


def inbox_entry(row: Row) -> InboxEntry:
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


async def mark_inbox_in_history(db: Handle, ids: Sequence[int]) -> None:
    if ids:
        await db.execute_many("UPDATE inbox SET in_history = 1 WHERE id = ?", [(i,) for i in ids])


async def delete_inbox(db: Handle, ids: Sequence[int]) -> None:
    if ids:
        await db.execute_many("DELETE FROM inbox WHERE id = ?", [(i,) for i in ids])


def reminder_record(row: Row) -> Reminder:
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


async def mark_reminder_sent(db: Handle, reminder_id: int, now: float) -> bool:
    """Mark a reminder delivered; False when it was not pending any more."""
    cursor = await db.execute(
        "UPDATE reminders SET sent_at = ? WHERE id = ? AND sent_at IS NULL", (now, reminder_id)
    )
    return cursor.rowcount == 1
