"""What a backend is: opened once for what it is used for (:data:`Access`), closed at
the end, and between the two each part of the gateway gets its view, typed as the
protocols in :mod:`gateway.store.protocols` (docs/design.md#storage).
:func:`gateway.store.opening.open_store` gives the one the config names."""

from __future__ import annotations

from typing import Literal, Protocol, Self

from gateway.store.coordination import Coordination
from gateway.store.protocols import (
    AlertStore,
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

#: What a store is opened for (see gateway/store/opening.py).
Access = Literal["exclusive", "read", "write", "read_only", "shared"]


class Store(Protocol):
    """A backend: opened once, then each part of the gateway gets its view.
    :func:`gateway.store.opening.open_store` gives the one the config names."""

    conversation: ConversationStore
    scheduling: SchedulingStore
    operator: OperatorStore
    pairing: PairingStore
    dashboard: DashboardStore
    memory: MemoryStore
    documents: DocumentStore
    chats: ChatStore
    #: What every model call cost (docs/cost.md#what-is-stored).
    costs: CostStore
    #: What the operator was told of each alert (docs/operations.md#alerts).
    alerts: AlertStore
    #: Which replica runs a session (docs/design.md#replicas).
    coordination: Coordination

    #: The pid of the gateway this store was opened beside (``read``/``write`` on SQLite
    #: while one runs; 0 when its pid is unknown), else None.
    beside_gateway: int | None

    @property
    def where(self) -> str:
        """Where the data is, for people to read (a file, or a DSN without password)."""
        ...

    async def open(self, access: Access | None = None) -> Self: ...

    async def close(self) -> None: ...

    async def schema_version(self) -> int: ...

    async def examine(self, timeout: float) -> DatabaseReport | DatabaseProbe:
        """What ``nightowl doctor`` asks, without opening the store (nothing created,
        migrated or locked): the file's schema version and integrity on SQLite, the
        server's schema, advisory locks and clock on PostgreSQL. A :class:`StoreError`
        says why the database cannot be read or reached."""
        ...

    async def reader(self) -> Store:
        """A store for reads beside this open one, that never waits for its writes: on
        SQLite a read-only connection of its own (close it after), on PostgreSQL this one
        (its pool serves reads)."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...
