"""An in-process event bus and the user hooks subscribed to it (docs/design.md#events, #hooks).

Emitting never blocks a turn: every handler runs in its own task, bounded by a timeout,
and a handler that raises or hangs is logged and forgotten.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

EVENTS = frozenset(
    {
        "gateway:start",
        "gateway:stop",
        "session:start",
        "session:reset",
        "session:compress",
        "session:compress_failed",
        "message:received",
        "message:sent",
        "agent:turn_end",
        "agent:error",
        "llm:request",
    }
)

Handler = Callable[[str, dict[str, Any]], Awaitable[None] | None]


@dataclass(frozen=True)
class Subscription:
    events: frozenset[str]
    handler: Handler
    name: str
    timeout: float = 5.0


class EventBus:
    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []
        self._running: set[asyncio.Task[None]] = set()

    def subscribe(
        self, events: Iterable[str], handler: Handler, *, name: str = "", timeout: float = 5.0
    ) -> None:
        wanted = frozenset(events)
        unknown = wanted - EVENTS - {"*"}
        if unknown:
            raise ValueError(f"unknown event(s): {', '.join(sorted(unknown))}")
        label = name or getattr(handler, "__qualname__", repr(handler))
        self._subscriptions.append(Subscription(wanted, handler, label, timeout))

    def emit(self, event: str, payload: dict[str, Any]) -> None:
        """Hand ``payload`` to every subscriber of ``event``; returns at once."""
        assert event in EVENTS, event
        for subscription in self._subscriptions:
            if event in subscription.events or "*" in subscription.events:
                task = asyncio.get_running_loop().create_task(
                    self._deliver(subscription, event, dict(payload))
                )
                self._running.add(task)
                task.add_done_callback(self._running.discard)

    async def _deliver(
        self, subscription: Subscription, event: str, payload: dict[str, Any]
    ) -> None:
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
