"""The dashboard's web server, inside the gateway process (docs/design.md#dashboard).

Built when ``dashboard.enabled``: it subscribes to the event bus at once (so the counts
start with the gateway), listens from :meth:`Dashboard.start` and stops first at
shutdown. Idle it costs an aiohttp site and a few counters; nothing it does sits in a
turn's path. Pages read the store through a read-only connection of their own, so a
page never waits for — or holds up — the gateway's writes.
"""

from __future__ import annotations

import logging
from importlib import resources

from aiohttp import web

from gateway.config.schema import Config
from gateway.dashboard.exposure import SHORT_TOKEN_FIX, metrics_beyond_loopback, short_token
from gateway.dashboard.guard import Guard
from gateway.dashboard.live import OBSERVED_EVENTS, LiveState
from gateway.dashboard.logins import LOGINS_FILE, Logins
from gateway.dashboard.metrics import Metrics
from gateway.dashboard.pages import Pages
from gateway.dashboard.token import Keys, dashboard_token
from gateway.logs import redact_from_now_on
from gateway.operations import Operations
from gateway.store import Store

log = logging.getLogger(__name__)


class Dashboard:
    def __init__(self, config: Config, operations: Operations) -> None:
        self.config = config
        self.operations = operations
        self.settings = config.dashboard
        self.live = LiveState()
        self.metrics = Metrics()
        operations.subscribe(OBSERVED_EVENTS, self._observe, name="dashboard", inline=True)
        self._runner: web.AppRunner | None = None
        self._reader: Store | None = None
        self._guard: Guard | None = None
        #: The pages of the last application built (:meth:`application`).
        self.pages: Pages | None = None
        #: Where it listens once started: ``http://host:port``.
        self.url = ""

    def _observe(self, event: str, payload: dict[str, object]) -> None:
        self.live.observe(event, payload)
        self.metrics.observe(event, payload)

    def application(self, reader: Store) -> web.Application:
        """The web application (the tests' client drives it without a socket)."""
        guard = self._guard = self._guard or self._build_guard()
        self.pages = pages = Pages(self.config, self.operations, reader, self.live, self.metrics)
        app = web.Application(middlewares=[guard.middleware], client_max_size=64 * 1024)
        app.add_routes(
            [
                web.get("/login", guard.login_form),
                web.post("/login", guard.login),
                web.post("/logout", guard.logout),
                *pages.routes(),
            ]
        )
        static = resources.files("gateway.dashboard") / "static"
        app.router.add_static("/static/", str(static), append_version=False)
        return app

    def _build_guard(self) -> Guard:
        """Once per dashboard: every application built shares its logins and throttle."""
        config = self.config
        token = dashboard_token(config)
        redact_from_now_on(token)  # a generated one is new to the log filters
        keys = Keys(token)
        return Guard(keys, Logins(config.data_dir / LOGINS_FILE, keys), self.settings.metrics_token)

    async def start(self) -> None:
        """Listen on ``dashboard.listen:port``; a port taken is logged, and the gateway
        runs on without a dashboard rather than not at all."""
        weak = short_token(self.settings)
        if weak:
            log.warning("dashboard: %s; %s", weak, SHORT_TOKEN_FIX)
        open_metrics = metrics_beyond_loopback(self.settings)
        if open_metrics:
            log.warning("dashboard: %s", open_metrics)
        self._reader = await open_reader(self.operations.store)
        runner = web.AppRunner(self.application(self._reader), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.settings.listen, self.settings.port)
        try:
            await site.start()
        except OSError as error:
            log.error(
                "dashboard: cannot listen on %s:%d (%s); running without it",
                self.settings.listen,
                self.settings.port,
                error.strerror or error,
            )
            await runner.cleanup()
            await self._close_reader()
            return
        self._runner = runner
        host, port = _bound(runner, self.settings.port)
        self.url = f"http://{host}:{port}"
        log.info("dashboard on %s (nightowl dashboard-url prints the login link)", self.url)

    async def stop(self) -> None:
        if self.pages is not None:
            await self.pages.background.wait(timeout=5.0)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self._close_reader()

    async def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and reader is not self.operations.store:
            await reader.close()


async def open_reader(store: Store) -> Store:
    """A read-only connection of the dashboard's own beside SQLite's one writer (WAL lets
    it read while the gateway writes); another backend serves reads from its pool."""
    return await store.reader()


def _bound(runner: web.AppRunner, port: int) -> tuple[str, int]:
    """Host and port actually bound (``port: 0`` picks a free one)."""
    for address in runner.addresses:
        host, bound = address[:2]
        return str(host), int(bound)
    return "127.0.0.1", port
