"""A whole SQLite transaction in one trip to the connection's thread.

aiosqlite runs every statement on the connection's own thread: each ``await`` is a trip
there and back, about 0.1 ms of CPU on these machines, more than most statements take.
A turn's commit is seven statements; one trip instead of seven is the difference
(docs/design.md#one-trip). The statements stay written once for both databases, as
coroutines over a handle (``execute``, ``execute_fetchall``, ``executemany``): on SQLite's
thread the handle answers each call at once, so the body's coroutine runs to its end
without ever suspending, and one ``send`` drives it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Coroutine, Iterable
from functools import partial
from typing import Any

import aiosqlite

from gateway.store.dialect import Body, T


class ThreadHandle:
    """The handle a body gets on SQLite's thread: aiosqlite's calls, answered at once."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    async def execute(self, sql: str, parameters: Any = ()) -> sqlite3.Cursor:
        return self._connection.execute(sql, parameters)

    async def execute_fetchall(self, sql: str, parameters: Any = ()) -> list[Any]:
        return self._connection.execute(sql, parameters).fetchall()

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> sqlite3.Cursor:
        return self._connection.executemany(sql, parameters)


def in_one_trip(db: aiosqlite.Connection, body: Body[T], *, begin: str) -> Awaitable[T]:
    """``body`` between ``begin`` and COMMIT (ROLLBACK if it raises), on ``db``'s thread.

    aiosqlite has no public way to run a function of ours on its thread (omnilib/
    aiosqlite#19 asks for one); ``_execute`` is that way, unchanged since its first
    releases. tests/gateway/test_store_trip.py fails loudly if that ever changes.
    """
    return db._execute(partial(_run, db, body, begin))


def _run(db: aiosqlite.Connection, body: Body[T], begin: str) -> T:
    connection = db._conn  # on its own thread, as sqlite3 requires
    connection.execute(begin)
    try:
        result = _to_the_end(body(ThreadHandle(connection)))
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
    return result


def _to_the_end(steps: Coroutine[Any, Any, T]) -> T:
    try:
        steps.send(None)
    except StopIteration as done:
        return done.value
    steps.close()
    raise RuntimeError("a one-trip transaction awaited something other than its statements")
