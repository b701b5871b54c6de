"""What model calls cost, in SQL both databases read alike (:class:`~gateway.store.protocols.CostStore`,
docs/cost.md#what-is-stored).

Money is kept as whole picodollars (10^-12 USD) in a BIGINT, so sums are exact integer
sums in either database: any price written with up to six decimals per million tokens
costs a whole number of them per token. A cost with more digits (a configured price
like 0.1234567) is rounded half up to the picodollar, once per call. NULL: unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from agent.cost.budget import Spent
from gateway.store.cost_records import CostHold, CostLine, CostRecord, Grouping
from gateway.store.dialect import Database, Handle
from gateway.store.message_rows import insert_messages
from gateway.store.queue_rows import delete_inbox
from gateway.store.records import NewMessage

PICO = Decimal("1e12")

_COLUMNS = (
    "at, session_key, person, kind, model, prompt_tokens, completion_tokens,"
    " cache_read_tokens, cache_write_tokens, cost_pusd"
)


def to_pico(cost: Decimal | None) -> int | None:
    if cost is None:
        return None
    return int((cost * PICO).quantize(Decimal(1), ROUND_HALF_UP))


def from_pico(value: Any) -> Decimal | None:
    return None if value is None else Decimal(int(value)) / PICO


def day_start(now: float) -> float:
    moment = datetime.fromtimestamp(now, UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def month_start(now: float) -> float:
    moment = datetime.fromtimestamp(now, UTC)
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


class SqlCosts:
    """:class:`~gateway.store.protocols.CostStore` on a :class:`Database`."""

    def __init__(self, connection: Database) -> None:
        self.connection = connection

    async def record(self, entry: CostRecord, *, release: str | None = None) -> None:
        # One trip to SQLite's thread, sharing its commit with the writes that arrive
        # beside it (gateway/store/trip.py), and no fsync of its own: a crash of the
        # process keeps it; a power cut before the next synced commit may lose it
        # (docs/cost.md#what-is-stored).
        async def write(db: Handle) -> None:
            await db.execute(
                f"INSERT INTO costs({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.at,
                    entry.session_key,
                    entry.person,
                    entry.kind,
                    entry.model,
                    entry.prompt_tokens,
                    entry.completion_tokens,
                    entry.cache_read_tokens,
                    entry.cache_write_tokens,
                    to_pico(entry.cost),
                ),
            )
            if release is not None:  # its estimate no longer counts: the cost does
                await db.execute("DELETE FROM cost_holds WHERE id = ?", (release,))
            if entry.cost is not None:  # the month's sum, kept by day (migration 13)
                await db.execute(
                    "INSERT INTO cost_days(day, cost_pusd) VALUES (?, ?) ON CONFLICT(day)"
                    " DO UPDATE SET cost_pusd = cost_days.cost_pusd + excluded.cost_pusd",
                    (utc_day_of(entry.at), to_pico(entry.cost)),
                )

        await self.connection.atomically(write, synced=False)

    async def spent(self, person: str | None, chat: str | None, now: float) -> Spent:
        async with self.connection.read() as db:
            return await _spent(db, person, chat, now)

    async def hold(self, hold: CostHold, admits: Callable[[Spent], bool]) -> bool:
        sql = self.connection.dialect

        async def judged(db: Handle) -> bool:
            for statement in sql.SERIALIZE_BUDGETS:
                await db.execute(statement)
            await db.execute("DELETE FROM cost_holds WHERE expires_at <= ?", (hold.at,))
            if not admits(await _spent(db, hold.person, hold.session_key, hold.at)):
                return False
            await db.execute(
                "INSERT INTO cost_holds(id, person, session_key, at, amount_pusd, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    hold.id,
                    hold.person,
                    hold.session_key,
                    hold.at,
                    to_pico(hold.amount),
                    hold.expires_at,
                ),
            )
            return True

        # Nothing here need outlive a power cut: a hold is in flight, or gone.
        return await self.connection.atomically(judged, synced=False)

    async def release(self, hold_id: str) -> None:
        async def drop(db: Handle) -> None:
            await db.execute("DELETE FROM cost_holds WHERE id = ?", (hold_id,))

        await self.connection.atomically(drop, synced=False)

    async def drop_holds(self) -> None:
        await self.connection.write_unsynced("DELETE FROM cost_holds")

    async def calls(
        self,
        since: float,
        until: float | None = None,
        *,
        chat: str | None = None,
        person: str | None = None,
    ) -> list[CostRecord]:
        where, params = _between(since, until, chat, person)
        async with self.connection.read() as db:
            rows = await db.fetch_all(f"SELECT {_COLUMNS} FROM costs {where} ORDER BY at", params)
        return [
            CostRecord(
                at=float(row[0]),
                session_key=row[1],
                person=row[2],
                kind=row[3],
                model=row[4],
                prompt_tokens=int(row[5]),
                completion_tokens=int(row[6]),
                cache_read_tokens=int(row[7]),
                cache_write_tokens=int(row[8]),
                cost=from_pico(row[9]),
            )
            for row in rows
        ]

    async def totals(
        self,
        by: Grouping,
        since: float,
        until: float | None = None,
        *,
        chat: str | None = None,
        person: str | None = None,
    ) -> list[CostLine]:
        if by == "day":  # a UTC day from epoch seconds is not said alike by both databases
            lines: dict[str, CostLine] = {}
            for record in await self.calls(since, until, chat=chat, person=person):
                group = datetime.fromtimestamp(record.at, UTC).strftime("%Y-%m-%d")
                lines.setdefault(group, CostLine(group)).add(record)
            return sorted(lines.values(), key=lambda line: line.group)
        column = _GROUP_COLUMNS[by]
        where, params = _between(since, until, chat, person)
        sql = (
            f"SELECT {column}, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens),"
            " SUM(cache_read_tokens), SUM(cache_write_tokens), SUM(cost_pusd),"
            f" SUM(CASE WHEN cost_pusd IS NULL THEN 1 ELSE 0 END) FROM costs {where}"
        )
        async with self.connection.read() as db:
            rows = await db.fetch_all(f"{sql} GROUP BY {column}", params)
        found = [
            CostLine(
                _GROUP_NAMES[by] if row[0] is None else str(row[0]),
                calls=int(row[1]),
                prompt_tokens=int(row[2]),
                completion_tokens=int(row[3]),
                cache_read_tokens=int(row[4]),
                cache_write_tokens=int(row[5]),
                cost=from_pico(row[6]) or Decimal(0),
                unpriced=int(row[7]),
            )
            for row in rows
        ]
        return sorted(found, key=lambda line: (-line.cost, -line.unpriced, line.group))

    async def keep_refused(
        self, session_id: str, rows: Sequence[NewMessage], consumed_inbox: Sequence[int]
    ) -> list[int]:
        now = time.time()
        sql = self.connection.dialect

        async def keep(db: Any) -> list[int]:
            ids = await insert_messages(db, sql, session_id, rows, now)
            await db.execute_many(
                "UPDATE messages SET active = 0, compacted = 0, refused = 1 WHERE id = ?",
                [(row_id,) for row_id in ids],
            )
            await delete_inbox(db, consumed_inbox)
            await db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
            return ids

        return await self.connection.atomically(keep)


async def _spent(db: Handle, person: str | None, chat: str | None, now: float) -> Spent:
    """One read that stays cheap on a long month (migration 13): the person's and the
    chat's rows of today through their covering indexes, the month from its days, and the
    holds of the calls in flight (a handful of rows). A None person or chat matches no
    row (``= NULL`` is never true), so it sums nothing."""
    day, month = day_start(now), month_start(now)
    [row] = await db.fetch_all(
        "SELECT"
        " (SELECT COALESCE(SUM(cost_pusd), 0) FROM costs WHERE person = :person AND at >= :day),"
        " (SELECT COALESCE(SUM(cost_pusd), 0) FROM costs"
        "  WHERE session_key = :chat AND at >= :day),"
        " (SELECT COALESCE(SUM(cost_pusd), 0) FROM cost_days WHERE day >= :month_day),"
        " COALESCE(SUM(CASE WHEN person = :person AND at >= :day THEN amount_pusd END), 0),"
        " COALESCE(SUM(CASE WHEN session_key = :chat AND at >= :day THEN amount_pusd END), 0),"
        " COALESCE(SUM(CASE WHEN at >= :month THEN amount_pusd END), 0)"
        " FROM cost_holds WHERE expires_at > :now",
        {
            "person": person,
            "chat": chat,
            "day": day,
            "month_day": int(month),
            "month": month,
            "now": now,
        },
    )
    user, in_chat, whole, user_held, chat_held, month_held = (
        from_pico(value) or Decimal(0) for value in row
    )
    return Spent(
        user_today=user + user_held, chat_today=in_chat + chat_held, month=whole + month_held
    )


def utc_day_of(at: float) -> int:
    """The 00:00 UTC of ``at``'s day, in epoch seconds (``cost_days.day``)."""
    return int(at // 86_400) * 86_400


_GROUP_COLUMNS = {"chat": "session_key", "person": "person", "model": "model", "kind": "kind"}
#: What a group of NULLs is called.
_GROUP_NAMES = {"chat": "(no chat)", "person": "(housekeeping)", "model": "", "kind": ""}


def _between(
    since: float, until: float | None, chat: str | None, person: str | None
) -> tuple[str, dict[str, object]]:
    """The WHERE clause of a report's calls (from ``since`` to ``until``, of one chat or
    person when given) and its parameters."""
    where = "WHERE at >= :since AND at < :until"
    params: dict[str, object] = {
        "since": since,
        "until": until if until is not None else time.time() + 86_400,
    }
    if chat is not None:
        where += " AND session_key = :chat"
        params["chat"] = chat
    if person is not None:
        where += " AND person = :person"
        params["person"] = person
    return where, params
