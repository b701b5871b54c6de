"""One asyncpg connection, speaking the small part of aiosqlite's API the store's views use.

The views (:mod:`gateway.store.conversation` and its siblings) are written once, in SQL
both databases accept, with ``?`` or ``:name`` placeholders; this handle turns those into
PostgreSQL's ``$1, $2...`` and gives back what the views read from aiosqlite: rows from
:meth:`execute_fetchall`, ``rowcount`` and ``lastrowid`` from :meth:`execute`. What the
two databases say differently (full-text search, id lists, a few functions) lives in
the dialects, :mod:`gateway.store.sql` and :mod:`gateway.store.postgres.sql`
(docs/design.md#postgresql).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import asyncpg

#: A placeholder outside quoted text: ``?`` or ``:name`` (not ``::type`` casts).
_PLACEHOLDER = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"])*\"|(?<!:):([A-Za-z_]\w*)|\?")
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


@dataclass(frozen=True)
class Result:
    """What a statement did: rows it touched, and the id of the row it inserted."""

    rowcount: int
    lastrowid: int | None = None


@lru_cache(maxsize=512)
def translate(sql: str) -> tuple[str, tuple[str, ...] | None]:
    """``sql`` with ``$n`` placeholders, and the names of ``:name`` ones in order (None
    when it uses ``?``). A repeated name reuses its number, as SQLite does."""
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


class Handle:
    """One connection inside a transaction (or a read), as the views use it."""

    def __init__(self, connection: asyncpg.Connection) -> None:
        self.connection = connection

    async def execute(self, sql: str, params: Any = ()) -> Result:
        """Run one statement. An INSERT reports the id it gave its row (``lastrowid``)."""
        query, names = translate(sql)
        arguments = _arguments(names, params)
        insert = _INSERT_INTO.match(sql)
        if insert and not _RETURNING.search(sql):
            # Counted by its returned rows: an ON CONFLICT DO NOTHING that did nothing
            # returns none, as SQLite's rowcount says 0.
            returned = ID_TABLES.get(insert.group(1).lower())
            rows = await self.connection.fetch(f"{query} RETURNING {returned or 1}", *arguments)
            last = rows[-1][0] if rows and returned else None
            return Result(len(rows), last)
        status = await self.connection.execute(query, *arguments)
        return Result(_count(status))

    async def execute_fetchall(self, sql: str, params: Any = ()) -> list[asyncpg.Record]:
        query, names = translate(sql)
        return list(await self.connection.fetch(query, *_arguments(names, params)))

    async def executemany(self, sql: str, seq_of_params: Iterable[Sequence[Any]]) -> None:
        query, names = translate(sql)
        await self.connection.executemany(query, [_arguments(names, p) for p in seq_of_params])
