"""Pairing in the store, on either database: strangers' requests and the users approved through them
(docs/design.md#pairing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gateway.store.dialect import Database, Handle, Row
from gateway.store.records import ApprovedUser, PairingRequest

_REQUEST_COLUMNS = "platform, user_id, user_name, chat_id, code, created_at, expires_at"
_APPROVED_COLUMNS = "platform, user_id, user_name, approved_at, approved_by"


class SqlPairing:
    """:class:`~gateway.store.protocols.PairingStore` on a :class:`Connection`.

    Beside a running gateway the CLI writes here through its own connection; every
    change is one transaction, and the ``pairing_revision`` row (moved by triggers on
    ``paired_users``) tells the gateway its copy of the approved users is stale.
    """

    def __init__(self, connection: Database) -> None:
        self.connection = connection

    async def request(
        self,
        candidate: PairingRequest,
        *,
        limit: int,
        fresh_code: Callable[[], str],
        full_seconds: float | None = None,
    ) -> PairingRequest | None:
        async with self.connection.transaction() as db:
            await _remove_expired(db, candidate.created_at)
            rows = list(
                await db.fetch_all(
                    f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests"
                    " WHERE platform = ? AND user_id = ?",
                    (candidate.platform, candidate.user_id),
                )
            )
            if rows:
                return _request(rows[0])
            waiting = await _count(
                db, "SELECT COUNT(*) FROM pairing_requests WHERE platform = ?", candidate.platform
            )
            if waiting >= limit:
                return None
            code = candidate.code
            while await _count(db, "SELECT COUNT(*) FROM pairing_requests WHERE code = ?", code):
                code = fresh_code()
            stored = replace(candidate, code=code)
            await db.execute(
                f"INSERT INTO pairing_requests({_REQUEST_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    stored.platform,
                    stored.user_id,
                    stored.user_name,
                    stored.chat_id,
                    stored.code,
                    stored.created_at,
                    stored.expires_at,
                ),
            )
            if full_seconds is not None and waiting + 1 >= limit:
                # Full: every waiting code ends soon, so the slots cannot be held for long.
                soon = candidate.created_at + full_seconds
                await db.execute(
                    "UPDATE pairing_requests SET expires_at = ? WHERE platform = ? AND expires_at > ?",
                    (soon, candidate.platform, soon),
                )
                stored = replace(stored, expires_at=min(stored.expires_at, soon))
        return stored

    async def approve(self, code: str, by: str, now: float) -> ApprovedUser | None:
        async with self.connection.transaction() as db:
            await _remove_expired(db, now)
            request = await _take(db, code)
            if request is None:
                return None
            user = ApprovedUser(request.platform, request.user_id, request.user_name, now, by)
            await db.execute(
                f"INSERT INTO paired_users({_APPROVED_COLUMNS}) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name,"
                " approved_at = excluded.approved_at, approved_by = excluded.approved_by",
                (user.platform, user.user_id, user.user_name, user.approved_at, user.approved_by),
            )
        return user

    async def deny(self, code: str, now: float) -> PairingRequest | None:
        async with self.connection.transaction() as db:
            await _remove_expired(db, now)
            return await _take(db, code)

    async def withdraw(
        self, now: float, platform: str | None = None, user_id: str | None = None
    ) -> list[PairingRequest]:
        async with self.connection.transaction() as db:
            await _remove_expired(db, now)
            where, params = _who(platform, user_id)
            rows = list(
                await db.fetch_all(
                    f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests{where}", params
                )
            )
            await db.execute(f"DELETE FROM pairing_requests{where}", params)
        return [_request(row) for row in rows]

    async def revoke(self, platform: str, user_id: str) -> bool:
        async with self.connection.transaction() as db:
            cursor = await db.execute(
                "DELETE FROM paired_users WHERE platform = ? AND user_id = ?", (platform, user_id)
            )
        return cursor.rowcount > 0

    async def pending(self, now: float) -> list[PairingRequest]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE expires_at > ?"
                " ORDER BY created_at, platform, user_id",
                (now,),
            )
        return [_request(row) for row in rows]

    async def approved(self) -> list[ApprovedUser]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                f"SELECT {_APPROVED_COLUMNS} FROM paired_users ORDER BY approved_at, platform, user_id"
            )
        return [ApprovedUser(*row) for row in rows]

    async def revision(self) -> int:
        async with self.connection.read() as db:
            return await _count(db, "SELECT revision FROM pairing_revision")


def _who(platform: str | None, user_id: str | None) -> tuple[str, tuple[str, ...]]:
    if platform is None:
        return "", ()
    if user_id is None:
        return " WHERE platform = ?", (platform,)
    return " WHERE platform = ? AND user_id = ?", (platform, user_id)


async def _remove_expired(db: Handle, now: float) -> None:
    await db.execute("DELETE FROM pairing_requests WHERE expires_at <= ?", (now,))


async def _take(db: Handle, code: str) -> PairingRequest | None:
    """Remove the pending request holding ``code``; returns it."""
    # SELECT then DELETE, not DELETE ... RETURNING: older SQLite builds (before 3.35,
    # still shipped by some distributions) lack it. Inside one transaction either way.
    rows = list(
        await db.fetch_all(
            f"SELECT {_REQUEST_COLUMNS} FROM pairing_requests WHERE code = ?", (code,)
        )
    )
    if not rows:
        return None
    await db.execute("DELETE FROM pairing_requests WHERE code = ?", (code,))
    return _request(rows[0])


async def _count(db: Handle, sql: str, *params: object) -> int:
    rows = list(await db.fetch_all(sql, params))
    return int(rows[0][0]) if rows else 0


def _request(row: Row) -> PairingRequest:
    return PairingRequest(*row)
