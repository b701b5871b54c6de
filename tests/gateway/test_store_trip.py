"""A transaction body in one trip (gateway/store/trip.py): all of it or none of it, on
both databases; and on SQLite a caller that gives up cannot cut a transaction in half."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.store import SQLiteStore, StoreError
from tests.waiting import CEILING

SEEN = "INSERT INTO inbound_seen(dedupe_key, seen_at) VALUES (?, 1e12)"  # kept at reopen


async def after_the_tasks_started() -> None:
    """Return once every task created before the call has taken its first step (the
    loop runs what is ready in order)."""
    started = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(started.set_result, None)
    await started


async def keys(store: Any) -> list[str]:
    async with store.connection.read() as db:
        rows = await db.fetch_all("SELECT dedupe_key FROM inbound_seen ORDER BY 1")
    return [row[0] for row in rows]


async def test_a_body_commits_whole_and_hands_back_its_result(backend_store: Any) -> None:
    async def body(db: Any) -> int:
        await db.execute(SEEN, ("a",))
        await db.execute_many(SEEN, [("b",), ("c",)])
        rows = await db.fetch_all("SELECT count(*) FROM inbound_seen")
        return int(rows[0][0])

    assert await backend_store.connection.atomically(body) == 3
    assert await keys(backend_store) == ["a", "b", "c"]


async def test_a_body_that_fails_leaves_nothing(backend_store: Any) -> None:
    async def body(db: Any) -> None:
        await db.execute(SEEN, ("a",))
        await db.execute(SEEN, ("a",))  # the key is unique: this statement fails

    with pytest.raises(Exception, match=r"(?i)unique"):
        await backend_store.connection.atomically(body)
    assert await keys(backend_store) == []

    async def again(db: Any) -> None:  # and the connection is fit for the next one
        await db.execute(SEEN, ("b",))

    await backend_store.connection.atomically(again)
    assert await keys(backend_store) == ["b"]


async def test_a_snapshot_reads_in_one_go(backend_store: Any) -> None:
    async def write(db: Any) -> None:
        await db.execute_many(SEEN, [("a",), ("b",)])

    await backend_store.connection.atomically(write)

    async def read(db: Any) -> tuple[int, list[str]]:
        count = await db.fetch_all("SELECT count(*) FROM inbound_seen")
        rows = await db.fetch_all("SELECT dedupe_key FROM inbound_seen ORDER BY 1")
        return int(count[0][0]), [row[0] for row in rows]

    assert await backend_store.connection.snapshot(read) == (2, ["a", "b"])


async def test_a_body_may_await_only_its_statements_on_sqlite(tmp_path: Path) -> None:
    async def body(db: Any) -> None:
        await db.execute(SEEN, ("a",))
        await asyncio.sleep(0)  # anything else would suspend on SQLite's thread

    async with SQLiteStore(tmp_path / "state.db") as store:
        with pytest.raises(RuntimeError, match="awaited something other than its statements"):
            await store.connection.atomically(body)
        assert await keys(store) == []


async def test_a_cancelled_caller_leaves_the_trip_to_finish_whole(tmp_path: Path) -> None:
    inside, go_on = threading.Event(), threading.Event()

    async def body(db: Any) -> None:
        await db.execute(SEEN, ("a",))
        inside.set()  # on SQLite's thread, between two statements
        go_on.wait(CEILING)
        await db.execute(SEEN, ("b",))

    async with SQLiteStore(tmp_path / "state.db") as store:
        caller = asyncio.create_task(store.connection.atomically(body))
        assert await asyncio.to_thread(inside.wait, CEILING)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        go_on.set()
        assert await keys(store) == ["a", "b"]  # read after the trip, on the same thread


class HeldTrip:
    """A write held on SQLite's thread (key "held") for as long as the block runs: what
    comes meanwhile queues for the next trip. Let go even when an assertion fails."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.inside, self.go_on = threading.Event(), threading.Event()

    async def __aenter__(self) -> HeldTrip:
        async def hold(db: Any) -> None:
            await db.execute(SEEN, ("held",))
            self.inside.set()
            self.go_on.wait(CEILING)

        self.task = asyncio.create_task(self.connection.atomically(hold))
        assert await asyncio.to_thread(self.inside.wait, CEILING)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.go_on.set()
        await self.task


def write(key: str) -> Any:
    async def body(db: Any) -> str:
        await db.execute(SEEN, (key,))
        return key

    return body


@contextlib.asynccontextmanager
async def traced(path: Path) -> AsyncIterator[tuple[SQLiteStore, list[str]]]:
    """An open store, and every statement it runs on SQLite's thread from now on."""
    statements: list[str] = []
    async with SQLiteStore(path) as store:
        await store.connection._conn().set_trace_callback(statements.append)
        yield store, statements


