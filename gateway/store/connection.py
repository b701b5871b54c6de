"""The connection under the SQLite store: one sqlite3 connection on its own thread
(WAL; gateway/store/sqlite_thread.py), one lock, migrations at open, and the transaction
discipline every write goes through. Every driver or file error a statement meets leaves
it as a :class:`StoreError` saying why (:func:`gateway.store.errors.explained`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal, Self

from gateway.store import sql as sqlite_dialect
from gateway.store.datadir_lock import DataDirLock
from gateway.store.dialect import Body, Dialect, Handle, T
from gateway.store.errors import StoreError, diagnose, explained
from gateway.store.opened import Opened
from gateway.store.schema import MIGRATIONS, SCHEMA_VERSION
from gateway.store.sqlite_files import read_only_uri, user_version
from gateway.store.sqlite_thread import SQLiteHandle, SQLiteThread
from gateway.store.trip import GroupCommit, in_one_trip

#: How :meth:`Connection.open` opens the file (see there).
Mode = Literal["exclusive", "read_only", "shared"]

#: How long a handled event's dedupe key is remembered.
SEEN_KEYS_SECONDS = 30 * 24 * 3600


def new_session_id() -> str:
    return time.strftime("%Y%m%d") + "-" + secrets.token_hex(6)


class Connection(Opened):
    """Opens ``state.db``, migrates it, and hands out transactions and reads.

    The store's views (:mod:`gateway.store.conversation`, ``scheduling``, ``operator``)
    hold one of these: every statement runs inside :meth:`transaction` (writes) or
    :meth:`read`, on a :class:`~gateway.store.dialect.Handle`.
    """

    #: What SQLite says its own way (docs/design.md#postgresql).
    dialect: Dialect = sqlite_dialect

    #: Held while open ``exclusive``: see :mod:`gateway.store.datadir_lock`.
    _datadir_lock: DataDirLock | None = None

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: SQLiteThread | None = None
        self._writing = True
        self._group: GroupCommit | None = None
        # One connection, one lock: a transaction never interleaves with another
        # coroutine's statements, and a read never sees a half-done transaction.
        self._lock = asyncio.Lock()

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self, access: Mode = "exclusive") -> Self:
        """Open ``state.db``; how depends on ``access``:

        - ``exclusive`` (a gateway or chat): locks the data dir for as long as the store is
          open (:class:`DataDirInUse` when another process holds it), creates the file,
          migrates it and makes it private.
        - ``read_only`` (``sessions list/show/export``, beside a running gateway): no lock,
          never writes.
        - ``shared`` (``sessions forget`` beside a running gateway): writes, one
          transaction at a time through WAL and the busy timeout, but never migrates.

        Anything that keeps the file from being used is a :class:`StoreError` saying why.
        """
        try:
            if access == "exclusive":
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._datadir_lock = DataDirLock.acquire(self.path.parent)
            if access != "read_only":
                _make_private(self.path)
            await self._connect(access)
        except StoreError:
            await self.close()
            raise
        except (sqlite3.Error, OSError) as exc:
            await self.close()  # the connection's thread would keep the process alive
            raise await diagnose(self.path, exc, writing=access != "read_only") from exc
        except BaseException:
            await self.close()
            raise
        return self

    async def _connect(self, access: Mode) -> None:
        self._writing = access != "read_only"
        if access == "read_only":
            self._db = await SQLiteThread.connect(read_only_uri(self.path), uri=True)
        else:
            self._db = await SQLiteThread.connect(str(self.path))
        self._group = GroupCommit(self._db, self._lock)
        db = SQLiteHandle(self._db)
        await db.execute("PRAGMA busy_timeout=5000")
        if access == "read_only":
            await self._require_current_schema()
            return
        await db.execute("PRAGMA journal_mode=WAL")
        # FULL: a message is acknowledged to its platform once stored; a power cut must
        # not take back a commit (NORMAL could, in WAL mode). One fsync per chat message.
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute("PRAGMA foreign_keys=ON")
        if access == "shared":
            await self._require_current_schema()  # only the lock holder migrates
            return
        if await user_version(db) > SCHEMA_VERSION:
            await self._require_current_schema()  # says which version wrote it
        await self._migrate()
        # Platforms redeliver within a day; a month of keys is plenty to dedupe.
        await db.execute(
            "DELETE FROM inbound_seen WHERE seen_at < ?", (time.time() - SEEN_KEYS_SECONDS,)
        )

    async def _require_current_schema(self) -> None:
        version = await user_version(SQLiteHandle(self._conn()))
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} was written by a newer nightowl (schema v{version}): upgrade"
                " nightowl to open it",
                reason="schema",
            )
        if version < SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} is at schema v{version}, older than this nightowl's"
                f" v{SCHEMA_VERSION}: (re)start the gateway with this version once (it"
                " upgrades the file), then try again",
                reason="schema",
            )

    async def close(self) -> None:
        if self._group is not None:
            await self._group.close()  # writes taken before the close are still made
        if self._db is not None:
            async with self._lock:
                await self._db.close()
            self._db = None
        self._group = None
        held, self._datadir_lock = self._datadir_lock, None
        if held is not None:
            held.release()  # after the database is closed: the next holder finds it quiet

    async def schema_version(self) -> int:
        async with self.read() as db:
            return await user_version(db)

    async def _migrate(self) -> None:
        thread = self._conn()
        db = SQLiteHandle(thread)
        async with self._lock:
            version = await user_version(db)
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} was written by a newer nightowl (schema {version});"
                    " upgrade nightowl to open it",
                    reason="schema",
                )
            for target, step in MIGRATIONS:
                if target <= version:
                    continue
                # Each migration inside its own transaction: a crash leaves the database
                # at the previous version, never half-migrated.
                try:
                    if isinstance(step, str):
                        await thread.script(
                            f"BEGIN IMMEDIATE;\n{step}\nPRAGMA user_version={target};\nCOMMIT;"
                        )
                    else:
                        await db.execute("BEGIN IMMEDIATE")
                        await step(db)
                        await db.execute(f"PRAGMA user_version={target}")
                        await db.execute("COMMIT")
                except BaseException:
                    if await thread.in_transaction():
                        await db.execute("ROLLBACK")
                    raise

    def errors(self) -> contextlib.AbstractAsyncContextManager[None]:
        """SQLite's and the file's errors inside the block as a :class:`StoreError`
        saying why (docs/design.md#errors)."""
        return explained(self.path, writing=self._writing)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Handle]:
        thread = self._conn()
        db = SQLiteHandle(thread)
        async with self.errors(), self._lock:
            # Everything shielded: a cancelled caller must still leave the connection
            # outside a transaction, or every later write would fail.
            begin = asyncio.ensure_future(db.execute("BEGIN IMMEDIATE"))
            try:
                await asyncio.shield(begin)
                yield db
            except BaseException:
                await asyncio.shield(_roll_back(thread, begin))
                raise
            await asyncio.shield(db.execute("COMMIT"))

    async def atomically(self, body: Body[T], *, synced: bool = True) -> T:
        """``body(handle)`` in one write transaction, in one trip to SQLite's thread,
        with the writes that arrive meanwhile (gateway/store/trip.py); ``synced=False``:
        no fsync of its own (kept across a crash of this process, not a power cut)."""
        async with self.errors():
            return await self._writes().run(body, synced=synced)

    async def snapshot(self, body: Body[T]) -> T:
        """``body(handle)``'s reads, in one trip, all seeing the same moment."""
        thread = self._conn()
        async with self.errors(), self._lock:
            # Once queued, the trip ends on SQLite's thread whatever becomes of its
            # caller, and whatever comes next queues behind it.
            return await in_one_trip(thread, body, begin="BEGIN")

    async def write_unsynced(self, statement: str) -> None:
        # No fsync of its own: WAL keeps the commit across a crash of this process; only
        # a power cut before the next synced commit could lose it.
        async def write(db: Any) -> None:
            await db.execute(statement)

        # Taken at once and shielded: a lane cancelled at shutdown still records what it
        # delivered (the close waits for it), or the reply would go out again after the
        # restart.
        async with self.errors():
            await asyncio.shield(self._writes().submit(write, synced=False))

    def _writes(self) -> GroupCommit:
        if self._group is None:
            raise StoreError("the store is not open")
        return self._group

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[SQLiteHandle]:
        async with self.errors(), self._lock:
            yield SQLiteHandle(self._conn())

    def _conn(self) -> SQLiteThread:
        if self._db is None:
            raise StoreError("the store is not open")
        return self._db


def _make_private(path: Path) -> None:
    """Create ``path`` 0600 if it is new, and make it and its WAL files private if not.

    Before SQLite opens it: SQLite gives a new -wal and -shm the mode of the database
    file, so a database private before its first connection has private WAL files from
    their first write — they hold recent chat text (docs/design.md#private-files).
    """
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        # Left readable by an older version; not ours to change: SQLite reports what it must.
        with contextlib.suppress(OSError):
            if file.stat().st_mode & 0o077:
                file.chmod(0o600)


async def _roll_back(thread: SQLiteThread, begin: asyncio.Future[Any]) -> None:
    with contextlib.suppress(Exception):  # BEGIN itself failed: nothing to roll back
        await begin
    if await thread.in_transaction():
        await thread.run(lambda connection: connection.execute("ROLLBACK"))
