"""An in-process event bus and the user hooks subscribed to it (docs/design.md#events, #hooks).

Emitting never blocks a turn: every hook runs in its own task, bounded by a timeout,
and a hook that raises or hangs is logged and forgotten. The gateway's own observers,
plain functions that return at once, are called in the emitter's turn (``inline``).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

log = logging.getLogger(__name__)

#: What a hook receives: the event's fields as a plain dict, its own copy.
Payload = dict[str, Any]
Handler = Callable[[str, Payload], Awaitable[None] | None]


@dataclass(frozen=True)
class Event:
    """One thing that happened, named as hooks subscribe to it (docs/design.md#events).

    Each kind is a small frozen class, so an emitter cannot misspell a field or forget
    one; hooks and the dashboard get :meth:`payload`, a fresh dict per handler."""

    name: ClassVar[str]

    def payload(self) -> Payload:
        return asdict(self)  # copies lists too: one handler's change is its own


@dataclass(frozen=True)
class GatewayStarted(Event):
    name = "gateway:start"
    platforms: list[str]


@dataclass(frozen=True)
class GatewayStopped(Event):
    name = "gateway:stop"


@dataclass(frozen=True)
class SessionEvent(Event):
    session_id: str
    session_key: str


@dataclass(frozen=True)
class SessionStarted(SessionEvent):
    name = "session:start"


@dataclass(frozen=True)
class SessionReset(SessionEvent):
    name = "session:reset"


@dataclass(frozen=True)
class Compressed(SessionEvent):
    """A compression committed; ``old_session_id`` is empty when it was in place."""

    name = "session:compress"
    in_place: bool
    old_session_id: str
    trigger_source: str
    method: str
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int


@dataclass(frozen=True)
class CompressionFailed(SessionEvent):
    name = "session:compress_failed"
    trigger_source: str
    commit_status: str
    failure_class: str


@dataclass(frozen=True)
class MessageReceived(Event):
    name = "message:received"
    session_key: str
    platform: str
    addressed: bool


@dataclass(frozen=True)
class MessageSent(Event):
    name = "message:sent"
    platform: str
    chat_id: str
    chars: int


@dataclass(frozen=True)
class TurnEnded(SessionEvent):
    name = "agent:turn_end"
    requests: int
    seconds: float


@dataclass(frozen=True)
class TurnFailed(SessionEvent):
    name = "agent:error"
    kind: str  # the provider error's kind


@dataclass(frozen=True)
class ModelRequest(Event):
    """One request to a model: ``kind`` chat, summary or flush; ``outcome`` ok or the
    error's kind; token counts from the provider's usage (0 when it sent none)."""

    name = "llm:request"
    kind: str
    provider: str
    model: str
    outcome: str
    seconds: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    retry_after: float | None = None
    #: What it cost in USD, exact, as text ("0.000123"); None: unpriced or failed
    #: (docs/cost.md#what-is-stored).
    cost: str | None = None
    #: A failure as the operator reads it: the kind, the HTTP status, then at most 200
    #: characters of the server's words (the route's key redacted; the log and the
    #: alerts redact every configured secret); "" when it succeeded.
    error: str = ""
    #: The model as people are told of it: ``qwen3:8b at 127.0.0.1:11434`` on a server
    #: of one's own, ``gpt-4o-mini via openai`` on the provider's API (no credentials).
    label: str = ""


@dataclass(frozen=True)
class BudgetReached(Event):
    """A budget refused a call for the first time in its period (docs/cost.md#budgets):
    ``budget`` user_daily, chat_daily or monthly; ``subject`` the person, the chat or
    "bot"; ``limit`` in USD as text; ``resets_at`` epoch seconds."""

    name = "budget:reached"
    budget: str
    subject: str
    limit: str
    resets_at: float


@dataclass(frozen=True)
class AlertChanged(Event):
    """The operator was told that a condition started or cleared
    (docs/operations.md#alerts): ``state`` started or cleared, ``since`` epoch seconds;
    ``sent`` False when there is nobody to tell (no ``alerts.to``, no webhook): the log
    and the events still show it."""

    name = "gateway:alert"
    condition: str
    state: str
    since: float
    text: str
    sent: bool = True


def _kinds(base: type[Event]) -> list[type[Event]]:
    return [k for sub in base.__subclasses__() for k in (sub, *_kinds(sub))]


EVENTS = frozenset(k.name for k in _kinds(Event) if "name" in vars(k))


@dataclass(frozen=True)
class Subscription:
    events: frozenset[str]
    handler: Handler
    name: str
    timeout: float = 5.0
    #: Called at once in the emitter's turn (the gateway's own quick observers).
    inline: bool = False


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []
        self._running: set[asyncio.Task[None]] = set()

    def subscribe(
        self,
        events: Iterable[str],
        handler: Handler,
        *,
        name: str = "",
        timeout: float = 5.0,
        inline: bool = False,
    ) -> None:
        """``handler(event, payload)`` for each of ``events`` (``"*"``: all), in a task of
        its own bounded by ``timeout``; ``inline``: a plain function of the gateway's own
        that returns at once, called in the emitter's turn without a task (a model call's
        event would otherwise cost a task per observer)."""
        if inline and inspect.iscoroutinefunction(handler):
            raise ValueError(f"an inline observer must be a plain function: {handler!r}")
        wanted = frozenset(events)
        unknown = wanted - EVENTS - {"*"}
        if unknown:
            raise ValueError(f"unknown event(s): {', '.join(sorted(unknown))}")
        label = name or getattr(handler, "__qualname__", repr(handler))
        self._subscriptions.append(Subscription(wanted, handler, label, timeout, inline))

    def emit(self, event: Event) -> None:
        """Hand ``event`` to every subscriber of its name; returns at once."""
        for subscription in self._subscriptions:
            if event.name not in subscription.events and "*" not in subscription.events:
                continue
            if subscription.inline:
                try:
                    outcome = subscription.handler(event.name, event.payload())
                except Exception:  # an observer's bug never breaks the emitter
                    log.exception("observer %s for %s raised", subscription.name, event.name)
                    continue
                if inspect.iscoroutine(outcome):  # not awaited here: a bug, said once
                    outcome.close()
                    log.error("inline observer %s returned a coroutine", subscription.name)
            else:
                task = asyncio.get_running_loop().create_task(
                    self._deliver(subscription, event.name, event.payload())
                )
                self._running.add(task)
                task.add_done_callback(self._running.discard)

    async def _deliver(self, subscription: Subscription, event: str, payload: Payload) -> None:
        try:
            async with asyncio.timeout(subscription.timeout):
                outcome = subscription.handler(event, payload)
                if inspect.isawaitable(outcome):
                    await outcome
        except TimeoutError:
            log.warning(
                "hook %s for %s timed out after %.1fs",
                subscription.name,
                event,
                subscription.timeout,
            )
        except Exception:  # user code: log it, never let it break the gateway
            log.exception("hook %s for %s raised", subscription.name, event)

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait (bounded) for handlers still running, e.g. before exit."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout)


def load_hook(handler: str, search_dirs: Iterable[Path] = ()) -> Callable[..., Any]:
    """Import ``"module:function"``, also from ``search_dirs`` (e.g. ``<data_dir>/hooks``).

    The dirs go to the end of ``sys.path``: a file there named like a standard or
    installed module (``json.py``, ``yaml.py``) never replaces it for the whole process;
    name hook modules for what they are. A hook function takes ``(event, payload)``, or
    just ``(payload)``; it may be async.
    """
    module_name, _, attribute = handler.partition(":")
    for directory in search_dirs:
        if directory.is_dir() and str(directory) not in sys.path:
            sys.path.append(str(directory))
    module = importlib.import_module(module_name)
    function = getattr(module, attribute)
    parameters = inspect.signature(function).parameters
    if len(parameters) == 1:
        return lambda event, payload: function(payload)
    return function
