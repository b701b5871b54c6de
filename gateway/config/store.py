"""The ``store:`` section: where nightowl keeps its state (docs/design.md#postgresql).
Kept beside :mod:`gateway.config.schema`, which holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gateway.config.typed_yaml import STRICT, Unset


@dataclass(frozen=True)
class StoreConfig:
    #: sqlite: one process, ``<data_dir>/state.db`` (the default). postgres: one database
    #: that several replicas share (docs/design.md#replicas).
    backend: Literal["sqlite", "postgres"] = "sqlite"
    #: postgresql://user:password@host:5432/database — usually a ``${VAR}``.
    dsn: str | None = field(default=None, metadata=STRICT)
    #: Connections each replica keeps open (plus one for its session locks).
    pool_size: int = field(default=10, metadata={"range": (1, 200)})
    #: With postgres: how often each replica picks up work nobody holds (a replica that
    #: died: its waiting messages, unsent replies, reminders).
    sweep_seconds: float = field(default=10.0, metadata={"range": (0.5, 3600)})

    @property
    def shared(self) -> bool:
        return self.backend == "postgres"


def store_problems(store: StoreConfig, telegram: Any) -> list[tuple[str, str]]:
    """``(key, problem)`` for a ``store:`` that cannot work: postgres without a DSN, and
    a Telegram webhook whose secret each replica would generate its own of (they would
    lock each other out: the last setWebhook wins). ``telegram``: platforms.telegram."""
    if store.backend != "postgres":
        return []
    problems = []
    dsn = "" if store.dsn is None else store.dsn
    if not isinstance(dsn, Unset) and not dsn.startswith(("postgresql://", "postgres://")):
        problems.append(("store.dsn", "expected postgresql://user:password@host:5432/database"))
    webhook = telegram.webhook
    if telegram.enabled and webhook is not None and not webhook.secret_token:
        problems.append(
            (
                "platforms.telegram.webhook.secret_token",
                "required with store.backend: postgres (replicas must share one; e.g."
                " ${TELEGRAM_WEBHOOK_SECRET}, 1-256 of A-Z a-z 0-9 _ -)",
            )
        )
    return problems
