"""A database failing after start-up reaches its caller as a StoreError with a sentence
to act on, never as a raw driver error (gateway/store/errors.py,
gateway/store/postgres/connection.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.config.schema import parse_config
from gateway.store import DataDirInUse, MemoryOwner, NewMemory, SQLiteStore, StoreError
from gateway.store.opening import open_store
from gateway.store.postgres import PostgresStore

ANN = MemoryOwner("user", "telegram:42")


async def test_a_postgresql_connection_terminated_under_a_statement_is_a_store_error(
    postgres_dsn: str,
) -> None:
    async with PostgresStore(postgres_dsn, pool_size=1) as store:
        await store.memory.remember(NewMemory(ANN, "likes tea"))
        with pytest.raises(StoreError) as caught:
            # The server ends the connection under the statement running on it, as an
            # administrator's pg_terminate_backend or a server restart would.
            async with store.connection.read() as db:
                await db.fetch_all("SELECT pg_terminate_backend(pg_backend_pid())")
        sentence = str(caught.value)
        assert sentence.startswith("PostgreSQL at postgresql://127.0.0.1:5432/")
        assert " failed: " in sentence and "terminat" in sentence.lower()
        # The pool replaces the connection it lost: the next call works.
        assert [note.text for note in await store.memory.memories([ANN])] == ["likes tea"]


async def test_sqlite_locked_by_another_program_after_start_is_a_store_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    async with SQLiteStore(path) as store:
        await store.memory.remember(NewMemory(ANN, "likes tea"))
        other = sqlite3.connect(path, isolation_level=None)  # say, an operator's sqlite3 shell
        try:
            other.execute("BEGIN EXCLUSIVE")
            with pytest.raises(StoreError) as caught:  # after the 5 s busy timeout
                await store.memory.remember(NewMemory(ANN, "likes coffee"))
            other.execute("ROLLBACK")
        finally:
            other.close()
        assert str(caught.value).startswith(f"{path} stayed locked by another program")
        # Nothing is left half done: the store writes again once the lock is gone.
        await store.memory.remember(NewMemory(ANN, "likes coffee"))
        assert {n.text for n in await store.memory.memories([ANN])} == {"likes tea", "likes coffee"}


async def test_a_second_gateway_on_one_data_dir_is_refused_on_postgresql_too(
    tmp_path: Path, postgres_dsn: str
) -> None:
    """Replicas share the database, each with its own data dir (its secrets, its log, the
    webhook's port): two gateways on one data dir are refused as on SQLite."""
    config = parse_config(
        {
            "data_dir": str(tmp_path / "data"),
            "model": {"base_url": "http://127.0.0.1:9/v1", "name": "m"},
            "store": {"backend": "postgres", "dsn": postgres_dsn},
        },
        {},
    )
    async with open_store(config):
        second = open_store(config)
        with pytest.raises(DataDirInUse, match=r"data dir in use by pid \d+"):
            await second.open()
        beside = open_store(config)  # a command's look beside it is no gateway
        await beside.open("read")
        await beside.close()
    async with open_store(config):  # let go at close
        pass
    (tmp_path / "a-file").write_text("not a directory\n")
    elsewhere = replace(config, data_dir=tmp_path / "a-file" / "data")
    with pytest.raises(StoreError, match=r"^cannot lock the data dir .*a-file/data: Not a dir"):
        await open_store(elsewhere).open()
