"""Whole SQLite transactions in one trip to the connection's thread, and writes that
arrive together in one commit.

The connection lives on a thread of its own (gateway/store/sqlite_thread.py): each
``await`` of a statement is a trip there and back, about 0.1 ms of CPU on these machines, more than most statements take.
A turn's commit is seven statements; one trip instead of seven is the difference
(docs/design.md#one-trip). The statements stay written once for both databases, as
coroutines over a :class:`~gateway.store.dialect.Handle`: on SQLite's thread the handle
answers each call at once, so the body's coroutine runs to its end
without ever suspending, and one ``send`` drives it.

Writes that arrive while a trip is on its way go together in the next one
(:class:`GroupCommit`): one transaction, each body in a savepoint of its own, one COMMIT
and one fsync for all. Fifty chats answering at once then share a few syncs instead of
taking fifty one after another.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gateway.store.dialect import Body, Outcome, Params, Row, T
from gateway.store.errors import StoreError
from gateway.store.sqlite_thread import SQLiteThread, outcome

#: At most this many bodies share a transaction.
MAX_BATCH = 64


class ThreadHandle:
    """The :class:`~gateway.store.dialect.Handle` a body gets on SQLite's thread: each
    call answered at once."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    async def execute(self, sql: str, params: Params = ()) -> Outcome:
        return outcome(self._connection.execute(sql, params))

    async def fetch_all(self, sql: str, params: Params = ()) -> list[Row]:
        return self._connection.execute(sql, params).fetchall()

    async def execute_many(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        self._connection.executemany(sql, params)


async def in_one_trip(db: SQLiteThread, body: Body[T], *, begin: str) -> T:
    """``body`` between ``begin`` and COMMIT (ROLLBACK if it raises), on ``db``'s thread."""
    return await db.run(partial(_one, body, begin))


def _one(body: Body[T], begin: str, connection: sqlite3.Connection) -> T:
    connection.execute(begin)
    try:
        result = _to_the_end(body(ThreadHandle(connection)))
        connection.execute("COMMIT")
    finally:  # it raised, or the COMMIT did: nothing is kept
        _roll_back(connection)
    return result


def _to_the_end(steps: Coroutine[Any, Any, T]) -> T:
    try:
        steps.send(None)
    except StopIteration as done:
        return done.value
    steps.close()
    raise RuntimeError("a one-trip transaction awaited something other than its statements")


@dataclass
class _Write:
    body: Body[Any]
    synced: bool
    future: asyncio.Future[Any] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupCommit:
    """Write transactions on one connection, those that arrive together in one commit.

    The first writer to find nobody on the way takes its own trip at once (no task
    hop: a quiet chat's commit waits for nothing). Writers arriving meanwhile queue; when
    the trip is back, a task takes everything queued in the next one. In a shared trip
    each body runs in a savepoint: one that raises fails alone, its writes undone. A
    trip that cannot commit fails every body in it. ``synced=False`` writes (the
    delivered mark) skip the fsync unless they share a trip with one that needs it.
    """

    def __init__(self, db: SQLiteThread, lock: asyncio.Lock) -> None:
        self._db = db
        self._lock = lock  # the connection's: multi-trip transactions and reads hold it
        self._waiting: list[_Write] = []
        self._draining: asyncio.Task[None] | None = None  # kept: the loop holds tasks weakly
        self._quiet = asyncio.Event()  # set while no trip is on its way
        self._quiet.set()
        self._closing = False

    async def run(self, body: Body[T], *, synced: bool = True) -> T:
        """``body`` in the next trip; the first writer to find none on its way takes its
        own at once."""
        self._refuse_when_closing()
        write = _Write(body, synced)
        if not self._quiet.is_set():
            self._waiting.append(write)
        else:
            self._quiet.clear()
            try:
                await self._trip([write])
            finally:
                self._hand_on()
        return await write.future

    def submit(self, body: Body[T], *, synced: bool = True) -> asyncio.Future[T]:
        """``body`` queued now, made whether or not anyone awaits the result."""
        self._refuse_when_closing()
        write = _Write(body, synced)
        self._waiting.append(write)
        if self._quiet.is_set():
            self._quiet.clear()
            self._hand_on()
        return write.future

    async def close(self) -> None:
        """Take no more writes, and wait for those already taken."""
        self._closing = True
        await self._quiet.wait()

    def _refuse_when_closing(self) -> None:
        if self._closing:
            raise StoreError("the store is closing")

    def _hand_on(self) -> None:
        if self._waiting:
            self._draining = asyncio.get_running_loop().create_task(
                self._drain(), name="group-commit"
            )
        else:
            self._quiet.set()

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
                await self._trip(batch)
        finally:
            self._quiet.set()
            if self._waiting:  # cancelled (the loop closes): nobody waits for ever
                batch, self._waiting = self._waiting, []
                for write in batch:
                    if not write.future.done():
                        write.future.set_exception(StoreError("the store is closing"))

    async def _trip(self, batch: list[_Write]) -> None:
        batch = [write for write in batch if not write.future.done()]  # given up: skipped
        if not batch:
            return
        try:
            async with self._lock:
                outcomes = await self._db.run(partial(_together, batch))
        except Exception as error:  # no commit: the same cause for every body
            for write in batch:
                if not write.future.done():
                    write.future.set_exception(error)
            return
        except BaseException:  # cancelled: the trip ends on its thread all the same
            for write in batch:
                write.future.cancel()
            raise
        for write, (ok, value) in zip(batch, outcomes, strict=True):
            if write.future.done():
                continue
            if ok:
                write.future.set_result(value)
            else:
                write.future.set_exception(value)


def _together(batch: list[_Write], connection: sqlite3.Connection) -> list[tuple[bool, Any]]:
    """The bodies in one transaction, each in a savepoint when there are several."""
    synced = any(write.synced for write in batch)
    if not synced:  # WAL keeps the commit across a crash of this process, not a power cut
        connection.execute("PRAGMA synchronous=NORMAL")
    try:
        connection.execute("BEGIN IMMEDIATE")
        try:
            outcomes = [_alone(connection, write.body, len(batch) > 1) for write in batch]
            if len(batch) > 1 or outcomes[0][0]:
                connection.execute("COMMIT")
        finally:  # its only body failed, or the COMMIT did: nothing is kept
            _roll_back(connection)
    finally:
        if not synced and not connection.in_transaction:
            connection.execute("PRAGMA synchronous=FULL")
    return outcomes


def _roll_back(connection: sqlite3.Connection) -> None:
    """End an open transaction, keeping the error that got here (if any) the one raised."""
    if connection.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")


def _alone(connection: sqlite3.Connection, body: Body[Any], savepoint: bool) -> tuple[bool, Any]:
    if savepoint:
        connection.execute("SAVEPOINT body")
    try:
        result = _to_the_end(body(ThreadHandle(connection)))
    except Exception as error:
        if savepoint:
            try:
                connection.execute("ROLLBACK TO body")
                connection.execute("RELEASE body")
            except sqlite3.Error:  # SQLite gave up the whole transaction (I/O, disk full)
                raise error from None
        return False, error
    if savepoint:
        connection.execute("RELEASE body")
    return True, result
