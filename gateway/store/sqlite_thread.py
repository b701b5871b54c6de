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
import atexit
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from typing import Any, Self, TypeVar

from gateway.store.dialect import Outcome, Params, Row

T = TypeVar("T")
log = logging.getLogger(__name__)
#: How long a process exiting with its store still open waits for the trips given.
EXIT_WAIT_SECONDS = 10.0
#: What SQLite and the file under it raise.
DRIVER_ERRORS = (sqlite3.Error, OSError)

# (the loop to answer on, the future to settle, the work and its argument); None: stop.
_Trip = tuple[asyncio.AbstractEventLoop, asyncio.Future[Any], Callable[[Any], Any], Any]


class _Worker:
    """One thread doing the work it is given, in order, each answer handed to the event
    loop in one call. A trip is the hot path of every turn (six or so of them): a
    ``ThreadPoolExecutor`` would add its own future, a second one chained to it and a
    shield around that, about a tenth of the gateway's own work per turn."""

    def __init__(self, name: str) -> None:
        self._trips: queue.SimpleQueue[_Trip | None] = queue.SimpleQueue()
        self._stopped = False
        # A daemon, so that a process whose store was never closed can still exit; the
        # exit waits for the trips already given all the same (``_finish_all``).
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        _running.add(self)

    def submit(self, work: Callable[[Any], T], argument: Any) -> asyncio.Future[T]:
        if self._stopped:  # what sqlite3 says of a closed connection (a store error)
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._trips.put((loop, future, work, argument))
        return future

    def stop(self) -> None:
        """No more trips; those already given are done first."""
        if not self._stopped:
            self._stopped = True
            self._trips.put(None)
            _running.discard(self)

    def _serve(self) -> None:
        while (trip := self._trips.get()) is not None:
            loop, future, work, argument = trip
            try:
                answer, ok = work(argument), True
            except BaseException as error:  # the caller gets it
                answer, ok = error, False
            try:
                loop.call_soon_threadsafe(_settle, future, ok, answer)
            except RuntimeError:  # the loop is closed: nobody waits for this answer
                if not ok:
                    log.warning("a store trip failed after its event loop closed: %r", answer)


#: Workers not stopped yet: at exit, the trips they were given end before the process.
_running: set[_Worker] = set()


@atexit.register
def _finish_all() -> None:
    """A process exiting with a store still open (a path that never closed it) lets the
    trips already given — a commit, a delivered mark — end first, all within one bound:
    a hung disk does not hang the exit."""
    workers = list(_running)
    for worker in workers:
        worker.stop()
    deadline = time.monotonic() + EXIT_WAIT_SECONDS
    for worker in workers:
        worker._thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _settle(future: asyncio.Future[Any], ok: bool, answer: Any) -> None:
    if future.cancelled():  # its caller was cancelled; the work was done all the same
        if not ok:
            log.warning("a store trip whose caller was cancelled failed: %r", answer)
        return
    if ok:
        future.set_result(answer)
    else:
        future.set_exception(answer)


class SQLiteThread:
    """A ``sqlite3`` connection and the one thread that uses it."""

    def __init__(self, connection: sqlite3.Connection, worker: _Worker) -> None:
        self._connection = connection
        self._worker = worker

    @classmethod
    async def connect(cls, database: str, *, uri: bool = False) -> Self:
        """Open ``database`` in autocommit mode (the store says BEGIN and COMMIT itself),
        rows readable by column name and by position."""
        worker = _Worker("nightowl-sqlite")

        def connect(_: None) -> sqlite3.Connection:
            # Used only on the worker's thread; the check would refuse close().
            connection = sqlite3.connect(
                database, uri=uri, isolation_level=None, check_same_thread=False
            )
            connection.row_factory = sqlite3.Row
            return connection

        try:
            connection = await worker.submit(connect, None)
        except BaseException:
            worker.stop()
            raise
        return cls(connection, worker)

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(connection)`` on the connection's thread, in one trip. Once submitted it
        runs to its end even when its caller is cancelled, and whatever comes next queues
        behind it."""
        return await self._worker.submit(work, self._connection)

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
            self._worker.stop()


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
