"""The ``dashboard:`` section: the operator's web dashboard and ``/metrics``
(docs/design.md#dashboard). Kept beside :mod:`gateway.config.schema`, which holds it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DashboardConfig:
    #: Off by default: nothing listens unless asked.
    enabled: bool = False
    #: Loopback by default; for remote access put a reverse proxy with TLS in front, or
    #: tunnel with ``ssh -L``.
    listen: str = "127.0.0.1"
    #: 0: any free port (it is logged); for tests.
    port: int = field(default=8377, metadata={"range": (0, 65535)})
    #: The login token. Null: one is generated once, kept 0600 in
    #: ``<data_dir>/dashboard_token`` and printed by ``nightowl dashboard-url``.
    token: str | None = None
    #: Null: ``/metrics`` answers only requests made on this machine (not through a
    #: proxy); set, it answers anyone who sends ``Authorization: Bearer <metrics_token>``.
    metrics_token: str | None = None
