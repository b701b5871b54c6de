"""What ``nightowl doctor`` asks a PostgreSQL database (docs/design.md#replicas): its
schema version, whether two connections can hold one advisory lock (that is how
replicas take turns), and its clock. Doctor decides what to report."""

from __future__ import annotations

import time

import asyncpg

from gateway.store.errors import StoreError
from gateway.store.postgres.connection import DRIVER_ERRORS, display, mapped_errors, stored_version
from gateway.store.postgres.schema import SCHEMA_VERSION
from gateway.store.records import DatabaseProbe

#: The lock the probe takes and gives back; no session hashes to it in practice.
_PROBE_LOCK = 7_104_115_102


async def probe(dsn: str, timeout: float) -> DatabaseProbe:
    """Ask the database at ``dsn``; a :class:`StoreError` when it cannot be reached."""
    where = display(dsn)
    try:
        first = await asyncpg.connect(dsn, timeout=timeout)
    except DRIVER_ERRORS as exc:
        raise StoreError(f"cannot reach {where}: {exc}") from exc
    try:
        with mapped_errors(where):
            second = await asyncpg.connect(dsn, timeout=timeout)
            try:
                version = await stored_version(first)
                taken, shared = await _locks(first, second)
                before = time.time()
                database = await first.fetchval("SELECT extract(epoch FROM clock_timestamp())")
                after = time.time()
            finally:
                await second.close()
    finally:
        await first.close()
    return DatabaseProbe(
        where,
        version,
        SCHEMA_VERSION,
        bool(taken),
        bool(shared),
        float(database) - (before + after) / 2,
        (after - before) / 2,
    )


async def _locks(first: asyncpg.Connection, second: asyncpg.Connection) -> tuple[bool, bool]:
    held = await first.fetchval("SELECT pg_try_advisory_lock($1)", _PROBE_LOCK)
    try:
        also = await second.fetchval("SELECT pg_try_advisory_lock($1)", _PROBE_LOCK)
        if also:
            await second.fetchval("SELECT pg_advisory_unlock($1)", _PROBE_LOCK)
    finally:
        if held:
            await first.fetchval("SELECT pg_advisory_unlock($1)", _PROBE_LOCK)
    return bool(held), bool(also)
