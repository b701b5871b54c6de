"""Replicas on one PostgreSQL database (docs/design.md#replicas): a session is held with
an advisory lock on this replica's own connection, and work stored by any replica is
announced on a channel every replica listens to (the ``inbox`` table's trigger NOTIFYs
it when the inserting transaction commits).

One connection carries both, outside the pool: when the process dies its locks and its
listening end together, and PostgreSQL frees the locks at once (kill -9 closes the
socket). When that connection breaks while the process lives, no session counts as held
until it is back; turns already running finish (their writes go through the pool) and
the periodic sweep (:class:`gateway.scheduling.scheduler.Scheduler`) finds anything
left waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging

import asyncpg

from gateway.store.coordination import OnWork
from gateway.store.postgres.connection import display

log = logging.getLogger(__name__)

#: The channel the inbox trigger announces session keys on (schema.py).
WORK_CHANNEL = "nightowl_work"
#: Waits between attempts to connect again after the connection broke.
_RECONNECT_SECONDS = (0.5, 1.0, 2.0, 5.0)
#: A lock statement that takes longer means a dead link: the connection is dropped.
STATEMENT_SECONDS = 10.0
#: TCP keepalives, so both ends notice a silent link (a partition, a paused VM) within a
#: minute: PostgreSQL then frees this replica's locks, and this replica stops counting
#: on them.
KEEPALIVE = {
    "tcp_keepalives_idle": "20",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "4",
}
_ERRORS = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)


def lock_id(key: str) -> int:
    """The advisory lock of session ``key``: 64 bits of its hash, signed as bigint is."""
    digest = hashlib.blake2b(key.encode(), digest_size=8, person=b"nightowl").digest()
    return int.from_bytes(digest, "big", signed=True)


class AdvisoryLocks:
    """:class:`~gateway.store.coordination.Coordination` on PostgreSQL."""

    shared = True

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._connection: asyncpg.Connection | None = None
        self._on_work: OnWork | None = None
        #: One statement at a time on the connection (asyncpg refuses overlapping ones).
        self._turn = asyncio.Lock()
        self._held: set[str] = set()
        self._reconnecting: asyncio.Task[None] | None = None
        self._stopped = False

    async def start(self, on_work: OnWork) -> None:
        self._on_work = on_work
        self._stopped = False
        await self._connect()

    async def _connect(self) -> None:
        connection = await asyncpg.connect(
            self.dsn, timeout=STATEMENT_SECONDS, server_settings=KEEPALIVE
        )
        try:
            await connection.add_listener(WORK_CHANNEL, self._announced)
        except BaseException:
            connection.terminate()
            raise
        connection.add_termination_listener(self._lost)
        self._connection = connection

    def _announced(self, _connection: object, _pid: int, _channel: str, key: str) -> None:
        if self._on_work is not None and not self._stopped:
            self._on_work(key)

    def _lost(self, _connection: object) -> None:
        self._connection = None
        if self._stopped:
            return
        if self._held:
            log.error(
                "the coordination connection to %s broke: %d session(s) this replica held"
                " are no longer locked; their lanes pause, nothing new starts until it is"
                " back",
                display(self.dsn),
                len(self._held),
            )
        self._held.clear()
        if self._reconnecting is None or self._reconnecting.done():
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        attempt = 0
        while not self._stopped and self._connection is None:
            await asyncio.sleep(_RECONNECT_SECONDS[min(attempt, len(_RECONNECT_SECONDS) - 1)])
            attempt += 1
            try:
                await self._connect()
            except Exception as exc:  # whatever it is, keep trying: without it nothing runs
                log.warning("coordination connection: still cannot reach PostgreSQL (%s)", exc)
                continue
            # Announcements made meanwhile are lost; the periodic sweep finds their work.
            log.info("coordination connection back after %d attempt(s)", attempt)

    @property
    def connected(self) -> bool:
        return self._connection is not None

    def holds(self, key: str) -> bool:
        return key in self._held

    async def try_hold(self, key: str) -> bool:
        held = await self._lock_call("SELECT pg_try_advisory_lock($1)", key)
        if held:
            self._held.add(key)
        return held

    async def release(self, key: str) -> None:
        if key not in self._held:
            return  # never held, or gone with the connection
        self._held.discard(key)
        await self._lock_call("SELECT pg_advisory_unlock($1)", key)

    async def _lock_call(self, statement: str, key: str) -> bool:
        """One lock statement, one at a time on the connection (asyncpg refuses two);
        False when the connection is gone or does not answer in time — then it is
        dropped, its locks go with it and the termination listener reconnects."""
        async with self._turn:
            connection = self._connection
            if connection is None:
                return False
            try:
                async with asyncio.timeout(STATEMENT_SECONDS):
                    return bool(await connection.fetchval(statement, lock_id(key)))
            except _ERRORS as exc:
                log.warning("coordination connection failed (%s); dropping it", type(exc).__name__)
                connection.terminate()
                return False

    async def stop(self) -> None:
        self._stopped = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnecting
        connection, self._connection = self._connection, None
        self._held.clear()
        if connection is not None:
            with contextlib.suppress(*_ERRORS):
                await connection.close(timeout=5)
