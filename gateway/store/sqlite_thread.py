"""SQLite's driver as the store uses it: one ``sqlite3`` connection on a thread of its own.

``sqlite3`` blocks, so the connection lives on one worker thread and every call is a trip
there (:meth:`SQLiteThread.run`); a trip, once on its way, runs to its end whatever
becomes of the coroutine that asked (a cancelled caller cannot cut a transaction in
half). :class:`SQLiteHandle` is the store's :class:`~gateway.store.dialect.Handle` over
it, one trip per statement; gateway/store/trip.py runs a whole transaction in one trip
(docs/design.md#one-trip).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self, TypeVar

from gateway.store.dialect import Outcome, Params, Row

T = TypeVar("T")
#: What SQLite and the file under it raise.
DRIVER_ERRORS = (sqlite3.Error, OSError)


class SQLiteThread:
    """A ``sqlite3`` connection and the one thread that uses it."""

    def __init__(self, connection: sqlite3.Connection, executor: ThreadPoolExecutor) -> None:
        self._connection = connection
        self._executor = executor

    @classmethod
    async def connect(cls, database: str, *, uri: bool = False) -> Self:
        """Open ``database`` in autocommit mode (the store says BEGIN and COMMIT itself),
        rows readable by column name and by position."""
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nightowl-sqlite")

        def connect() -> sqlite3.Connection:
            # Used only on this executor's one thread; the check would refuse close().
            connection = sqlite3.connect(
                database, uri=uri, isolation_level=None, check_same_thread=False
            )
            connection.row_factory = sqlite3.Row
            return connection

        try:
            connection = await asyncio.wrap_future(executor.submit(connect))
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(connection, executor)

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(connection)`` on the connection's thread, in one trip. Shielded: once
        submitted it runs to its end even when its caller is cancelled, and whatever
        comes next queues behind it."""
        future = asyncio.wrap_future(self._executor.submit(work, self._connection))
        return await asyncio.shield(future)

    async def in_transaction(self) -> bool:
        return await self.run(lambda connection: connection.in_transaction)

    async def script(self, sql: str) -> None:
        """Several statements at once (a migration)."""
        await self.run(lambda connection: connection.executescript(sql))

    async def set_trace_callback(self, callback: Callable[[str], object] | None) -> None:
        """Call ``callback`` with every statement SQLite runs from now on (None: stop)."""
        await self.run(lambda connection: connection.set_trace_callback(callback))

    async def close(self) -> None:
        try:
            await self.run(lambda connection: connection.close())
        finally:
            self._executor.shutdown(wait=False)


def outcome(cursor: sqlite3.Cursor) -> Outcome:
    return Outcome(cursor.rowcount, cursor.lastrowid)


class SQLiteHandle:
    """The store's :class:`~gateway.store.dialect.Handle` on SQLite: a trip per call."""

    def __init__(self, thread: SQLiteThread) -> None:
        self.thread = thread

    async def execute(self, sql: str, params: Params = ()) -> Outcome:
        return await self.thread.run(lambda connection: outcome(connection.execute(sql, params)))

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return await self.thread.run(lambda connection: connection.execute(sql, params).fetchall())

    async def execute_many(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        await self.thread.run(lambda connection: connection.executemany(sql, params))

    async def batches(self, sql: str, size: int) -> AsyncGenerator[list[Row]]:
        """The statement's rows, ``size`` at a time (one trip per batch)."""
        cursor = await self.thread.run(lambda connection: connection.execute(sql))
        try:
            while batch := await self.thread.run(lambda _: cursor.fetchmany(size)):
                yield batch
        finally:
            await self.thread.run(lambda _: cursor.close())
