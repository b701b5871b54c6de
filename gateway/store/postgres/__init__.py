"""The PostgreSQL backend: the same views as SQLite's over an asyncpg pool
(``store.backend: postgres``), for people who outgrow one process (docs/design.md#postgresql).
"""

from __future__ import annotations

from typing import Self

from gateway.store.backend import Access, Store
from gateway.store.chats import SqlChats
from gateway.store.conversation import SqlConversation
from gateway.store.coordination import Coordination
from gateway.store.costs import SqlCosts
from gateway.store.dashboard import SqlDashboard
from gateway.store.documents import SqlDocuments
from gateway.store.memory import SqlMemory
from gateway.store.operator import SqlOperator
from gateway.store.pairing import SqlPairing
from gateway.store.postgres.connection import PgConnection
from gateway.store.postgres.coordination import AdvisoryLocks
from gateway.store.postgres.probe import probe
from gateway.store.protocols import (
    ChatStore,
    ConversationStore,
    CostStore,
    DashboardStore,
    DocumentStore,
    MemoryStore,
    OperatorStore,
    PairingStore,
    SchedulingStore,
)
from gateway.store.records import DatabaseProbe, DatabaseReport
from gateway.store.scheduling import SqlScheduling

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


class PostgresStore:
    """One PostgreSQL database: open it, then hand each part of the gateway its view.
    Several gateways may share it (docs/design.md#replicas)."""

    def __init__(self, dsn: str, *, pool_size: int = 10) -> None:
        self.connection = PgConnection(dsn, pool_size=pool_size)
        #: Replicas are not a gateway beside this one: they share the database.
        self.beside_gateway: int | None = None
        self.conversation: ConversationStore = SqlConversation(self.connection)
        self.scheduling: SchedulingStore = SqlScheduling(self.connection)
        self.operator: OperatorStore = PgOperator(self.connection)
        self.pairing: PairingStore = SqlPairing(self.connection)
        self.dashboard: DashboardStore = SqlDashboard(self.connection)
        self.memory: MemoryStore = SqlMemory(self.connection)
        self.documents: DocumentStore = SqlDocuments(self.connection)
        self.chats: ChatStore = SqlChats(self.connection)
        self.costs: CostStore = SqlCosts(self.connection)
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

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
