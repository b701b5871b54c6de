"""The SQLite backend: one connection (aiosqlite, WAL) and the four views over it."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from gateway.store.chats import SQLiteChats
from gateway.store.connection import Access, Connection
from gateway.store.conversation import SQLiteConversation
from gateway.store.coordination import Coordination, OneProcess
from gateway.store.dashboard import SQLiteDashboard
from gateway.store.documents import SQLiteDocuments
from gateway.store.memory import SQLiteMemory
from gateway.store.operator import SQLiteOperator
from gateway.store.pairing import SQLitePairing
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


class SQLiteStore:
    """``<data_dir>/state.db``: open it, then hand each part of the gateway its view.

    ``conversation``, ``scheduling``, ``operator`` and ``pairing`` share the one :class:`Connection`
    (and so its lock and transactions); consumers type against the protocols in
    :mod:`gateway.store.protocols`, never against this class.
    """

    def __init__(self, path: str | Path) -> None:
        self.connection = Connection(path)
        # Typed as the protocols: mypy proves each view implements its protocol.
        self.conversation: ConversationStore = SQLiteConversation(self.connection)
        self.scheduling: SchedulingStore = SQLiteScheduling(self.connection)
        self.operator: OperatorStore = SQLiteOperator(self.connection)
        self.pairing: PairingStore = SQLitePairing(self.connection)
        self.dashboard: DashboardStore = SQLiteDashboard(self.connection)
        self.memory: MemoryStore = SQLiteMemory(self.connection)
        self.documents: DocumentStore = SQLiteDocuments(self.connection)
        self.chats: ChatStore = SQLiteChats(self.connection)
        #: The data-dir lock makes this process the only one (docs/design.md#replicas).
        self.coordination: Coordination = OneProcess()

    @property
    def path(self) -> Path:
        return self.connection.path

    async def open(self, access: Access = "exclusive") -> Self:
        """Open the file (see :meth:`Connection.open` for ``access``)."""
        await self.connection.open(access)
        return self

    async def close(self) -> None:
        await self.connection.close()

    async def schema_version(self) -> int:
        return await self.connection.schema_version()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
