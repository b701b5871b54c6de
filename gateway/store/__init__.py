"""Session storage: the only package that speaks SQL.

The gateway types against the protocols in :mod:`gateway.store.protocols`
(:class:`ConversationStore`, :class:`SchedulingStore`, :class:`OperatorStore`,
:class:`PairingStore` and the others) and :class:`Store` (gateway/store/backend.py);
:func:`open_store` (gateway/store/opening.py) gives the backend the config names —
:class:`SQLiteStore` (sqlite3 on a thread of its own, WAL) or PostgreSQL's
(:mod:`gateway.store.postgres`, asyncpg). Every driver, and every SQL statement, lives in
this package (tests/test_house.py checks it). The rules every backend keeps are in
docs/design.md#storage:

- No row is ever deleted by compression, hygiene, a failed compression or a crash, and
  none is copied: a compression archives the rows that leave the active list
  (``active=0, compacted=1``), keeps the ones that stay (same id, same time) and inserts
  only what is new, in ONE transaction. Only ``OperatorStore.forget`` deletes.
- A turn reads ``active=1`` rows in conversation order (``seq``) through
  ``(session_id, active, seq)``; the archive is never read on the hot path.
- An inbound message is durable once ``enqueue`` returns; it leaves the inbox in the
  transaction that stores its turn's reply, so a crash mid-turn re-runs the turn.
"""

from gateway.store import protocols, records
from gateway.store.backend import Access, Store
from gateway.store.connection import SEEN_KEYS_SECONDS
from gateway.store.cost_records import CostHold, CostLine, CostRecord
from gateway.store.errors import DataDirInUse, SessionEnded, StoreError
from gateway.store.opening import open_store
from gateway.store.protocols import *  # noqa: F403 (what its __all__ names)
from gateway.store.records import *  # noqa: F403 (what its __all__ names)
from gateway.store.sqlite import SQLiteStore

__all__ = [
    "SEEN_KEYS_SECONDS",
    "Access",
    "CostHold",
    "CostLine",
    "CostRecord",
    "DataDirInUse",
    "SQLiteStore",
    "SessionEnded",
    "Store",
    "StoreError",
    "open_store",
    *protocols.__all__,
    *records.__all__,
]
