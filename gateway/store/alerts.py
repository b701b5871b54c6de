"""What the operator was told of each alert condition (:class:`~gateway.store.protocols.AlertStore`,
docs/operations.md#alerts): one row per condition in ``alerts_told``.

A message is claimed before it is sent, in one statement both databases run alike: the
row moves to the new state only when the last message on the condition is at least
``after`` seconds old and said the other thing (or, for a start, said a start that has
ended by itself, a budget past its reset). Replicas racing for one claim are serialised
by the row, so exactly one of them tells.
"""

from __future__ import annotations

from typing import Any

from gateway.store.dialect import Database, Handle
from gateway.store.records import AlertTold, Claim

STARTED, CLEARED = "started", "cleared"

_COLUMNS = "condition, state, since, told_at, what, until"

_CLAIM_START = (
    f"INSERT INTO alerts_told({_COLUMNS}) VALUES (?, 'started', ?, ?, ?, ?)"
    " ON CONFLICT (condition) DO UPDATE SET state = excluded.state, since = excluded.since,"
    " told_at = excluded.told_at, what = excluded.what, until = excluded.until"
    " WHERE alerts_told.told_at <= ?"
    " AND (alerts_told.state = 'cleared' OR alerts_told.until <= ?)"
    " RETURNING condition"
)
_CLAIM_CLEARING = (
    "UPDATE alerts_told SET state = 'cleared', told_at = ?"
    " WHERE condition = ? AND state = 'started' AND told_at <= ? RETURNING condition"
)


class SqlAlerts:
    def __init__(self, connection: Database) -> None:
        self.connection = connection

    async def told(self) -> list[AlertTold]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(f"SELECT {_COLUMNS} FROM alerts_told ORDER BY since")
        return [_told(row) for row in rows]

    async def claim(self, alert: AlertTold, after: float) -> tuple[Claim, AlertTold | None]:
        now, recent = alert.told_at, alert.told_at - after
        async with self.connection.transaction() as db:
            if alert.state == STARTED:
                params = (alert.condition, alert.since, now, alert.what, alert.until, recent, now)
                claimed = await db.fetch_all(_CLAIM_START, params)
            else:
                claimed = await db.fetch_all(_CLAIM_CLEARING, (now, alert.condition, recent))
            stored = None if claimed else await _stored(db, alert.condition)
        if claimed:
            return Claim.TOLD, None
        return _verdict(alert.state, stored, now), stored

    async def extend(self, condition: str, until: float) -> None:
        await self.connection.atomically(
            lambda db: db.execute(
                "UPDATE alerts_told SET until = ? WHERE condition = ? AND state = 'started'"
                " AND until IS NOT NULL AND until < ?",
                (until, condition, until),
            ),
            synced=False,
        )


async def _stored(db: Handle, condition: str) -> AlertTold | None:
    rows = await db.fetch_all(
        f"SELECT {_COLUMNS} FROM alerts_told WHERE condition = ?", (condition,)
    )
    return _told(rows[0]) if rows else None


def _verdict(state: str, stored: AlertTold | None, now: float) -> Claim:
    """Why a claim on ``state`` was not taken: told already, or told too recently."""
    holding = (
        stored is not None
        and stored.state == STARTED
        and (stored.until is None or stored.until > now)
    )
    if state == STARTED:
        return Claim.ALREADY if holding else Claim.WAIT
    return Claim.WAIT if stored is not None and stored.state == STARTED else Claim.ALREADY


def _told(row: Any) -> AlertTold:
    condition, state, since, told_at, what, until = row
    return AlertTold(
        str(condition),
        str(state),
        float(since),
        float(told_at),
        str(what),
        None if until is None else float(until),
    )
