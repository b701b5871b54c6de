"""What each database says its own way, as the store's views need it.

The views are written once, in SQL SQLite and PostgreSQL both accept; the few statements
they cannot share come from their connection's dialect: :mod:`gateway.store.sql`
(SQLite) or :mod:`gateway.store.postgres.sql` (docs/design.md#postgresql).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
#: Statements as a coroutine function over a handle, awaiting nothing but its calls.
Body = Callable[[Any], Coroutine[Any, Any, T]]


class Dialect(Protocol):
    NAME: str
    #: Insert one message row; a None seq appends (its place is its id).
    INSERT_MESSAGE: str
    #: Archive a session's active rows except an id list (``id_list``).
    ARCHIVE_EXCEPT: str
    #: (id, seq) of an id list.
    SEQS_OF: str
    #: Drop the image bytes of rows a compaction archives, noting what they carried.
    DROP_IMAGES_OF_ARCHIVED: str
    #: Full-text search of a conversation and its chat's earlier sessions: :session, :match
    #: (``fts_query``), :summary, :limit.
    SEARCH: str
    #: Full-text search of a chat's documents, best part first: :key, :match, :scan.
    DOCUMENT_SEARCH: str
    #: {chat id: newest numeric platform message id} stored since :since on :platform.
    NEWEST_STORED_IDS: str
    #: Replies stored but not delivered, all or one :key's, oldest first.
    PENDING_DELIVERIES: str

    def fts_query(self, query: str) -> str: ...

    def id_list(self, ids: Iterable[int]) -> Any: ...


class Database(Protocol):
    """What a view holds: one database's two doors, and how it speaks.

    :meth:`transaction` yields a handle for writes in one transaction; :meth:`read` one
    for reads. A handle answers ``execute`` (``rowcount``, ``lastrowid``),
    ``execute_fetchall`` and ``executemany``, with ``?`` / ``:name`` placeholders, on
    either database. :meth:`atomically` and :meth:`snapshot` take the statements as a
    coroutine function over a handle instead, which awaits nothing but the handle's
    calls: SQLite runs it in one trip to its thread (gateway/store/trip.py).
    """

    @property
    def dialect(self) -> Dialect: ...

    def transaction(self) -> AbstractAsyncContextManager[Any]: ...

    def read(self) -> AbstractAsyncContextManager[Any]: ...

    async def atomically(self, body: Body[T]) -> T:
        """``body(handle)`` in one write transaction."""

    async def snapshot(self, body: Body[T]) -> T:
        """``body(handle)``'s reads (one snapshot on SQLite; on PostgreSQL each statement
        sees the latest commits, as :meth:`read` does)."""

    async def write_unsynced(self, statement: str) -> None:
        """Run one self-contained write (no placeholders) in a transaction that need
        not wait for the disk: it survives the process dying, not a power cut
        (docs/design.md#delivery-guarantee). On SQLite it may share the commit of
        writes arriving with it, and then their fsync."""
