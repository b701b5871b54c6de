"""``/metrics`` in Prometheus' text format (docs/design.md#metrics).

Counters and the turn-duration histogram move with the events (:meth:`Metrics.observe`,
subscribed to the bus: nothing is measured inside a turn). Gauges — what waits, what is
connected — are read when scraped. Each gateway has its own registry, so two gateways
in one process (the tests) never share numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from adapters.base import Adapter
from gateway.dashboard.live import compression_outcome
from gateway.events import Payload
from gateway.store.dashboard_records import Totals

#: What a scrape answers with (text format 0.0.4).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TURN_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
REQUEST_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0, 120.0)


class Metrics:
    def __init__(self) -> None:
        registry = self.registry = CollectorRegistry()
        self.turns = Counter(
            "nightowl_turns", "Turns answered, by platform.", ["platform"], registry=registry
        )
        self.turn_seconds = Histogram(
            "nightowl_turn_duration_seconds",
            "Time from a turn's start to its reply handed to the platform.",
            buckets=TURN_BUCKETS,
            registry=registry,
        )
        self.requests = Counter(
            "nightowl_llm_requests",
            "Model requests by kind (chat, summary) and outcome (ok or the error kind).",
            ["kind", "outcome"],
            registry=registry,
        )
        self.request_seconds = Histogram(
            "nightowl_llm_request_duration_seconds",
            "Time a model request took, by kind.",
            ["kind"],
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self.prompt_tokens = self._tokens("prompt", "Prompt tokens the provider reported")
        self.completion_tokens = self._tokens("completion", "Completion tokens reported")
        self.cached_tokens = self._tokens("cached", "Prompt tokens read from the provider's cache")
        # Prometheus counts in floats: exact sums are the store's (nightowl usage).
        self.cost = Counter(
            "nightowl_cost_usd",
            "What model calls cost in USD (priced calls only), by model and kind "
            "(chat, summary, flush, transcription).",
            ["model", "kind"],
            registry=registry,
        )
        self.unpriced = Counter(
            "nightowl_unpriced_calls",
            "Model calls with no known price (docs/cost.md#unknown-prices), by model.",
            ["model"],
            registry=registry,
        )
        self.budgets_reached = Counter(
            "nightowl_budgets_reached",
            "Budgets that started refusing calls (once per budget, subject and period).",
            ["budget"],
            registry=registry,
        )
        self.compressions = Counter(
            "nightowl_compressions",
            "Compressions by trigger and outcome (committed, fallback, aborted, failed).",
            ["trigger", "outcome"],
            registry=registry,
        )
        self.inbox_pending = self._gauge("inbox_pending", "Messages waiting for their turn.")
        self.undelivered = self._gauge(
            "undelivered_replies", "Replies stored but not yet accepted by their platform."
        )
        self.sessions_active = self._gauge(
            "sessions_active", "Sessions with activity in the last 24 hours."
        )
        self.reminders_pending = self._gauge("reminders_pending", "Reminders not sent yet.")
        self.alerts_active = Gauge(
            "nightowl_alerts_active",
            "1 while an alert's condition holds (docs/operations.md#alerts), else 0.",
            ["condition"],
            registry=registry,
        )
        self.alerts_sent = Counter(
            "nightowl_alerts_sent",
            "Alert messages told to the operator, by condition and state (started, cleared).",
            ["condition", "state"],
            registry=registry,
        )
        self._alert_conditions: set[str] = set()
        self.adapter_restarts = Gauge(
            "nightowl_adapter_restarts",
            "Times the platform's receiving connection was rebuilt since the start.",
            ["platform"],
            registry=registry,
        )
        self.adapter_up = Gauge(
            "nightowl_adapter_up",
            "1 when the platform is connected, 0 when not.",
            ["platform"],
            registry=registry,
        )

    def _tokens(self, name: str, help_text: str) -> Counter:
        return Counter(
            f"nightowl_{name}_tokens", f"{help_text}, by kind.", ["kind"], registry=self.registry
        )

    def _gauge(self, name: str, help_text: str) -> Gauge:
        return Gauge(f"nightowl_{name}", help_text, registry=self.registry)

    def observe(self, event: str, payload: Payload) -> None:
        if event == "agent:turn_end":
            self.turns.labels(str(payload.get("session_key", "")).partition(":")[0]).inc()
            self.turn_seconds.observe(float(payload.get("seconds") or 0.0))
        elif event == "llm:request":
            kind = str(payload.get("kind"))
            self.requests.labels(kind, str(payload.get("outcome"))).inc()
            self.request_seconds.labels(kind).observe(float(payload.get("seconds") or 0.0))
            self.prompt_tokens.labels(kind).inc(int(payload.get("prompt_tokens") or 0))
            self.completion_tokens.labels(kind).inc(int(payload.get("completion_tokens") or 0))
            self.cached_tokens.labels(kind).inc(int(payload.get("cache_read_tokens") or 0))
            if payload.get("outcome") == "ok":
                self._cost(str(payload.get("model")), kind, payload.get("cost"))
        elif event == "gateway:alert":
            if payload.get("sent", True):  # nobody to tell: no message
                labels = (str(payload.get("condition")), str(payload.get("state")))
                self.alerts_sent.labels(*labels).inc()
        elif event == "budget:reached":
            self.budgets_reached.labels(str(payload.get("budget"))).inc()
        elif event in ("session:compress", "session:compress_failed"):
            trigger = str(payload.get("trigger_source") or "auto")
            self.compressions.labels(trigger, compression_outcome(event, payload)).inc()

    def _cost(self, model: str, kind: str, cost: object) -> None:
        if cost is None:
            self.unpriced.labels(model).inc()
        else:
            self.cost.labels(model, kind).inc(float(Decimal(str(cost))))

    def exposition(
        self, totals: Totals, adapters: Mapping[str, Adapter], alerts: Iterable[str] = ()
    ) -> bytes:
        """The text a scrape gets, with the gauges read now; ``alerts``: the conditions
        holding."""
        holding = set(alerts)
        self._alert_conditions |= holding
        for condition in self._alert_conditions:
            self.alerts_active.labels(condition).set(1 if condition in holding else 0)
        self.inbox_pending.set(totals.inbox_pending)
        self.undelivered.set(totals.undelivered_replies)
        self.sessions_active.set(totals.sessions_active)
        self.reminders_pending.set(totals.reminders_pending)
        for platform, adapter in adapters.items():
            status = adapter.status()
            self.adapter_restarts.labels(platform).set(status.restarts)
            connected = status.connected
            if connected is not None:
                self.adapter_up.labels(platform).set(1 if connected else 0)
        return generate_latest(self.registry)
