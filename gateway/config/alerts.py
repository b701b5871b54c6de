"""The ``alerts:`` section: what the operator is told, where, and after how long
(docs/operations.md#alerts). Kept beside :mod:`gateway.config.schema`, which holds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gateway.config.typed_yaml import STRICT, Problem

#: The platforms an alert can go to: a private chat with a user on one of them.
ALERT_PLATFORMS = ("telegram", "discord")


@dataclass(frozen=True)
class AlertsConfig:
    #: Private chats to tell: ``telegram:<user id>`` or ``discord:<user id>``.
    to: tuple[str, ...] = field(default=(), metadata=STRICT)
    #: A URL that receives a JSON POST per alert: {condition, state, since, text}.
    webhook: str | None = None
    #: How long a condition lasts before it is reported (and the least time between two
    #: messages about one condition).
    after_seconds: float = field(default=300.0, metadata={"range": (0.1, None)})

    @property
    def enabled(self) -> bool:
        return bool(self.to or self.webhook)


def alert_target(entry: str) -> tuple[str, str]:
    """``"telegram:42"`` -> ("telegram", "42")."""
    platform, _, user = entry.partition(":")
    return platform.strip(), user.strip()


def check_alerts(alerts: AlertsConfig) -> list[Problem]:
    problems = []
    for i, entry in enumerate(alerts.to):
        platform, user = alert_target(entry)
        if platform not in ALERT_PLATFORMS or not user:
            problems.append(
                Problem(
                    f"alerts.to[{i}]",
                    f'expected "telegram:<user id>" or "discord:<user id>", got "{entry}"',
                )
            )
    if alerts.webhook:
        parts = urlsplit(alerts.webhook)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problems.append(
                Problem("alerts.webhook", f'expected an http(s) URL, got "{alerts.webhook}"')
            )
    return problems
