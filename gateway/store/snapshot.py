"""A backup's database part (docs/operations.md#backups): a consistent copy taken while
the gateway runs, and the rows counted per table, so a restore can prove it got them all.

- SQLite: ``VACUUM INTO`` a new file, on a read connection beside the gateway's writer
  (WAL: the copy is one moment, never a copy of a live file); the tables are asked of the
  copy (``sqlite_master``), so a table a later migration adds is counted too.
- PostgreSQL: a read-only transaction exports its snapshot; the tables of the schema are
  counted in it and ``pg_dump --snapshot`` dumps that same moment (when ``pg_dump`` is on
  PATH; else the command line to run, never with the password).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import asyncpg

from gateway.store.backend import Store
from gateway.store.errors import StoreError
from gateway.store.postgres import PostgresStore
from gateway.store.postgres.connection import display, mapped_errors, stored_version
from gateway.store.sqlite import SQLiteStore
from gateway.store.sqlite_files import read_only_uri

#: The database part's name inside a backup.
SQLITE_PART = "state.db"
POSTGRES_PART = "postgres.dump"
#: What libpq takes in a URI's query; anything else (asyncpg's server settings, such as
#: ``search_path``) is left out of the command line.
LIBPQ_PARAMS = {
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "connect_timeout",
    "application_name",
    "options",
    "sslmode",
    "sslcert",
    "sslkey",
    "sslrootcert",
    "sslcrl",
    "target_session_attrs",
}


@dataclass(frozen=True)
class DatabaseCopy:
    """What :func:`copy_database` wrote: ``file`` (None when ``pg_dump`` was not run),
    the schema version and the rows per table at the copy's moment."""

    backend: Literal["sqlite", "postgres"]
    file: Path | None
    schema_version: int
    tables: dict[str, int]
    #: PostgreSQL: the ``pg_dump`` command line (no password; ``PGPASSWORD`` gives it).
    command: tuple[str, ...] = ()


async def copy_database(store: Store, directory: Path) -> DatabaseCopy:
    """Copy the open ``store``'s database into ``directory`` (see the module's doc)."""
    if isinstance(store, SQLiteStore):
        return await _copy_sqlite(store, directory / SQLITE_PART)
    if isinstance(store, PostgresStore):
        return await _dump_postgres(store.connection.dsn, directory / POSTGRES_PART)
    raise StoreError("a backup knows SQLite and PostgreSQL only")


async def _copy_sqlite(store: SQLiteStore, target: Path) -> DatabaseCopy:
    async with store.connection.read() as db:
        await db.execute("VACUUM INTO ?", (str(target),))
    version, tables = await count_sqlite_file(target)
    return DatabaseCopy("sqlite", target, version, tables)


async def count_sqlite_file(path: Path) -> tuple[int, dict[str, int]]:
    """A SQLite file's schema version and rows per table (its own tables, not SQLite's
    nor a full-text index and its shadow tables), read-only."""

    def count() -> tuple[int, dict[str, int]]:
        uri = read_only_uri(path)
        try:
            connection = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read {path}: {exc}") from exc
        try:
            version = int(connection.execute("PRAGMA user_version").fetchone()[0])
            listed = connection.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
            virtual = [name for name, sql in listed if sql.upper().startswith("CREATE VIRTUAL")]
            # A full-text index and its shadow tables are the rows' index, not rows.
            tables = [
                name
                for name, _ in listed
                if not any(name == v or name.startswith(f"{v}_") for v in virtual)
            ]
            return version, {
                name: int(connection.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0])
                for name in tables
            }
        except sqlite3.Error as exc:
            raise StoreError(f"{path} is not a nightowl database: {exc}") from exc
        finally:
            connection.close()

    return await asyncio.to_thread(count)


# -- PostgreSQL ----------------------------------------------------------------------------


