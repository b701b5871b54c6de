"""The PostgreSQL backend: the same views as SQLite's over an asyncpg pool
(``store.backend: postgres``), for people who outgrow one process (docs/design.md#postgresql).
"""

from __future__ import annotations

from typing import Self

from gateway.store.chats import SQLiteChats
from gateway.store.conversation import SQLiteConversation
from gateway.store.coordination import Coordination
from gateway.store.dashboard import SQLiteDashboard
from gateway.store.documents import SQLiteDocuments
from gateway.store.memory import SQLiteMemory
from gateway.store.operator import SQLiteOperator
from gateway.store.pairing import SQLitePairing
from gateway.store.postgres.connection import Access, PgConnection
from gateway.store.postgres.coordination import AdvisoryLocks
from gateway.store.protocols import (
    ChatStore,
    ConversationStore,
    DashboardStore,
    DocumentStore,
    MemoryStore,
    OperatorStore,
    PairingStore,
    SchedulingStore,
)
from gateway.store.scheduling import SQLiteScheduling


class PgOperator(SQLiteOperator):
    """The operator's view where PostgreSQL keeps things its own way."""

    connection: PgConnection

    async def integrity_check(self) -> str:
        """PostgreSQL checks its own pages; reaching every table is what is left to see."""
        async with self.connection.read() as db:
            await db.execute_fetchall("SELECT count(*) FROM sessions")
        return "ok"

    async def scrub(self) -> bool:
        """Vacuum the tables an erase touched, so their dead rows are reclaimed (outside
        a transaction, as VACUUM must run)."""
        async with self.connection.raw() as connection:
            for table in (
                "messages",
                "inbox",
                "reminders",
                "sessions",
                "memories",
                "document_parts",
            ):
                await connection.execute(f"VACUUM {table}")
        return True


class PostgresStore:
    """One PostgreSQL database: open it, then hand each part of the gateway its view.
    Several gateways may share it (docs/design.md#replicas)."""

    def __init__(self, dsn: str, *, pool_size: int = 10) -> None:
        self.connection = PgConnection(dsn, pool_size=pool_size)
        self.conversation: ConversationStore = SQLiteConversation(self.connection)
        self.scheduling: SchedulingStore = SQLiteScheduling(self.connection)
        self.operator: OperatorStore = PgOperator(self.connection)
        self.pairing: PairingStore = SQLitePairing(self.connection)
        self.dashboard: DashboardStore = SQLiteDashboard(self.connection)
        self.memory: MemoryStore = SQLiteMemory(self.connection)
        self.documents: DocumentStore = SQLiteDocuments(self.connection)
        self.chats: ChatStore = SQLiteChats(self.connection)
        self.coordination: Coordination = AdvisoryLocks(dsn)

    @property
    def path(self) -> str:
        return self.connection.path

    async def open(self, access: Access = "exclusive") -> Self:
        await self.connection.open(access)
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
