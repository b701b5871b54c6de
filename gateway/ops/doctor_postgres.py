"""``nightowl doctor`` with ``store.backend: postgres`` (docs/design.md#replicas): the
database answers and holds a schema this nightowl knows, advisory locks work (two
connections cannot hold one lock: that is how replicas take turns), and this machine's
clock agrees with the database's (reminders and idle compression go by the replicas'
clocks). And a word on Telegram: polling allows one consumer per token. The store
answers the questions (``Store.examine``); this decides what to report.
"""

from __future__ import annotations

from gateway.config.schema import Config
from gateway.ops.reachability import Check
from gateway.store import DatabaseProbe

#: Clocks further apart than this make reminders early or late on some replica.
CLOCK_SKEW_SECONDS = 2.0


def postgres_checks(config: Config, found: DatabaseProbe) -> list[Check]:
    """What the database said, as doctor's lines."""
    return [_schema(found), _locks(found), _clock(found), _polling(config)]


def _schema(found: DatabaseProbe) -> Check:
    where, version, current = found.where, found.schema_version, found.current_version
    if version is None:
        return Check(
            "database", True, f"{where}: empty; the first gateway start creates the schema"
        )
    if version > current:
        return Check(
            "database",
            False,
            f"{where}: schema v{version} is newer than this nightowl",
            "upgrade nightowl",
        )
    later = f" (upgraded to v{current} at the next start)" if version < current else ""
    return Check("database", True, f"{where}: schema v{version}{later}")


def _locks(found: DatabaseProbe) -> Check:
    if found.lock_taken and not found.lock_shared:
        return Check("advisory locks", True, "one holder at a time: replicas can take turns")
    return Check(
        "advisory locks",
        False,
        "two connections held one advisory lock"
        if found.lock_shared
        else "could not take an advisory lock",
        "connect to PostgreSQL directly, not through a pooler in transaction mode (PgBouncer)",
    )


def _clock(found: DatabaseProbe) -> Check:
    skew = found.clock_skew
    if abs(skew) > CLOCK_SKEW_SECONDS + found.clock_uncertainty:
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
