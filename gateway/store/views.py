"""The views each backend hands out over its one connection (docs/design.md#storage)."""

from __future__ import annotations

from gateway.store import protocols as p
from gateway.store.alerts import SqlAlerts
from gateway.store.chats import SqlChats
from gateway.store.conversation import SqlConversation
from gateway.store.costs import SqlCosts
from gateway.store.dashboard import SqlDashboard
from gateway.store.dialect import Database
from gateway.store.documents import SqlDocuments
from gateway.store.memory import SqlMemory
from gateway.store.operator import SqlOperator
from gateway.store.pairing import SqlPairing
from gateway.store.scheduling import SqlScheduling


class Views:
    """Each part of the gateway's view, all over the one ``connection`` (and so its lock
    and transactions). Typed as the protocols: mypy proves each view implements its
    protocol; consumers type against the protocols, never against a backend."""

    def __init__(self, connection: Database, *, operator: p.OperatorStore | None = None) -> None:
        self.conversation: p.ConversationStore = SqlConversation(connection)
        self.scheduling: p.SchedulingStore = SqlScheduling(connection)
        self.operator: p.OperatorStore = operator or SqlOperator(connection)
        self.pairing: p.PairingStore = SqlPairing(connection)
        self.dashboard: p.DashboardStore = SqlDashboard(connection)
        self.memory: p.MemoryStore = SqlMemory(connection)
        self.documents: p.DocumentStore = SqlDocuments(connection)
        self.chats: p.ChatStore = SqlChats(connection)
        self.costs: p.CostStore = SqlCosts(connection)
        self.alerts: p.AlertStore = SqlAlerts(connection)
