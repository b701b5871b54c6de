"""``nightowl migrate --to postgresql://...``: move a SQLite ``state.db`` into an empty
PostgreSQL database (docs/design.md#postgresql).

Every row is copied — sessions, messages archived ones included, the inbox, reminders,
pairing, documents, memory, the dashboard's records — in one PostgreSQL transaction, so
a failure leaves the target as empty as it was; then the counts are compared table by
table. A target that holds any row is refused. The gateway must be stopped (the data-dir
lock says whether it is), so the copy is of one moment. SQLite's full-text index is not
copied: PostgreSQL computes its own from the rows.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import Any, TextIO

import asyncpg

from gateway.config.schema import Config
from gateway.store import SQLiteStore
from gateway.store.errors import StoreError
from gateway.store.postgres.connection import PgConnection, display
from gateway.store.postgres.handle import storable
from gateway.store.postgres.schema import SCHEMA_VERSION as POSTGRES_VERSION
from gateway.store.schema import SCHEMA_VERSION as SQLITE_VERSION

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
)
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


def add_migrate_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    migrate = commands.add_parser(
        "migrate",
        parents=[common],
        help="copy the SQLite database into an empty PostgreSQL one",
        description="Copy state.db (every row, archived ones included) into an empty"
        " PostgreSQL database and compare the counts. Stop the gateway first.",
    )
    migrate.add_argument(
        "--to",
        metavar="DSN",
        help="postgresql://user:password@host:5432/database (default: store.dsn)",
    )
    migrate.set_defaults(handler=cmd_migrate)


def cmd_migrate(config: Config, args: argparse.Namespace) -> int:
    target = args.to or config.store.dsn
    if not target:
        print("nightowl: say where to: --to postgresql://... or store.dsn", file=sys.stderr)
        return 2
    return asyncio.run(migrate(config, target))


async def migrate(config: Config, dsn: str, out: TextIO | None = None) -> int:
    """Copy, verify, say what was copied; 0 on success (StoreError otherwise)."""
    out = out or sys.stdout
    if SQLITE_VERSION != POSTGRES_VERSION:  # a release always keeps the two in step
        raise StoreError(f"schema v{SQLITE_VERSION} on SQLite, v{POSTGRES_VERSION} on PostgreSQL")
    path = config.database_path
    if not path.exists():
        raise StoreError(f"no database at {path}: nothing to migrate")
    source = await SQLiteStore(path).open()  # locked: no gateway writes meanwhile
    try:
        target = PgConnection(dsn, pool_size=1)
        await _refuse_non_empty(dsn)
        await target.open()  # creates the schema
        try:
            async with target.raw() as connection:
                counts = await _copy(source, connection)
                copied = {table: await _count(connection, table) for table in TABLES}
        finally:
            await target.close()
    finally:
        await source.close()
    wrong = [table for table in TABLES if copied[table] != counts[table]]
    for table in TABLES:
        mark = "✓" if table not in wrong else "✗"
        print(f"{mark} {table}: {counts[table]} → {copied[table]}", file=out)
    if wrong:
        raise StoreError(f"counts differ after the copy: {', '.join(wrong)}")
    print(
        f"Copied {path} into {display(dsn)}. Now set store.backend: postgres and store.dsn"
        " in config.yaml, and start the gateway (state.db stays as it was).",
        file=out,
    )
    return 0


async def _refuse_non_empty(dsn: str) -> None:
    try:
        connection = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StoreError(f"cannot reach {display(dsn)}: {exc}") from exc
    try:
        if await connection.fetchval("SELECT to_regclass('nightowl_schema')") is None:
            return
        held = [
            t for t in TABLES if await connection.fetchval(f"SELECT EXISTS (SELECT 1 FROM {t})")
        ]
    finally:
        await connection.close()
    if held:
        raise StoreError(
            f"{display(dsn)} already holds nightowl data ({', '.join(held)}): migrate only"
            " into an empty database"
        )


async def _copy(source: SQLiteStore, connection: asyncpg.Connection) -> dict[str, int]:
    counts: dict[str, int] = {}
    async with connection.transaction():
        for table in TABLES:
            columns = await _columns(connection, table)
            counts[table] = await _copy_table(source, connection, table, columns)
            await _advance_sequences(connection, table)
    return counts


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
    source: SQLiteStore, connection: asyncpg.Connection, table: str, columns: dict[str, Convert]
) -> int:
    names = list(columns)
    converts = list(columns.values())
    copied = 0
    async with source.connection.read() as db:
        cursor = await db.execute(f"SELECT {', '.join(names)} FROM {table}")
        while batch := await cursor.fetchmany(BATCH):
            try:
                records = [
                    tuple(
                        None if v is None else convert(v)
                        for v, convert in zip(row, converts, strict=True)
                    )
                    for row in batch
                ]
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
