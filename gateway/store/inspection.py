"""What ``nightowl doctor`` asks the SQLite file: its schema version and integrity, read
without opening it as a store (nothing created, migrated or locked; a gateway may be
running on it). Doctor decides what to report (docs/design.md#errors)."""

from __future__ import annotations

from pathlib import Path

from gateway.store.errors import diagnose
from gateway.store.records import DatabaseReport
from gateway.store.schema import SCHEMA_VERSION
from gateway.store.sqlite_files import read_only_uri, user_version
from gateway.store.sqlite_thread import DRIVER_ERRORS, SQLiteHandle, SQLiteThread


async def inspect_file(path: Path) -> DatabaseReport:
    """Schema version and ``PRAGMA integrity_check`` of the file at ``path``, opened
    read-only. A file that cannot be read is a :class:`StoreError` saying why."""
    try:
        thread = await SQLiteThread.connect(read_only_uri(path), uri=True)
        try:
            db = SQLiteHandle(thread)
            version = await user_version(db)
            rows = await db.fetch_all("PRAGMA integrity_check(20)")
        finally:
            await thread.close()
    except DRIVER_ERRORS as exc:
        # Say what is wrong: a permissions problem is not fixed by restoring a backup.
        raise await diagnose(path, exc, writing=False) from exc
    return DatabaseReport(version, SCHEMA_VERSION, [str(row[0]) for row in rows])
