"""The connection under the SQLite store: one aiosqlite connection (WAL), one lock,
migrations at open, and the transaction discipline every write goes through."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Self

import aiosqlite

from gateway.store.rows import (
    user_version,
)
from gateway.store.schema import MIGRATIONS, SCHEMA_VERSION

#: How long a handled event's dedupe key is remembered.
SEEN_KEYS_SECONDS = 30 * 24 * 3600


def new_session_id() -> str:
    return time.strftime("%Y%m%d") + "-" + secrets.token_hex(6)


class Connection:
    """Opens ``state.db``, migrates it, and hands out transactions and reads."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: aiosqlite.Connection | None = None
        # One connection, one lock: a transaction never interleaves with another
        # coroutine's statements, and a read never sees a half-done transaction.
        self._lock = asyncio.Lock()

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = await aiosqlite.connect(self.path, isolation_level=None)
        self._db.row_factory = aiosqlite.Row
        await self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: a message is acknowledged to its platform once stored; a power cut must
        # not take back a commit (NORMAL could, in WAL mode). One fsync per chat message.
        await self._db.execute("PRAGMA synchronous=FULL")
        await self._db.execute("PRAGMA foreign_keys=ON")
        await self._db.execute("PRAGMA busy_timeout=5000")
        try:
            await self._migrate()
            # Platforms redeliver within a day; a month of keys is plenty to dedupe.
            await self._db.execute(
                "DELETE FROM inbound_seen WHERE seen_at < ?", (time.time() - SEEN_KEYS_SECONDS,)
            )
        except BaseException:
            await self.close()  # aiosqlite's worker thread would keep the process alive
            raise
        with contextlib.suppress(OSError):
            self.path.chmod(0o600)  # transcripts are private
        return self

    async def close(self) -> None:
        if self._db is not None:
            async with self._lock:
                await self._db.close()
            self._db = None

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def schema_version(self) -> int:
        async with self._read() as db:
            return await user_version(db)

    async def _migrate(self) -> None:
        db = self._conn()
        async with self._lock:
            version = await user_version(db)
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self.path} was written by a newer nightowl (schema {version});"
                    " upgrade nightowl to open it"
                )
            for target, step in MIGRATIONS:
                if target <= version:
                    continue
                # Each migration inside its own transaction: a crash leaves the database
                # at the previous version, never half-migrated.
                try:
                    if isinstance(step, str):
                        await db.executescript(
                            f"BEGIN IMMEDIATE;\n{step}\nPRAGMA user_version={target};\nCOMMIT;"
                        )
                    else:
                        await db.execute("BEGIN IMMEDIATE")
                        await step(db)
                        await db.execute(f"PRAGMA user_version={target}")
                        await db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        await db.execute("ROLLBACK")
                    raise

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        db = self._conn()
        async with self._lock:
            # Everything shielded: a cancelled caller must still leave the connection
            # outside a transaction, or every later write would fail.
            begin = asyncio.ensure_future(db.execute("BEGIN IMMEDIATE"))
            try:
                await asyncio.shield(begin)
                yield db
            except BaseException:
                await asyncio.shield(_roll_back(db, begin))
                raise
            await asyncio.shield(db.execute("COMMIT"))

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            yield self._conn()

    def _conn(self) -> aiosqlite.Connection:
        if self._db is None:
            raise RuntimeError("store is not open")
        return self._db


async def _roll_back(db: aiosqlite.Connection, begin: asyncio.Future[Any]) -> None:
    with contextlib.suppress(Exception):  # BEGIN itself failed: nothing to roll back
        await begin
    if db.in_transaction:
        await db.execute("ROLLBACK")
