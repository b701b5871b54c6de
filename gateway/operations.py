"""What an operator may read of a running gateway and do to it: the whole of what the
dashboard sees (docs/design.md#dashboard).

Every action goes through the part that owns it, never around it: a compression runs
in the session's lane after the turn in progress, like ``/compress``; forgetting a chat
erases it in its lane, so never under a turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from adapters.base import Adapter
from agent.cost.budget import Budgets
from agent.messages import JSON
from gateway.alerts import ActiveAlert
from gateway.conversation.commands import Commands
from gateway.conversation.fullness import Fullness
from gateway.conversation.lanes import Lanes
from gateway.conversation.pairing import Pairing
from gateway.conversation.sessions import SessionRegistry
from gateway.events import EventBus, Handler
from gateway.store import ApprovedUser, PairingRequest, Store


@dataclass(frozen=True)
class SessionNow:
    """An open session as it stands: its fullness, where it compresses, its model."""

    fullness: Fullness
    compresses_at: int
    model: str
    #: The context engine's saved state (cooldowns, counters).
    engine_state: JSON


@dataclass(frozen=True)
class Forgotten:
    messages: int
    #: False when the write-ahead log could not be truncated yet (it will be).
    scrubbed: bool


class Operations:
    """The operator's handle on the gateway; :class:`~gateway.app.Gateway` builds one."""

    def __init__(
        self,
        *,
        store: Store,
        events: EventBus,
        sessions: SessionRegistry,
        lanes: Lanes,
        commands: Commands,
        pairing: Pairing,
        adapters: Mapping[str, Adapter],
        model: Callable[[], str],
        window: Callable[[], int],
        budgets: Budgets | None = None,
        alerts: Callable[[], list[ActiveAlert]] = list,
        refusing: Callable[[], list[tuple[str, str, float]]] = list,
    ) -> None:
        self.store = store
        self._events = events
        self._sessions = sessions
        self._lanes = lanes
        self._commands = commands
        self._pairing = pairing
        self._adapters = adapters
        self._model = model
        self._window = window
        #: The budgets the config sets (docs/cost.md#budgets), for the overview.
        self.budgets = budgets or Budgets()
        self._alerts = alerts
        self._refusing = refusing

    # -- reading ---------------------------------------------------------------------------

    def subscribe(
        self, events: Iterable[str], handler: Handler, *, name: str, inline: bool = False
    ) -> None:
        self._events.subscribe(events, handler, name=name, inline=inline)

    @property
    def platforms(self) -> Mapping[str, Adapter]:
        """The adapters running, by platform (their health is theirs to say)."""
        return self._adapters

    def model(self) -> str:
        """The main model as people are told of it (``qwen3:8b at 127.0.0.1:11434``,
        ``gpt-4o via openai``: gateway/config/routes.py ``model_label``)."""
        return self._model()

    def window(self) -> int:
        """The main model's window now (docs/design.md#window-resolution)."""
        return self._window()

    def busy(self, key: str) -> bool:
        return self._lanes.busy(key)

    async def session_now(self, key: str, session_id: str | None = None) -> SessionNow | None:
        """The session of ``key`` as the next request would see it; None when it has none.

        With ``session_id``, only a session open in this gateway since its start is
        measured (a listing does not open every chat); without, it is opened."""
        if session_id is not None:
            cached = self._sessions.cached(key)
            if cached is None or cached.id != session_id:
                return None
        runtime = await self._sessions.existing(key)  # with its window now
        if runtime is None:
            return None
        _, fullness = await self._commands.fullness(runtime)
        engine = runtime.engine
        return SessionNow(
            fullness, engine.threshold_tokens, runtime.agent.provider.model, engine.export_state()
        )

    def alerts(self) -> list[ActiveAlert]:
        """The alert conditions holding now (docs/operations.md#alerts), oldest first."""
        return self._alerts()

    def budgets_refusing(self) -> list[tuple[str, str, float]]:
        """(budget, subject, resets at) of each budget refusing calls now (docs/cost.md#budgets)."""
        return self._refusing()

    async def pending_pairings(self) -> list[PairingRequest]:
        return await self._pairing.pending()

    async def approved_users(self) -> list[ApprovedUser]:
        return await self._pairing.approved()

    # -- acting ----------------------------------------------------------------------------

    async def compress(self, key: str) -> str:
        """Compress now, as ``/compress`` does; the sentence says how it went."""
        return await self._commands.compress(key, None)

    async def forget(self, key: str) -> Forgotten:
        """Erase everything stored under ``key`` (in its lane), then scrub freed pages."""

        async def erase() -> int:
            return await self.store.operator.forget(key)

        erased = await self._lanes.submit(key, erase)
        await self._sessions.existing(key)  # drops the runtime of what is gone
        return Forgotten(erased, await self.store.operator.scrub())

    async def approve(self, code: str, by: str) -> ApprovedUser | None:
        return await self._pairing.approve(code, by)

    async def deny(self, code: str) -> PairingRequest | None:
        return await self._pairing.deny_request(code)
