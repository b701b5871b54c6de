"""Long-term memory notes, on either database (:class:`~gateway.store.protocols.MemoryStore`,
docs/design.md#memory). Written in SQL that PostgreSQL reads alike."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from gateway.store.dialect import Database
from gateway.store.records import MemoryEntry, MemoryOwner, NewMemory

_COLUMNS = (
    "id, scope, owner, text, created_at, last_used_at, session_id, platform_message_id,"
    " learned_by, archived_at, replaced_by"
)
_WORD = re.compile(r"\w+", re.UNICODE)
#: A search looks for at most this many words.
MAX_SEARCH_WORDS = 8


class SqlMemory:
    """:class:`~gateway.store.protocols.MemoryStore` on a :class:`Connection`."""

    def __init__(self, connection: Database) -> None:
        self.connection = connection

    async def remember(
        self, note: NewMemory, *, replaces: int | None = None
    ) -> tuple[MemoryEntry, bool]:
        now = time.time()
        scope, owner = note.owner
        async with self.connection.transaction() as db:
            same = list(
                await db.fetch_all(
                    "SELECT id FROM memories WHERE scope = ? AND owner = ?"
                    " AND archived_at IS NULL AND lower(text) = lower(CAST(? AS TEXT))"
                    " ORDER BY id LIMIT 1",
                    (scope, owner, note.text),
                )
            )
            if same:
                memory_id, new = int(same[0][0]), False
                await db.execute(
                    "UPDATE memories SET last_used_at = ? WHERE id = ?", (now, memory_id)
                )
            else:
                cursor = await db.execute(
                    "INSERT INTO memories(scope, owner, text, created_at, last_used_at,"
                    " session_id, platform_message_id, learned_by)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        scope,
                        owner,
                        note.text,
                        now,
                        now,
                        note.session_id,
                        note.platform_message_id,
                        note.learned_by,
                    ),
                )
                memory_id, new = int(cursor.lastrowid or 0), True
            if replaces is not None and replaces != memory_id:
                await db.execute(
                    "UPDATE memories SET archived_at = ?, replaced_by = ? WHERE id = ?"
                    " AND scope = ? AND owner = ? AND archived_at IS NULL",
                    (now, memory_id, replaces, scope, owner),
                )
            rows = await db.fetch_all(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
        return _entry(next(iter(rows))), new

    async def memories(
        self, owners: Sequence[MemoryOwner] | None = None, *, archived: bool = False
    ) -> list[MemoryEntry]:
        where, params = _of(owners)
        if not archived:
            where += " AND archived_at IS NULL"
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                f"SELECT {_COLUMNS} FROM memories WHERE {where}"
                " ORDER BY last_used_at DESC, id DESC",
                params,
            )
        return [_entry(row) for row in rows]

    async def get_memory(self, memory_id: int) -> MemoryEntry | None:
        async with self.connection.read() as db:
            rows = list(
                await db.fetch_all(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,))
            )
        return _entry(rows[0]) if rows else None

    async def search_memories(
        self, owners: Sequence[MemoryOwner], query: str, limit: int = 5
    ) -> list[MemoryEntry]:
        words = [w.lower() for w in _WORD.findall(query)][:MAX_SEARCH_WORDS]
        if not words or not owners:
            return []
        where, params = _of(owners)
        for word in words:
            where += " AND lower(text) LIKE ? ESCAPE '\\'"
            params.append("%" + word.replace("\\", "\\\\").replace("_", "\\_") + "%")
        async with self.connection.transaction() as db:
            rows = list(
                await db.fetch_all(
                    f"SELECT {_COLUMNS} FROM memories WHERE {where}"
                    " ORDER BY archived_at IS NOT NULL, last_used_at DESC, id DESC"
                    f" LIMIT {int(limit)}",
                    params,
                )
            )
            found = [_entry(row) for row in rows]
            if found:
                marks = ",".join("?" * len(found))
                await db.execute(
                    f"UPDATE memories SET last_used_at = ? WHERE id IN ({marks})"
                    " AND archived_at IS NULL",
                    [time.time(), *(entry.id for entry in found)],
                )
        return found

    async def forget_memory(self, memory_id: int) -> int:
        async with self.connection.transaction() as db:
            versions = await db.fetch_all(
                "WITH RECURSIVE versions(id) AS (SELECT CAST(? AS BIGINT) UNION"
                " SELECT m.id FROM memories m JOIN versions v ON m.replaced_by = v.id)"
                " SELECT id FROM versions",
                (memory_id,),
            )
            ids = [int(row[0]) for row in versions]
            marks = ",".join("?" * len(ids))
            cursor = await db.execute(f"DELETE FROM memories WHERE id IN ({marks})", ids)
        return cursor.rowcount

    async def forget_memories(self, owner: MemoryOwner) -> int:
        async with self.connection.transaction() as db:
            cursor = await db.execute(
                "DELETE FROM memories WHERE scope = ? AND owner = ?", tuple(owner)
            )
        return cursor.rowcount


def _of(owners: Sequence[MemoryOwner] | None) -> tuple[str, list[Any]]:
    """A WHERE clause matching ``owners`` (None: everyone's), and its parameters."""
    if owners is None:
        return "1 = 1", []
    if not owners:
        return "1 = 0", []
    clause = " OR ".join("(scope = ? AND owner = ?)" for _ in owners)
    return f"({clause})", [value for owner in owners for value in owner]


def _entry(row: Any) -> MemoryEntry:
    return MemoryEntry(
        id=int(row["id"]),
        owner=MemoryOwner(row["scope"], row["owner"]),
        text=row["text"],
        created_at=float(row["created_at"]),
        last_used_at=float(row["last_used_at"]),
        session_id=row["session_id"],
        platform_message_id=row["platform_message_id"],
        learned_by=row["learned_by"],
        archived_at=None if row["archived_at"] is None else float(row["archived_at"]),
        replaced_by=row["replaced_by"],
    )