def dump_command(dsn: str, target: Path | str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The ``pg_dump`` command line for ``dsn`` (its password left out) and the
    environment that gives the password (``PGPASSWORD``)."""
    parts = urllib.parse.urlsplit(dsn)
    query = urllib.parse.parse_qsl(parts.query)
    kept = [(k, v) for k, v in query if k in LIBPQ_PARAMS]
    schemas = [v for k, v in query if k == "search_path"]
    netloc = parts.netloc.rpartition("@")
    userinfo, host = (netloc[0], netloc[2]) if netloc[1] else ("", parts.netloc)
    user = userinfo.partition(":")[0]
    location = f"{user}@{host}" if user else host
    safe = urllib.parse.urlunsplit(
        parts._replace(netloc=location, query=urllib.parse.urlencode(kept))
    )
    command = ["pg_dump", "--format=custom", "--no-owner", f"--file={target}"]
    command += [f"--schema={s.split(',')[0].strip()}" for s in schemas]
    command.append(f"--dbname={safe}")
    password = parts.password or next((v for k, v in query if k == "password"), None)
    env = {"PGPASSWORD": urllib.parse.unquote(password)} if password else {}
    return tuple(command), env


async def _dump_postgres(dsn: str, target: Path) -> DatabaseCopy:
    where = display(dsn)
    command, env = dump_command(dsn, target)
    pg_dump = shutil.which("pg_dump")
    with mapped_errors(where):
        connection = await asyncpg.connect(dsn)
        try:
            async with connection.transaction(isolation="repeatable_read", readonly=True):
                moment = await connection.fetchval("SELECT pg_export_snapshot()")
                version, tables = await _count_postgres(connection)
                if pg_dump is not None:
                    # The snapshot lives as long as this transaction: pg_dump sees the
                    # very moment the rows were counted in.
                    await _run(
                        (pg_dump, *command[1:-1], f"--snapshot={moment}", command[-1]), env, where
                    )
        finally:
            await connection.close()
    return DatabaseCopy(
        "postgres", target if pg_dump is not None else None, version, tables, command
    )


async def _count_postgres(connection: asyncpg.Connection) -> tuple[int, dict[str, int]]:
    names = await connection.fetch(
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        " ORDER BY table_name"
    )
    tables = {}
    for row in names:
        name = row["table_name"]
        tables[name] = int(await connection.fetchval(f'SELECT count(*) FROM "{name}"'))
    version = 0
    if "nightowl_schema" in tables:
        version = int(await connection.fetchval("SELECT max(version) FROM nightowl_schema") or 0)
    return version, tables


async def restore_dump(dump: Path, dsn: str) -> tuple[int, dict[str, int]]:
    """``pg_restore`` ``dump`` into the database at ``dsn`` (which must hold no nightowl
    tables), then count its rows as :func:`copy_database` did."""
    where = display(dsn)
    pg_restore = shutil.which("pg_restore")
    if pg_restore is None:
        raise StoreError("pg_restore is not on PATH: install PostgreSQL's client tools")
    command, env = dump_command(dsn, dump)
    dbname = command[-1]
    with mapped_errors(where):
        connection = await asyncpg.connect(dsn)
        try:
            if await stored_version(connection) is not None:
                raise StoreError(
                    f"{where} holds nightowl tables already: restore into an empty database"
                )
        finally:
            await connection.close()
    await _run(
        (pg_restore, "--no-owner", "--exit-on-error", "--single-transaction", dbname, str(dump)),
        env,
        where,
    )
    with mapped_errors(where):
        connection = await asyncpg.connect(dsn)
        try:
            return await _count_postgres(connection)
        finally:
            await connection.close()


async def _run(command: tuple[str, ...], env: dict[str, str], where: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *command,
        env={**os.environ, **env},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    if process.returncode != 0:
        said = err.decode(errors="replace").strip().splitlines()
        raise StoreError(
            f"{Path(command[0]).name} for {where} failed: {said[-1] if said else process.returncode}"
        )
