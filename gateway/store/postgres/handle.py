"""One asyncpg connection as the store's :class:`~gateway.store.dialect.Handle`.

The views (:mod:`gateway.store.conversation` and its siblings) are written once, in SQL
both databases accept, with ``?`` or ``:name`` placeholders
(:func:`gateway.store.dialect.numbered` turns them into PostgreSQL's ``$1, $2...``); this
handle runs them with asyncpg's own calls (``fetch``, ``execute``, ``executemany``) and
reports an :class:`~gateway.store.dialect.Outcome`. What the two databases say
differently (full-text search, id lists, a few functions) lives in the dialects,
:mod:`gateway.store.sql` and :mod:`gateway.store.postgres.sql`
(docs/design.md#postgresql).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import asyncpg

from gateway.store.dialect import Outcome, Params, numbered

_RETURNING = re.compile(r"\bRETURNING\b", re.IGNORECASE)
_INSERT_INTO = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)", re.IGNORECASE)
#: Tables whose rows get a generated integer id (``BIGSERIAL``), and its column: an
#: INSERT reports it.
ID_TABLES = {
    "messages": "id",
    "inbox": "id",
    "reminders": "id",
    "memories": "id",
    "documents": "n",
    "document_parts": "n",
}


def storable(value: Any) -> Any:
    """``value`` as PostgreSQL's text takes it: a NUL character (which SQLite keeps and
    PostgreSQL refuses) becomes U+FFFD, so a tool result holding one cannot fail a turn."""
    if isinstance(value, str) and "\x00" in value:
        return value.replace("\x00", "\ufffd")
    return value


def _arguments(names: tuple[str, ...] | None, params: Any) -> list[Any]:
    if names is None:
        return [storable(value) for value in params or ()]
    mapping: Mapping[str, Any] = params
    return [storable(mapping[name]) for name in names]


def _count(status: str) -> int:
    """Rows an ``INSERT 0 3`` / ``UPDATE 3`` / ``DELETE 0`` status touched."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class PgHandle:
    """One connection inside a transaction (or a read), as the views use it."""

    def __init__(self, connection: asyncpg.Connection) -> None:
        self.connection = connection

    async def execute(self, sql: str, params: Params = ()) -> Outcome:
        query, names = numbered(sql)
        arguments = _arguments(names, params)
        insert = _INSERT_INTO.match(sql)
        if insert and not _RETURNING.search(sql):
            # Counted by its returned rows: an ON CONFLICT DO NOTHING that did nothing
            # returns none, as SQLite's rowcount says 0.
            returned = ID_TABLES.get(insert.group(1).lower())
            rows = await self.connection.fetch(f"{query} RETURNING {returned or 1}", *arguments)
            last = rows[-1][0] if rows and returned else None
            return Outcome(len(rows), last)
        status = await self.connection.execute(query, *arguments)
        return Outcome(_count(status))

    async def fetch_all(self, sql: str, params: Params = ()) -> list[asyncpg.Record]:
        query, names = numbered(sql)
        return list(await self.connection.fetch(query, *_arguments(names, params)))

    async def execute_many(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        query, names = numbered(sql)
        await self.connection.executemany(query, [_arguments(names, p) for p in params])
