"""What the dashboard uses of the gateway: a structural type, so the dashboard never
imports :mod:`gateway.app` (which builds it) and tests may hand it a gateway as is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from adapters.base import Adapter
from gateway.build import Providers
from gateway.config.schema import Config
from gateway.conversation.commands import Commands
from gateway.conversation.lanes import Lanes
from gateway.conversation.pairing import Pairing
from gateway.conversation.sessions import SessionRegistry
from gateway.events import EventBus
from gateway.store import Store


class GatewayParts(Protocol):
    """The running gateway's parts the dashboard reads and acts through."""

    config: Config
    events: EventBus
    providers: Providers
    sessions: SessionRegistry
    lanes: Lanes
    commands: Commands
    pairing: Pairing

    @property
    def adapters(self) -> Mapping[str, Adapter]: ...

    @property
    def store(self) -> Store: ...

    def current_window(self) -> int: ...
