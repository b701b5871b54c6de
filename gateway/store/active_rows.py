"""Each session's active rows, kept between turns and proven current by one cheap query.

A turn needs its session's whole active list; reading hundreds of rows and parsing their
JSON every turn would cost more than the turn. The rows read earlier are reused while one
query shows nothing changed under them — the same compression count (no compression
since, by any process) and the same number of active rows up to the last seq held (none
archived or erased) — and only the rows after it are read. The archive is never touched.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from gateway.store.message_rows import MESSAGE_COLUMNS, stored_message
from gateway.store.records import StoredMessage

#: Sessions whose active rows are kept between turns (least recently used go first).
ACTIVE_CACHE_SESSIONS = 256
#: A session's active rows after seq :last, each with the session's compression count
#: and how many active rows it has up to :last (one row of NULLs when none came after).
_ACTIVE_AFTER = (
    f"SELECT {MESSAGE_COLUMNS}, m.seq, v.generation, v.held FROM"
    " (SELECT (SELECT compression_count FROM sessions WHERE id = :id) AS generation,"
    " (SELECT count(*) FROM messages WHERE session_id = :id AND active = 1 AND seq <= :last)"
    " AS held) v"
    " LEFT JOIN messages m ON m.session_id = :id AND m.active = 1 AND m.seq > :last"
    " ORDER BY m.seq"
)


class ActiveRows:
    """The kept rows; see the module's docstring."""

    def __init__(self) -> None:
        # session id -> (compression count, last seq, active rows); least recent first
        self._held: OrderedDict[str, tuple[int, float, list[StoredMessage]]] = OrderedDict()

    async def read(self, db: Any, session_id: str) -> list[StoredMessage]:
        """The session's active rows in conversation order, through ``db`` (a handle):
        one statement, two when the rows held are stale. Treat the dicts as read-only.

        On SQLite this runs on its thread, inside a one-trip body: each change to the
        dict is one atomic call, and whatever it leaves there is proven again before use.
        """
        generation, last_seq, rows = self._held.pop(session_id, (-1, 0.0, []))
        key = {"id": session_id, "last": last_seq if rows else float("-inf")}
        found = await db.fetch_all(_ACTIVE_AFTER, key)
        if rows and tuple(found[0][-2:]) != (generation, len(rows)):
            rows, key["last"] = [], float("-inf")  # compacted or erased: read them all
            found = await db.fetch_all(_ACTIVE_AFTER, key)
        fetched = [row for row in found if row[0] is not None]
        rows = rows + [stored_message(row) for row in fetched]
        if fetched:
            last_seq = fetched[-1][-3]
        generation = found[0][-2]  # None: no such session
        if rows and generation is not None:
            self._held[session_id] = (generation, last_seq, rows)
            while len(self._held) > ACTIVE_CACHE_SESSIONS:
                self._held.popitem(last=False)
        return list(rows)

    def forget(self, session_id: str) -> None:
        """Drop what is held (this process just rewrote the list)."""
        self._held.pop(session_id, None)
