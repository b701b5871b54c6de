"""SQLite's file, as the store opens and inspects it: the read-only URI, and the schema
version kept in ``PRAGMA user_version`` (docs/design.md#storage)."""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from gateway.store.dialect import Handle


def read_only_uri(path: str | Path) -> str:
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"


async def user_version(db: Handle) -> int:
    rows = await db.fetch_all("PRAGMA user_version")
    return int(next(iter(rows))[0])
