"""``nightowl doctor`` with ``store.backend: postgres`` (docs/design.md#replicas): the
database answers and holds a schema this nightowl knows, advisory locks work (two
connections cannot hold one lock: that is how replicas take turns), and this machine's
clock agrees with the database's (reminders and idle compression go by the replicas'
clocks). And a word on Telegram: polling allows one consumer per token.
"""

from __future__ import annotations

import time

import asyncpg

from gateway.config.schema import Config
from gateway.ops.reachability import Check
from gateway.store.postgres.connection import display
from gateway.store.postgres.schema import SCHEMA_VERSION

#: Clocks further apart than this make reminders early or late on some replica.
CLOCK_SKEW_SECONDS = 2.0
#: The lock the check takes and gives back; no session hashes to it in practice.
_PROBE_LOCK = 7_104_115_102


async def check_postgres(config: Config, timeout: float) -> list[Check]:
    dsn = config.store.dsn or ""
    where = display(dsn)
    try:
        first = await asyncpg.connect(dsn, timeout=timeout)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        return [Check("database", False, f"cannot reach {where}: {exc}", "check store.dsn")]
    try:
        second = await asyncpg.connect(dsn, timeout=timeout)
        try:
            return [
                await _schema(first, where),
                await _locks(first, second),
                await _clock(first),
                _polling(config),
            ]
        finally:
            await second.close()
    finally:
        await first.close()


async def _schema(connection: asyncpg.Connection, where: str) -> Check:
    if await connection.fetchval("SELECT to_regclass('nightowl_schema')") is None:
        return Check(
            "database", True, f"{where}: empty; the first gateway start creates the schema"
        )
    version = int(await connection.fetchval("SELECT max(version) FROM nightowl_schema") or 0)
    if version > SCHEMA_VERSION:
        return Check(
            "database",
            False,
            f"{where}: schema v{version} is newer than this nightowl",
            "upgrade nightowl",
        )
    later = (
        f" (upgraded to v{SCHEMA_VERSION} at the next start)" if version < SCHEMA_VERSION else ""
    )
    return Check("database", True, f"{where}: schema v{version}{later}")


async def _locks(first: asyncpg.Connection, second: asyncpg.Connection) -> Check:
    held = await first.fetchval("SELECT pg_try_advisory_lock($1)", _PROBE_LOCK)
    try:
        also = await second.fetchval("SELECT pg_try_advisory_lock($1)", _PROBE_LOCK)
        if also:
            await second.fetchval("SELECT pg_advisory_unlock($1)", _PROBE_LOCK)
    finally:
        if held:
            await first.fetchval("SELECT pg_advisory_unlock($1)", _PROBE_LOCK)
    if held and not also:
        return Check("advisory locks", True, "one holder at a time: replicas can take turns")
    return Check(
        "advisory locks",
        False,
        "two connections held one advisory lock" if also else "could not take an advisory lock",
        "connect to PostgreSQL directly, not through a pooler in transaction mode (PgBouncer)",
    )


async def _clock(connection: asyncpg.Connection) -> Check:
    before = time.time()
    database = float(await connection.fetchval("SELECT extract(epoch FROM clock_timestamp())"))
    after = time.time()
    skew = database - (before + after) / 2
    if abs(skew) > CLOCK_SKEW_SECONDS + (after - before) / 2:
        return Check(
            "clock",
            False,
            f"this machine's clock is {abs(skew):.1f}s {'behind' if skew > 0 else 'ahead of'} the database's",
            "run NTP (systemd-timesyncd or chrony) on every replica",
        )
    return Check(
        "clock", True, f"within {CLOCK_SKEW_SECONDS:.0f}s of the database's ({skew:+.2f}s)"
    )


def _polling(config: Config) -> Check:
    telegram = config.platforms.telegram
    if not telegram.enabled or telegram.webhook is not None:
        return Check("replicas", True, "any number may run on this database")
    return Check(
        "replicas",
        True,
        "Telegram polls: only ONE replica may run (Telegram gives updates to one poller per"
        " token); for several, use webhook mode (docs/operations.md#replicas)",
    )
