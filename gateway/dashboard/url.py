"""``nightowl dashboard-url``: the link that logs in to the dashboard (docs/design.md#dashboard).

The token rides in the link's fragment (``#token=...``), which a browser never sends to a
server: the login page's script fills it in and clears it, so it lands in no access log,
proxy log or history entry. It generates the token when none was kept yet, the same one
the gateway will use.
"""

from __future__ import annotations

import sys
from typing import TextIO

from gateway.config.schema import Config
from gateway.dashboard.token import dashboard_token

_ANY_ADDRESS = ("0.0.0.0", "::", "")


def dashboard_url(config: Config) -> str:
    settings = config.dashboard
    host = "127.0.0.1" if settings.listen in _ANY_ADDRESS else settings.listen
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.port}/login#token={dashboard_token(config)}"


def run_dashboard_url(config: Config, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    settings = config.dashboard
    where = config.source or "config.yaml"
    if not settings.enabled:
        print(
            f"nightowl: the dashboard is off: set dashboard.enabled: true in {where} and "
            "restart the gateway",
            file=err,
        )
        return 1
    if settings.port == 0:
        print(
            "nightowl: dashboard.port is 0 (any free port): the gateway logs the one it took",
            file=err,
        )
    print(dashboard_url(config), file=out)
    if settings.listen in ("127.0.0.1", "localhost", "::1"):
        print(
            f"From another machine: ssh -N -L {settings.port}:127.0.0.1:{settings.port} "
            "you@this-server, then open the link there.",
            file=err,
        )
    return 0
