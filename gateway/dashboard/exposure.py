"""Dashboard settings that let in more than their owner may think
(docs/design.md#dashboard): a token short enough to guess, and a ``listen`` beyond
loopback with no ``metrics_token``. The gateway logs them at start, ``nightowl doctor``
shows them; neither names the token.
"""

from __future__ import annotations

import ipaddress

from gateway.config.dashboard import DashboardConfig

#: A configured token shorter than this is flagged (a generated one has 43).
MIN_TOKEN_CHARS = 16
SHORT_TOKEN_FIX = (
    f"set dashboard.token to {MIN_TOKEN_CHARS} characters or more, or null to have one generated"
)


def short_token(settings: DashboardConfig) -> str | None:
    """Why the configured token is weak, or None."""
    if settings.token and len(settings.token) < MIN_TOKEN_CHARS:
        return (
            f"dashboard.token is shorter than {MIN_TOKEN_CHARS} characters: whoever reaches "
            "the login page can guess it (the limit on failed logins is per address, and "
            "addresses are cheap)"
        )
    return None


def metrics_beyond_loopback(settings: DashboardConfig) -> str | None:
    """What /metrics answers when the dashboard listens beyond loopback without a
    ``metrics_token``, or None."""
    if settings.metrics_token or on_loopback(settings.listen):
        return None
    return (
        f"dashboard listens on {settings.listen or 'every address'} with no metrics_token: "
        "/metrics answers only requests from this machine — and so anything a reverse proxy "
        "here forwards without X-Forwarded-For — while a Prometheus elsewhere gets 403; "
        "set dashboard.metrics_token"
    )


def on_loopback(listen: str) -> bool:
    if listen == "localhost":
        return True
    try:
        return ipaddress.ip_address(listen).is_loopback
    except ValueError:
        return False  # "" (every address) or a host name: it may resolve beyond loopback
