"""``nightowl migrate``'s copy: every row of a SQLite ``state.db`` into an empty PostgreSQL
database, in one PostgreSQL transaction, then the rows counted on both sides
(docs/design.md#postgresql). SQLite's full-text index is not copied: PostgreSQL computes
its own from the rows."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import asyncpg

from gateway.store.backend import Store
from gateway.store.errors import StoreError
from gateway.store.postgres import PostgresStore
from gateway.store.postgres.connection import display, mapped_errors, stored_version
from gateway.store.postgres.handle import storable
from gateway.store.postgres.schema import SCHEMA_VERSION as POSTGRES_VERSION
from gateway.store.schema import SCHEMA_VERSION as SQLITE_VERSION
from gateway.store.sqlite import SQLiteStore

#: Every table, in an order where a row's references were copied before it.
TABLES = (
    "sessions",
    "messages",
    "inbox",
    "inbound_seen",
    "reminders",
    "pairing_requests",
    "paired_users",
    "documents",
    "document_parts",
    "chat_documents",
    "chat_moves",
    "memories",
    "turn_stats",
    "compactions",
    "chat_models",
    "costs",
    "cost_days",
    "alerts_told",
)
#: Tables left behind: the budget holds of calls in flight, which ended with the
#: gateway that made them (docs/cost.md#calls-side-by-side).
NOT_COPIED = ("cost_holds",)
#: Rows read from SQLite and written to PostgreSQL at a time.
BATCH = 5000

Convert = Callable[[Any], Any]
_CONVERSIONS: dict[str, Convert] = {
    "double precision": float,
    "bigint": lambda value: _integer(value),
    "integer": lambda value: _integer(value),
    "text": lambda value: storable(_text(value)),
}


def _text(value: Any) -> str:
    """A text column's value; bytes there must be UTF-8 (else the row is refused)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")  # UnicodeDecodeError is a ValueError
    return value if isinstance(value, str) else str(value)


def _integer(value: Any) -> int:
    """An integer column's value; a fraction or text there is refused, not truncated."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer")
    return value


def refuse_other_schemas() -> None:
    """A release always keeps the two schemas in step; a copy between two is refused."""
    if SQLITE_VERSION != POSTGRES_VERSION:
        raise StoreError(f"schema v{SQLITE_VERSION} on SQLite, v{POSTGRES_VERSION} on PostgreSQL")


async def refuse_non_empty(dsn: str) -> None:
    """A :class:`StoreError` when the database at ``dsn`` holds nightowl rows already (or
    cannot be reached)."""
    where = display(dsn)
    try:
        connection = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StoreError(f"cannot reach {where}: {exc}") from exc
    try:
        with mapped_errors(where):
            if await stored_version(connection) is None:
                return
            held = [
                t for t in TABLES if await connection.fetchval(f"SELECT EXISTS (SELECT 1 FROM {t})")
            ]
    finally:
        await connection.close()
    if held:
        raise StoreError(
            f"{where} already holds nightowl data ({', '.join(held)}): migrate only"
            " into an empty database"
        )


async def copy_all(source: Store, target: Store) -> dict[str, tuple[int, int]]:
    """Copy every table of ``source`` (SQLite, open and locked) into ``target``
    (PostgreSQL, open and empty) in one transaction; ``{table: (rows read, rows
    PostgreSQL then holds)}``."""
    if not isinstance(source, SQLiteStore) or not isinstance(target, PostgresStore):
        raise StoreError("a copy goes from SQLite to PostgreSQL")
    counts: dict[str, int] = {}
    async with target.connection.raw() as connection:
        async with connection.transaction():
            for table in TABLES:
                columns = await _columns(connection, table)
                counts[table] = await _copy_table(source, connection, table, columns, target.where)
                await _advance_sequences(connection, table)
        return {table: (counts[table], await _count(connection, table)) for table in TABLES}


async def _columns(connection: asyncpg.Connection, table: str) -> dict[str, Convert]:
    """The table's columns PostgreSQL takes values for (not generated ones), each with
    how a SQLite value becomes one of its type."""
    rows = await connection.fetch(
        "SELECT column_name, data_type FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = $1"
        " AND is_generated = 'NEVER' ORDER BY ordinal_position",
        table,
    )
    return {row["column_name"]: _CONVERSIONS.get(row["data_type"], lambda v: v) for row in rows}


async def _copy_table(
    source: SQLiteStore,
    connection: asyncpg.Connection,
    table: str,
    columns: dict[str, Convert],
    where: str,
) -> int:
    names = list(columns)
    converts = list(columns.values())
    copied = 0
    query = f"SELECT {', '.join(names)} FROM {table}"
    async with (
        source.connection.read() as db,
        contextlib.aclosing(db.batches(query, BATCH)) as batches,
    ):
        async for batch in batches:
            try:
                records = [
                    tuple(
                        None if v is None else convert(v)
                        for v, convert in zip(row, converts, strict=True)
                    )
                    for row in batch
                ]
                # PostgreSQL's own failures (a timeout, a dropped connection) say so,
                # never blamed on the SQLite file being read meanwhile.
                with mapped_errors(where):
                    await connection.copy_records_to_table(table, records=records, columns=names)
            except (asyncpg.PostgresError, ValueError, TypeError) as exc:
                raise StoreError(
                    f"{table}: a row PostgreSQL does not take ({type(exc).__name__}: {exc});"
                    " nothing was copied"
                ) from exc
            copied += len(records)
    return copied


async def _advance_sequences(connection: asyncpg.Connection, table: str) -> None:
    """Ids copied as they were; new rows continue after the largest."""
    serials = await connection.fetch(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = $1"
        " AND column_default LIKE 'nextval(%'",
        table,
    )
    for row in serials:
        column = row["column_name"]
        await connection.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"
            f" COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
        )


async def _count(connection: asyncpg.Connection, table: str) -> int:
    return int(await connection.fetchval(f"SELECT count(*) FROM {table}"))
