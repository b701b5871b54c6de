"""Migration 5: rows get their place in the conversation (``seq``), and the copies older
versions wrote at every compaction are removed, keeping the earliest
(docs/design.md#compression-commit).

Before version 5 a compaction archived every active row and inserted the kept ones
again as new rows, so a message that stayed in the tail through seven compactions was
stored eight times, each copy with a later time. Those copies are recognisable: one
compaction's rows were all written with the same timestamp as its summary row, in the
order originals, head, summary, tail. A head or tail row of such a batch that has an
identical row earlier in the session is a copy of it; so is a tail row that was cut
into an excerpt (it begins with its original's beginning). The copy goes; when it was
the active one, its original takes its place (active again, at the copy's seq).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gateway.store.dialect import Handle

SUMMARY_PREFIX = "[CONTEXT COMPACTION]"
#: How versions before 5 marked a tail row they cut into an excerpt.
OLD_EXCERPT_MARK = "\n\n[nightowl: this message was "

_STATEMENTS = (
    "ALTER TABLE messages ADD COLUMN seq REAL",
    "UPDATE messages SET seq = id",
    "DROP INDEX messages_active",
    "CREATE INDEX messages_active ON messages(session_id, active, seq)",
)

_COLUMNS = "id, role, content, parts, tool_calls, tool_call_id, tool_name, created_at, active, seq"


async def migrate(db: Handle) -> None:
    for statement in _STATEMENTS:
        await db.execute(statement)
    sessions = await db.fetch_all(
        "SELECT DISTINCT session_id FROM messages WHERE content LIKE ?", (SUMMARY_PREFIX + "%",)
    )
    for (session_id,) in sessions:
        await _remove_copies(db, session_id)


async def _remove_copies(db: Handle, session_id: str) -> None:
    rows = [
        dict(row)
        for row in await db.fetch_all(
            f"SELECT {_COLUMNS} FROM messages WHERE session_id = ? ORDER BY id", (session_id,)
        )
    ]
    by_time: dict[float, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_time[row["created_at"]].append(row)
    batches = sorted(
        (batch for batch in by_time.values() if any(_is_summary(r) for r in batch)),
        key=lambda batch: batch[0]["id"],
    )
    moved: dict[int, int] = {}
    for batch in batches:  # oldest first: a later copy then finds the original itself
        earlier = [r for r in rows if r["id"] < batch[0]["id"] and r["id"] not in moved]
        latest = {_key(row): row for row in earlier}
        for copy in _candidates(batch):
            original = _original_of(copy, latest, earlier)
            if original is None:
                continue
            if copy["active"]:
                await db.execute(
                    "UPDATE messages SET active = 1, compacted = 0, seq = ? WHERE id = ?",
                    (copy["seq"], original["id"]),
                )
            await db.execute("DELETE FROM messages WHERE id = ?", (copy["id"],))
            moved[copy["id"]] = original["id"]
    if moved:
        await db.execute_many(
            "UPDATE sessions SET anchor_message_id = ? WHERE id = ? AND anchor_message_id = ?",
            [(new, session_id, old) for old, new in moved.items()],
        )


def _is_summary(row: dict[str, Any]) -> bool:
    return row["role"] in ("user", "assistant") and str(row["content"] or "").startswith(
        SUMMARY_PREFIX
    )


def _key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (
        row["role"],
        row["content"],
        row["parts"],
        row["tool_calls"],
        row["tool_call_id"],
        row["tool_name"],
    )


def _candidates(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The head and tail rows of one compaction's batch (its originals come first)."""
    summary = next(i for i, row in enumerate(batch) if _is_summary(row))
    head = next((i for i, row in enumerate(batch[:summary]) if row["role"] == "system"), summary)
    return batch[head:summary] + batch[summary + 1 :]


def _original_of(
    copy: dict[str, Any],
    latest: dict[tuple[Any, ...], dict[str, Any]],
    earlier: list[dict[str, Any]],
) -> dict[str, Any] | None:
    same = latest.get(_key(copy))
    if same is not None:
        return same  # the row that was active when this copy was written
    content = str(copy["content"] or "")
    if OLD_EXCERPT_MARK not in content:
        return None
    beginning = content.split(OLD_EXCERPT_MARK, 1)[0]
    for row in reversed(earlier):
        if row["role"] == copy["role"] and str(row["content"] or "").startswith(beginning):
            return row
    return None
