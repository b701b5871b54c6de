"""The SQLite backend: one connection (sqlite3 on its own thread, WAL) and the views over
it (docs/design.md#storage)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from gateway.store.backend import Access, Store
from gateway.store.chats import SqlChats
from gateway.store.connection import Connection
from gateway.store.conversation import SqlConversation
from gateway.store.coordination import Coordination, OneProcess
from gateway.store.costs import SqlCosts
from gateway.store.dashboard import SqlDashboard
from gateway.store.documents import SqlDocuments
from gateway.store.errors import DataDirInUse, StoreError
from gateway.store.inspection import inspect_file
from gateway.store.memory import SqlMemory
from gateway.store.operator import SqlOperator
from gateway.store.pairing import SqlPairing
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


class SQLiteStore:
    """``<data_dir>/state.db``: open it, then hand each part of the gateway its view.

    ``conversation``, ``scheduling``, ``operator`` and ``pairing`` share the one :class:`Connection`
    (and so its lock and transactions); consumers type against the protocols in
    :mod:`gateway.store.protocols`, never against this class.
    """

    def __init__(self, path: str | Path) -> None:
        self.connection = Connection(path)
        self.beside_gateway: int | None = None
        # Typed as the protocols: mypy proves each view implements its protocol.
        self.conversation: ConversationStore = SqlConversation(self.connection)
        self.scheduling: SchedulingStore = SqlScheduling(self.connection)
        self.operator: OperatorStore = SqlOperator(self.connection)
        self.pairing: PairingStore = SqlPairing(self.connection)
        self.dashboard: DashboardStore = SqlDashboard(self.connection)
        self.memory: MemoryStore = SqlMemory(self.connection)
        self.documents: DocumentStore = SqlDocuments(self.connection)
        self.chats: ChatStore = SqlChats(self.connection)
        self.costs: CostStore = SqlCosts(self.connection)
        #: The data-dir lock makes this process the only one (docs/design.md#replicas).
        self.coordination: Coordination = OneProcess()

    @property
    def path(self) -> Path:
        return self.connection.path

    @property
    def where(self) -> str:
        return str(self.path)

    async def open(self, access: Access | None = None) -> Self:
        """Open the file for ``access`` (see gateway/store/opening.py): an operator's
        ``read`` or ``write`` locks the data dir when no gateway holds it, and beside a
        running one opens read-only, or shared through WAL (:meth:`Connection.open`)."""
        access = access or "exclusive"
        if access != "read" and access != "write":
            await self.connection.open(access)
            return self
        try:
            await self.connection.open("exclusive")
            return self
        except DataDirInUse as running:
            self.beside_gateway = running.pid or 0
        except StoreError as exc:  # read what this user may not write
            if access == "write" or exc.reason not in ("permission", "read_only"):
                raise
        await self.connection.open("read_only" if access == "read" else "shared")
        return self

    async def examine(self, timeout: float) -> DatabaseReport | DatabaseProbe:
        """The file's schema version and ``PRAGMA integrity_check``, read-only."""
        return await inspect_file(self.path)

    async def reader(self) -> Store:
        """A read-only connection of its own beside the one writer (WAL lets it read
        while the gateway writes)."""
        return await SQLiteStore(self.path).open("read_only")

    async def close(self) -> None:
        await self.connection.close()

    async def schema_version(self) -> int:
        return await self.connection.schema_version()

    async def __aenter__(self) -> Self:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
