"""Session storage: the only package that speaks SQL.

:class:`Store` is the interface the gateway uses (a PostgreSQL backend would implement
the same methods); :class:`SQLiteStore` implements it with aiosqlite in WAL mode.

Invariants kept here (SPEC S1–S5):

- No row of a session is ever deleted by compression, hygiene, a failed compression or a
  crash, and none is copied: compaction archives the rows that leave the active list
  (``active=0, compacted=1``), keeps the ones that stay (same id, same time) and inserts
  only what is new (the summary), in ONE transaction. Only :meth:`Store.forget`
  deletes, on a user's explicit request.
- Loading a turn's history reads ``active=1`` rows in conversation order (``seq``)
  through ``(session_id, active, seq)``; the archive is never read on the hot path.
- An inbound message is durable once :meth:`Store.enqueue` returns: it waits in the
  ``inbox`` until its session's lane takes it into a turn, and leaves the inbox in the
  same transaction that stores the turn's reply (so a crash mid-turn re-runs the turn).
"""

from gateway.store.errors import DataDirInUse, SessionEnded, StoreError
from gateway.store.records import (
    KEEP,
    AnchorRecord,
    Compaction,
    DatabaseReport,
    IdleSession,
    InboxEntry,
    NewMessage,
    PendingDelivery,
    Reminder,
    SearchHit,
    SessionOrigin,
    SessionRecord,
    SessionSummary,
    Store,
    StoredMessage,
    UsageTotals,
)
from gateway.store.sqlite import SQLiteStore

__all__ = [
    "KEEP",
    "AnchorRecord",
    "Compaction",
    "DataDirInUse",
    "DatabaseReport",
    "IdleSession",
    "InboxEntry",
    "NewMessage",
    "PendingDelivery",
    "Reminder",
    "SQLiteStore",
    "SearchHit",
    "SessionEnded",
    "SessionOrigin",
    "SessionRecord",
    "SessionSummary",
    "Store",
    "StoreError",
    "StoredMessage",
    "UsageTotals",
]
