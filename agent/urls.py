"""A URL as the operator is shown it: never its user, password, path or query, which may
hold a secret. Only the standard library (the gateway's connection probes import it)."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit


def shown_url(url: str) -> str:
    """``scheme://host:port`` of ``url``: its user, password, path and query may hold a
    secret and are left out."""
    parts = urlsplit(url)
    try:
        return f"{parts.scheme}://{_host(parts)}:{port_of(parts)}"
    except ValueError:  # a port that is not a number
        return f"{parts.scheme}://{_host(parts)}"


def host_port(url: str) -> str:
    """``host`` or ``host:port`` as ``url`` writes it (a URL without a scheme read as
    one), nothing else of it, so nothing secret; ``?`` when it names no host."""
    parts = urlsplit(url if "//" in url else f"//{url}")
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{_host(parts)}:{port}" if port else _host(parts)


def port_of(parts: SplitResult) -> int:
    """The port ``parts`` names, or its scheme's (ValueError: not a port)."""
    return parts.port or (443 if parts.scheme == "https" else 80)


def _host(parts: SplitResult) -> str:
    host = parts.hostname
    if not host:
        return "?"
    return f"[{host}]" if ":" in host else host  # IPv6
