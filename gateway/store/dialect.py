"""How the store's views talk to either database: the :class:`Handle` they run
statements on, the placeholder convention, and what each database says its own way.

The views are written once, in SQL SQLite and PostgreSQL both accept; the few statements
they cannot share come from their connection's dialect: :mod:`gateway.store.sql`
(SQLite) or :mod:`gateway.store.postgres.sql` (docs/design.md#postgresql).

**Placeholders.** Statements use SQLite's ``?`` (positional) or ``:name`` (named)
placeholders. SQLite reads them as they are; for PostgreSQL :func:`numbered` is the one
function that turns them into ``$1, $2...``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
#: Statements as a coroutine function over a :class:`Handle`, awaiting nothing but its
#: calls.
Body = Callable[[Any], Coroutine[Any, Any, T]]
#: A row read: by column name (``row["id"]``) and by position (``row[0]``).
Row = Any
#: A statement's parameters: a sequence for ``?``, a mapping for ``:name``.
Params = Any


@dataclass(frozen=True)
class Outcome:
    """What a statement did: rows it touched, and the id of the row it inserted."""

    rowcount: int
    lastrowid: int | None = None


class Handle(Protocol):
    """One connection inside a transaction (or a read), as the views use it: the store's
    own small interface, which each backend implements over its driver."""

    async def execute(self, sql: str, params: Params = ()) -> Outcome:
        """Run one statement; an INSERT reports the id it gave its row."""
        ...

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        """Every row the statement returns."""
        ...

    async def execute_many(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        """The statement once for each parameter set."""
        ...


#: A placeholder outside quoted text: ``?`` or ``:name`` (not ``::type`` casts).
_PLACEHOLDER = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"])*\"|(?<!:):([A-Za-z_]\w*)|\?")


@lru_cache(maxsize=512)
def numbered(sql: str) -> tuple[str, tuple[str, ...] | None]:
    """``sql`` with PostgreSQL's ``$n`` placeholders, and the names of its ``:name`` ones
    in order (None when it uses ``?``). A repeated name reuses its number, as SQLite
    does."""
    names: list[str] = []
    positional = 0

    def number(match: re.Match[str]) -> str:
        nonlocal positional
        text = match.group(0)
        if text.startswith(("'", '"')):
            return text
        name = match.group(1)
        if name is None:
            positional += 1
            return f"${positional}"
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    converted = _PLACEHOLDER.sub(number, sql)
    return converted, (tuple(names) if names else None)


class Dialect(Protocol):
    NAME: str
    #: Insert one message row; a None seq appends (its place is its id).
    INSERT_MESSAGE: str
    #: Archive a session's active rows except an id list (``id_list``).
    ARCHIVE_EXCEPT: str
    #: (id, seq) of an id list.
    SEQS_OF: str
    #: Drop the image bytes of rows a compression archives, noting what they carried.
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
    #: Run first in a budget check's transaction, so that checks run one at a time
    #: across replicas (none where the database's one writer already sees to it).
    SERIALIZE_BUDGETS: tuple[str, ...]

    def fts_query(self, query: str) -> str: ...

    def id_list(self, ids: Iterable[int]) -> Any: ...


class Database(Protocol):
    """What a view holds: one database's two doors, and how it speaks.

    :meth:`transaction` yields a :class:`Handle` for writes in one transaction;
    :meth:`read` one for reads. :meth:`atomically` and :meth:`snapshot` take the
    statements as a coroutine function over a handle instead, which awaits nothing but
    the handle's calls: SQLite runs it in one trip to its thread (gateway/store/trip.py).
    A driver's or the file's error in any of them reaches the caller as a
    :class:`~gateway.store.errors.StoreError`.
    """

    @property
    def dialect(self) -> Dialect: ...

    def transaction(self) -> AbstractAsyncContextManager[Handle]: ...

    def read(self) -> AbstractAsyncContextManager[Handle]: ...

    async def atomically(self, body: Body[T], *, synced: bool = True) -> T:
        """``body(handle)`` in one write transaction; ``synced=False``: one that need not
        wait for the disk, as :meth:`write_unsynced`."""

    async def snapshot(self, body: Body[T]) -> T:
        """``body(handle)``'s reads (one snapshot on SQLite; on PostgreSQL each statement
        sees the latest commits, as :meth:`read` does)."""

    async def write_unsynced(self, statement: str) -> None:
        """Run one self-contained write (no placeholders) in a transaction that need
        not wait for the disk: it survives the process dying, not a power cut
        (docs/design.md#delivery-guarantee). On SQLite it may share the commit of
        writes arriving with it, and then their fsync."""
