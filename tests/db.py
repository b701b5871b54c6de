"""A test's direct view of state.db, the way an operator's ``sqlite3`` shell sees it: to
check what the gateway stored, or to change the file behind its back (a damaged row, an
old schema, a held write lock). Product code reaches the database only through
gateway.store; tests reach it raw only through these helpers.

Every helper takes ``where``: the database file, the data dir that holds ``state.db``, or
a :class:`Config`. The file must exist (a mistyped path fails instead of creating an
empty database) unless ``create=True``.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gateway.config.schema import Config

Where = Path | Config


def database_file(where: Where) -> Path:
    if isinstance(where, Config):
        return where.database_path
    return where / "state.db" if where.is_dir() else where


@contextlib.contextmanager
def connect(where: Where, *, create: bool = False) -> Iterator[sqlite3.Connection]:
    """A connection to the database, committed when the block ends cleanly (rolled back
    otherwise) and always closed."""
    mode = "rwc" if create else "rw"
    db = sqlite3.connect(f"file:{database_file(where)}?mode={mode}", uri=True)
    try:
        with db:
            yield db
    finally:
        db.close()


def rows(where: Where, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Every row ``sql`` selects."""
    with connect(where) as db:
        return db.execute(sql, params).fetchall()


def value(where: Where, sql: str, *params: Any) -> Any:
    """The single value of the single row ``sql`` selects (e.g. a count)."""
    [(result,)] = rows(where, sql, *params)
    return result


def execute(where: Where, sql: str, *params: Any) -> None:
    """One change, committed (as if typed into a shell beside the gateway)."""
    with connect(where) as db:
        db.execute(sql, params)


@contextlib.contextmanager
def write_locked(where: Where) -> Iterator[None]:
    """Hold the database's write lock (a stalled disk, another writer): nothing the
    gateway writes can be stored until the block ends."""
    db = sqlite3.connect(database_file(where), isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


def session_rows(where: Where, session_key: str) -> list[tuple[str, str, int]]:
    """(role, content, active) of the key's conversation rows, oldest first: every
    session the key had, archived rows included, the system prompt left out."""
    return rows(
        where,
        "SELECT m.role, m.content, m.active FROM messages m"
        " JOIN sessions s ON s.id = m.session_id"
        " WHERE s.session_key = ? AND m.role != 'system' ORDER BY m.id",
        session_key,
    )


def session_keys(where: Where) -> list[str]:
    """Every session key with a session in the database, sorted."""
    found = rows(where, "SELECT DISTINCT session_key FROM sessions ORDER BY session_key")
    return [key for (key,) in found]


def session_ends(where: Where) -> list[str | None]:
    """Why each session ended, oldest first (None: the one still open)."""
    return [
        reason for (reason,) in rows(where, "SELECT end_reason FROM sessions ORDER BY created_at")
    ]


def stored_messages(where: Where, role: str | None = None) -> list[tuple[str, int, int]]:
    """(content, active, compacted) of every message row, oldest first; ``role``'s only
    when given. Active rows are the context; compacted ones the archive."""
    sql = "SELECT content, active, compacted FROM messages"
    if role is None:
        return rows(where, sql + " ORDER BY id")
    return rows(where, sql + " WHERE role = ? ORDER BY id", role)
