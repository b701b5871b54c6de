"""The connection under the PostgreSQL store: an asyncpg pool, migrations at open, and
the same two doors every statement goes through as on SQLite — :meth:`transaction` for
writes, :meth:`read` for reads (docs/design.md#postgresql). Every driver or network
error a statement meets leaves it as a :class:`StoreError` saying why
(:func:`mapped_errors`).

asyncpg is the driver: the fastest asyncio client for PostgreSQL, kept by the team that
wrote uvloop, and with no blocking calls on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Literal, Self

import asyncpg

from gateway.store.datadir_lock import DataDirLock
from gateway.store.dialect import Body, Dialect, T
from gateway.store.errors import StoreError
from gateway.store.opened import Opened
from gateway.store.postgres import sql as postgres_dialect
from gateway.store.postgres.handle import PgHandle
from gateway.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION

Mode = Literal["exclusive", "read_only", "shared"]
#: What asyncpg raises when the server, the network or the pool fails a statement.
DRIVER_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)
#: Held inside the migration transaction: replicas starting together migrate once.
MIGRATION_LOCK = 7_104_115_101  # "nightowl" in spirit: any constant the app owns


def display(dsn: str) -> str:
    """The DSN without its password, for messages and logs."""
    parts = urllib.parse.urlsplit(dsn)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = netloc.replace(f":{parts.password}@", ":***@")
    query = re.sub(r"(?i)(^|&)([^=&]*pass[^=&]*=)[^&]*", r"\1\2***", parts.query)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


@contextlib.contextmanager
def mapped_errors(where: str) -> Iterator[None]:
    """The driver's and the network's errors inside the block as a :class:`StoreError`
    naming the database (without its password) and what went wrong."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        raise StoreError(f"PostgreSQL at {where} failed: {_said(exc)}") from exc


def _said(exc: BaseException) -> str:
    if isinstance(exc, asyncpg.PostgresError):
        return f"{exc} ({type(exc).__name__})"
    return str(exc) or type(exc).__name__


def _lock(data_dir: Path) -> DataDirLock:
    """The gateway's own data dir, locked (:class:`DataDirInUse` when another has it)."""
    try:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return DataDirLock.acquire(data_dir)
    except OSError as error:  # not PostgreSQL's: the data dir's own trouble
        raise StoreError(
            f"cannot lock the data dir {data_dir}: {error.strerror or error} (each gateway"
            " needs a writable data_dir of its own, on PostgreSQL too)"
        ) from error


class PgConnection(Opened):
    """A pool of connections to one PostgreSQL database, shared by the store's views."""

    #: What PostgreSQL says its own way (docs/design.md#postgresql).
    dialect: Dialect = postgres_dialect

    def __init__(self, dsn: str, *, pool_size: int = 10, data_dir: Path | None = None) -> None:
        self.dsn = dsn
        self.pool_size = pool_size
        #: The gateway's own files (its secrets, its log): one gateway per data dir on
        #: PostgreSQL too, each replica with its own (gateway/store/datadir_lock.py).
        self.data_dir = data_dir
        self._datadir_lock: DataDirLock | None = None
        self._pool: asyncpg.Pool | None = None

    @property
    def path(self) -> str:
        """Where the data is, for people to read (no password)."""
        return display(self.dsn)

    async def open(self, access: Mode = "exclusive") -> Self:
        """Connect; a gateway (``exclusive``) migrates, the CLI (``read_only``,
        ``shared``) only checks the schema is the one it knows."""
        try:
            if access == "exclusive" and self.data_dir is not None:
                self._datadir_lock = _lock(self.data_dir)
            self._pool = await asyncpg.create_pool(
                self.dsn, min_size=1, max_size=self.pool_size, command_timeout=60
            )
            if access == "exclusive":
                await self._migrate()
            else:
                await self._require_current_schema()
        except StoreError:
            await self.close()
            raise
        except DRIVER_ERRORS as exc:
            await self.close()
            raise StoreError(f"cannot use PostgreSQL at {self.path}: {_said(exc)}") from exc
        return self

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        try:
            if pool is not None:
                await pool.close()
        finally:
            held, self._datadir_lock = self._datadir_lock, None
            if held is not None:
                held.release()

    async def schema_version(self) -> int:
        async with self.read() as db:
            return await _version(db.connection)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgHandle]:
        with mapped_errors(self.path):
            async with self._acquire() as connection, connection.transaction():
                yield PgHandle(connection)

    async def atomically(self, body: Body[T], *, synced: bool = True) -> T:
        async with self.transaction() as db:
            if not synced:  # the commit does not wait for PostgreSQL's WAL flush
                await db.execute("SET LOCAL synchronous_commit = off")
            return await body(db)

    async def snapshot(self, body: Body[T]) -> T:
        async with self.read() as db:
            return await body(db)

    async def write_unsynced(self, statement: str) -> None:
        # synchronous_commit off: the commit does not wait for PostgreSQL's WAL flush.
        # Shielded: a lane cancelled at shutdown still records what it delivered.
        with mapped_errors(self.path):
            await asyncio.shield(self._unsynced(statement))

    async def _unsynced(self, statement: str) -> None:
        async with self._acquire() as connection, connection.transaction():
            await connection.execute(f"SET LOCAL synchronous_commit = off; {statement}")

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[PgHandle]:
        with mapped_errors(self.path):
            async with self._acquire() as connection:
                yield PgHandle(connection)

    @contextlib.asynccontextmanager
    async def raw(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection outside any transaction (LISTEN, advisory locks, a copy)."""
        with mapped_errors(self.path):
            async with self._acquire() as connection:
                yield connection

    async def vacuum(self, tables: Iterable[str]) -> None:
        """Reclaim the tables' dead rows (outside a transaction, as VACUUM must run)."""
        async with self.raw() as connection:
            for table in tables:
                await connection.execute(f"VACUUM {table}")

    def _acquire(self) -> contextlib.AbstractAsyncContextManager[asyncpg.Connection]:
        if self._pool is None:
            raise StoreError("the store is not open")
        return self._pool.acquire()

    async def _migrate(self) -> None:
        async with self._acquire() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            await connection.execute(
                "CREATE TABLE IF NOT EXISTS nightowl_schema (version INTEGER NOT NULL)"
            )
            version = await _version(connection)
            _refuse_newer(version, self.path)
            for target, script in MIGRATIONS:
                if target > version:
                    await connection.execute(script)
            await connection.execute("DELETE FROM nightowl_schema")
            await connection.execute(
                "INSERT INTO nightowl_schema(version) VALUES ($1)", max(version, SCHEMA_VERSION)
            )

    async def _require_current_schema(self) -> None:
        async with self._acquire() as connection:
            version = await stored_version(connection)
        if version is None:
            raise StoreError(
                f"{self.path} holds no nightowl tables yet: start the gateway once", reason="empty"
            )
        _refuse_newer(version, self.path)
        if version < SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} is at schema v{version}, older than this nightowl's"
                f" v{SCHEMA_VERSION}: (re)start the gateway with this version once (it"
                " upgrades the database), then try again",
                reason="schema",
            )


async def _version(connection: asyncpg.Connection) -> int:
    value = await connection.fetchval("SELECT max(version) FROM nightowl_schema")
    return int(value or 0)


async def stored_version(connection: asyncpg.Connection) -> int | None:
    """The schema version nightowl's tables are at; None: the database holds none."""
    if await connection.fetchval("SELECT to_regclass('nightowl_schema')") is None:
        return None
    return await _version(connection)


def _refuse_newer(version: int, where: str) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where} was written by a newer nightowl (schema v{version}): upgrade nightowl",
            reason="schema",
        )
