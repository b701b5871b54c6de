"""The one place the backend is chosen: ``store.backend`` in the config names SQLite
(``<data_dir>/state.db``) or PostgreSQL (``store.dsn``), and :func:`open_store` gives
the gateway, every ``nightowl`` command, doctor, migrate and the dashboard that store
(docs/design.md#postgresql).

What a store is opened for (its :data:`Access`):

- ``exclusive``: a gateway or chat. SQLite locks the data dir, creates and migrates the
  file; PostgreSQL locks the data dir too (each replica has its own) and migrates under
  an advisory lock.
- ``read`` and ``write``: an operator's command. With no gateway running, SQLite opens
  as a gateway would (locked); beside one, ``read`` opens the file read-only and
  ``write`` through WAL and the busy timeout, one transaction at a time, never
  migrating. PostgreSQL is always shared with the replicas (a few connections, no
  migration).
- ``read_only`` and ``shared``: those two, asked for directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from gateway.store.backend import Store

if TYPE_CHECKING:
    from gateway.config.schema import Config

Backend = Literal["sqlite", "postgres"]


def open_store(config: Config, *, backend: Backend | None = None, dsn: str | None = None) -> Store:
    """The store ``config`` names, not connected yet: ``await store.open(access)`` (or
    ``async with``) connects. ``backend`` and ``dsn`` override the config's
    (``nightowl migrate`` reads SQLite and writes the PostgreSQL database ``--to`` names)."""
    chosen = backend or ("postgres" if dsn else config.store.backend)
    if chosen == "postgres":
        from gateway.store.postgres import PostgresStore  # asyncpg only when used

        where = dsn or config.store.dsn
        if where is None:  # the config check requires a DSN with postgres
            raise ValueError("store.backend: postgres needs store.dsn")
        # The config's own database is this gateway's: its data dir is locked when it is
        # opened for a gateway (``migrate --to`` writes another and locks nothing).
        data_dir = None if dsn else config.data_dir
        return PostgresStore(where, pool_size=config.store.pool_size, data_dir=data_dir)
    from gateway.store.sqlite import SQLiteStore

    return SQLiteStore(config.database_path)


def missing_database(config: Config) -> Path | None:
    """Where the database should be when it is not there yet (SQLite before the first
    start); None when there is one to open (PostgreSQL is asked when connecting)."""
    if config.store.shared:
        return None
    path = config.database_path
    return None if path.exists() else path