async def test_writes_arriving_together_share_one_commit_and_fail_alone(tmp_path: Path) -> None:
    async with traced(tmp_path / "state.db") as (store, statements):
        connection = store.connection
        async with HeldTrip(connection):
            queued = [asyncio.create_task(connection.atomically(write(key))) for key in "ab"]
            twice = asyncio.create_task(connection.atomically(write("held")))  # unique: fails
            given_up = asyncio.create_task(connection.atomically(write("gone")))
            later = asyncio.create_task(connection.atomically(write("c")))
            await after_the_tasks_started()
            assert len(connection._writes()._waiting) == 5  # all wait for the next trip
            given_up.cancel()
        assert [await task for task in queued] == ["a", "b"] and await later == "c"
        with pytest.raises(Exception, match=r"(?i)unique"):
            await twice
        with pytest.raises(asyncio.CancelledError):
            await given_up
        assert await keys(store) == ["a", "b", "c", "held"]
    commits = [s for s in statements if s in ("BEGIN IMMEDIATE", "COMMIT")]
    assert commits == ["BEGIN IMMEDIATE", "COMMIT"] * 2  # the held one's, then one for all
    assert statements.count("SAVEPOINT body") == 4  # a, b, the failed one, c


async def test_a_shared_commit_is_synced_when_one_of_its_writes_must_be(tmp_path: Path) -> None:
    async with traced(tmp_path / "state.db") as (store, statements):
        connection = store.connection
        async with HeldTrip(connection):
            mark = asyncio.create_task(connection.write_unsynced(SEEN.replace("?", "'mark'")))
            reply = asyncio.create_task(connection.atomically(write("reply")))
            await after_the_tasks_started()
            await after_the_tasks_started()  # the mark's shield starts its write a step later
            assert len(connection._writes()._waiting) == 2
        await mark
        assert await reply == "reply"
        assert await keys(store) == ["held", "mark", "reply"]
    assert statements.count("BEGIN IMMEDIATE") == 2  # the held one's; the two shared one...
    assert not [s for s in statements if s.startswith("PRAGMA synchronous")]  # ...synced


async def test_an_unsynced_write_skips_the_fsync_and_leaves_the_setting_as_it_was(
    tmp_path: Path,
) -> None:
    async with traced(tmp_path / "state.db") as (store, statements):
        connection = store.connection
        await connection.write_unsynced(SEEN.replace("?", "'mark'"))
        async with connection.read() as db:
            assert (await db.fetch_all("PRAGMA synchronous"))[0][0] == 2  # FULL
        assert await keys(store) == ["mark"]
    assert statements[:2] == ["PRAGMA synchronous=NORMAL", "BEGIN IMMEDIATE"]


async def test_closing_waits_for_the_writes_already_taken(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "state.db")
    await store.open()
    connection = store.connection
    async with HeldTrip(connection):
        queued = asyncio.create_task(connection.atomically(write("queued")))
        mark = asyncio.create_task(connection.write_unsynced(SEEN.replace("?", "'mark'")))
        await after_the_tasks_started()
        mark.cancel()  # a lane stopped at shutdown, its reply already sent
        closing = asyncio.create_task(store.close())
        await after_the_tasks_started()
        with pytest.raises(StoreError, match="closing"):  # nothing new once closing
            await connection.atomically(write("late"))
    await closing
    assert await queued == "queued"
    async with SQLiteStore(tmp_path / "state.db") as again:
        assert await keys(again) == ["held", "mark", "queued"]


async def test_a_trip_after_the_connection_closed_fails_at_once(tmp_path: Path) -> None:
    # A read that took the connection just before a close must not wait for ever: the
    # thread that would have answered it is gone.
    from gateway.store.sqlite_thread import SQLiteThread

    thread = await SQLiteThread.connect(str(tmp_path / "state.db"))
    assert await thread.run(lambda connection: connection.execute("SELECT 1").fetchone()[0]) == 1
    await thread.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        async with asyncio.timeout(CEILING):
            await thread.run(lambda connection: connection.execute("SELECT 1"))


def test_a_process_exiting_with_its_store_open_lets_the_trip_in_flight_end(
    tmp_path: Path,
) -> None:
    # The trip waits on a gate that only the exit opens (atexit runs the last registered
    # first): without the wait at exit, the daemon thread dies with the trip undone.
    path = tmp_path / "state.db"
    child = f"""
import asyncio, atexit, threading
from gateway.store.sqlite_thread import SQLiteThread
gate = threading.Event()
atexit.register(gate.set)

def insert(connection):
    gate.wait()
    connection.execute("CREATE TABLE t(x)")
    connection.execute("INSERT INTO t VALUES (1)")

async def main():
    thread = await SQLiteThread.connect({str(path)!r})
    thread._worker.submit(insert, thread._connection)  # never awaited, never closed

asyncio.run(main())
"""
    done = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, timeout=CEILING
    )
    assert done.returncode == 0, done.stderr
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT x FROM t").fetchall() == [(1,)]
