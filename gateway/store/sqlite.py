"""The SQLite backend: one connection (sqlite3 on its own thread, WAL) and the views over
it (docs/design.md#storage)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from gateway.store.backend import Access, Store
from gateway.store.connection import Connection
from gateway.store.coordination import Coordination, OneProcess
from gateway.store.errors import DataDirInUse, StoreError
from gateway.store.inspection import inspect_file
from gateway.store.opened import Opened
from gateway.store.records import DatabaseProbe, DatabaseReport
from gateway.store.views import Views


class SQLiteStore(Views, Opened):
    """``<data_dir>/state.db``: open it, then hand each part of the gateway its view
    (:class:`Views`, all over the one :class:`Connection`)."""

    def __init__(self, path: str | Path) -> None:
        self.connection = Connection(path)
        self.beside_gateway: int | None = None
        super().__init__(self.connection)
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
