"""The PostgreSQL backend: the same views as SQLite's over an asyncpg pool
(``store.backend: postgres``), for people who outgrow one process (docs/design.md#postgresql).
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

from gateway.store.backend import Access, Store
from gateway.store.coordination import Coordination
from gateway.store.opened import Opened
from gateway.store.operator import SqlOperator
from gateway.store.postgres.connection import PgConnection
from gateway.store.postgres.coordination import AdvisoryLocks
from gateway.store.postgres.probe import probe
from gateway.store.records import DatabaseProbe, DatabaseReport
from gateway.store.views import Views

#: Connections an operator's command keeps open.
OPERATOR_POOL = 2


class PgOperator(SqlOperator):
    """The operator's view where PostgreSQL keeps things its own way."""

    connection: PgConnection

    async def integrity_check(self) -> str:
        """PostgreSQL checks its own pages; reaching every table is what is left to see."""
        async with self.connection.read() as db:
            await db.fetch_all("SELECT count(*) FROM sessions")
        return "ok"

    async def scrub(self) -> bool:
        """Vacuum the tables an erase touched, so their dead rows are reclaimed (outside
        a transaction, as VACUUM must run)."""
        await self.connection.vacuum(
            ("messages", "inbox", "reminders", "sessions", "memories", "document_parts")
        )
        return True


class PostgresStore(Views, Opened):
    """One PostgreSQL database: open it, then hand each part of the gateway its view.
    Several gateways may share it (docs/design.md#replicas)."""

    def __init__(self, dsn: str, *, pool_size: int = 10, data_dir: Path | None = None) -> None:
        self.connection = PgConnection(dsn, pool_size=pool_size, data_dir=data_dir)
        #: Replicas are not a gateway beside this one: they share the database.
        self.beside_gateway: int | None = None
        super().__init__(self.connection, operator=PgOperator(self.connection))
        self.coordination: Coordination = AdvisoryLocks(dsn)

    @property
    def path(self) -> str:
        return self.connection.path

    @property
    def where(self) -> str:
        return self.connection.path

    async def open(self, access: Access | None = None) -> Self:
        """A gateway (``exclusive``) migrates; an operator's command (``read``,
        ``write``) shares the database with the replicas, on a few connections."""
        access = access or "exclusive"
        if access == "read" or access == "write":
            self.connection.pool_size = min(self.connection.pool_size, OPERATOR_POOL)
            access = "shared"
        await self.connection.open(access)
        return self

    async def examine(self, timeout: float) -> DatabaseReport | DatabaseProbe:
        """The server's schema version, advisory locks and clock, on connections of its
        own (gateway/store/postgres/probe.py)."""
        return await probe(self.connection.dsn, timeout)

    async def reader(self) -> Store:
        """This store: its pool serves reads beside the writes."""
        return self

    async def close(self) -> None:
        await self.coordination.stop()
        await self.connection.close()

    async def schema_version(self) -> int:
        return await self.connection.schema_version()
