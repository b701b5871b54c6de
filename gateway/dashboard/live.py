"""What the dashboard knows only from the event bus: when each platform last received
and sent, how the provider is doing, the compressions since the start.

It never reaches into a turn: :meth:`LiveState.observe` is subscribed to the events the
gateway emits anyway (docs/design.md#events) and keeps a few numbers; the pages read
them. What survives a restart is read from the store instead.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.events import Payload

#: The provider's numbers cover this much of the past.
WINDOW_SECONDS = 3600.0
#: At most this many requests are remembered for the latency (a busy hour's worth).
MAX_REQUESTS = 20_000

#: The events the dashboard and /metrics listen to.
OBSERVED_EVENTS = (
    "message:received",
    "message:sent",
    "agent:turn_end",
    "agent:error",
    "llm:request",
    "session:compress",
    "session:compress_failed",
    "gateway:alert",
    "budget:reached",
)


def compression_outcome(event: str, payload: Payload) -> str:
    """``committed`` (a model's summary), ``fallback`` (the deterministic one),
    ``aborted`` or ``failed`` (nothing changed)."""
    if event == "session:compress":
        return "fallback" if payload.get("method") == "deterministic_fallback" else "committed"
    return str(payload.get("commit_status") or "failed")


@dataclass
class ProviderHealth:
    last_error: str | None = None
    last_error_at: float | None = None
    #: (when, seconds) of each successful chat request.
    latencies: deque[tuple[float, float]] = field(
        default_factory=lambda: deque(maxlen=MAX_REQUESTS)
    )
    #: (when, seconds the provider asked to wait) of each rate-limited request.
    rate_limits: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=1000))
    requests: Counter[tuple[str, str]] = field(default_factory=Counter)


class LiveState:
    """Numbers kept from events since the gateway started."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.started_at = clock()
        self.last_received: dict[str, float] = {}
        self.last_sent: dict[str, float] = {}
        self.provider = ProviderHealth()
        #: (trigger, outcome) -> count, since the start.
        self.compressions: Counter[tuple[str, str]] = Counter()
        self.turns = 0

    def observe(self, event: str, payload: Payload) -> None:
        now = self.clock()
        if event == "message:received":
            self.last_received[str(payload.get("platform"))] = now
        elif event == "message:sent":
            self.last_sent[str(payload.get("platform"))] = now
        elif event == "agent:turn_end":
            self.turns += 1
        elif event == "agent:error":
            self.provider.last_error, self.provider.last_error_at = str(payload.get("kind")), now
        elif event == "llm:request":
            self._request(now, payload)
        elif event in ("session:compress", "session:compress_failed"):
            trigger = str(payload.get("trigger_source") or "auto")
            self.compressions[(trigger, compression_outcome(event, payload))] += 1

    def _request(self, now: float, payload: Payload) -> None:
        outcome = str(payload.get("outcome"))
        self.provider.requests[(str(payload.get("kind")), outcome)] += 1
        if outcome == "ok" and payload.get("kind") == "chat":
            self.provider.latencies.append((now, float(payload.get("seconds") or 0.0)))
        elif outcome == "rate_limit":
            self.provider.rate_limits.append((now, float(payload.get("retry_after") or 0.0)))
        if outcome != "ok":
            self.provider.last_error, self.provider.last_error_at = outcome, now

    def latency_p50(self) -> float | None:
        """The median seconds of the chat requests of the last hour; None without any."""
        since = self.clock() - WINDOW_SECONDS
        recent = [seconds for at, seconds in self.provider.latencies if at >= since]
        return statistics.median(recent) if recent else None

    def rate_limit_waits(self) -> tuple[int, float]:
        """Rate-limited requests in the last hour, and the seconds they were asked to wait."""
        since = self.clock() - WINDOW_SECONDS
        recent = [wait for at, wait in self.provider.rate_limits if at >= since]
        return len(recent), sum(recent)
