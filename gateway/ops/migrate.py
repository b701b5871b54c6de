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
from typing import Any, TextIO

from gateway.config.schema import Config
from gateway.store.errors import StoreError
from gateway.store.opening import open_store
from gateway.store.transfer import TABLES, copy_all, refuse_non_empty, refuse_other_schemas

__all__ = ["TABLES", "add_migrate_parser", "cmd_migrate", "migrate"]


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
    refuse_other_schemas()
    path = config.database_path
    if not path.exists():
        raise StoreError(f"no database at {path}: nothing to migrate")
    source = await open_store(config, backend="sqlite").open()  # locked: no gateway writes
    try:
        target = open_store(config, dsn=dsn)
        await refuse_non_empty(dsn)
        await target.open()  # creates the schema
        try:
            both = await copy_all(source, target)
        finally:
            await target.close()
    finally:
        await source.close()
    counts = {table: read for table, (read, _) in both.items()}
    copied = {table: held for table, (_, held) in both.items()}
    wrong = [table for table in TABLES if copied[table] != counts[table]]
    for table in TABLES:
        mark = "✓" if table not in wrong else "✗"
        print(f"{mark} {table}: {counts[table]} → {copied[table]}", file=out)
    if wrong:
        raise StoreError(f"counts differ after the copy: {', '.join(wrong)}")
    print(
        f"Copied {path} into {target.where}. Now set store.backend: postgres and store.dsn"
        " in config.yaml, and start the gateway (state.db stays as it was).",
        file=out,
    )
    return 0
