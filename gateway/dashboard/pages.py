"""The dashboard's pages and actions (docs/design.md#dashboard).

Reading pages take their data from :class:`~gateway.dashboard.views.Views`. Actions go
through the parts of the gateway that own them, never around them: compress now is
``/compress`` (in the session's lane), forget is ``nightowl sessions forget`` (the
erase in the session's lane, then the scrub), pairing is :class:`Pairing`. Each action
is a POST (the guard checked its CSRF value) answered with a redirect to a page that
shows how it went.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from urllib.parse import quote

from aiohttp import web

from gateway.config.schema import Config
from gateway.conversation.access import platform_sections, rules
from gateway.conversation.background import BackgroundTasks
from gateway.conversation.pairing import describe_request, printable, who
from gateway.dashboard.guard import see_other
from gateway.dashboard.live import LiveState
from gateway.dashboard.metrics import CONTENT_TYPE, Metrics
from gateway.dashboard.render import render_page
from gateway.dashboard.views import Views
from gateway.operations import Operations
from gateway.store import Store

log = logging.getLogger(__name__)

#: How long an action's outcome stays on its page.
NOTICE_SECONDS = 600.0


@dataclass(frozen=True)
class Notice:
    text: str
    at: float


def session_url(key: str) -> str:
    return "/session?key=" + quote(key, safe="")


class Pages:
    def __init__(
        self,
        config: Config,
        operations: Operations,
        reader: Store,
        live: LiveState,
        metrics: Metrics,
    ) -> None:
        self.config = config
        self.operations = operations
        self.reader = reader
        self.views = Views(operations, reader, live)
        self.metrics = metrics
        self.background = BackgroundTasks("dashboard")
        #: The last action's outcome, per page: a session key, "sessions", "pairing".
        self.notices: dict[str, Notice] = {}

    def routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self.overview),
            web.get("/sessions", self.sessions),
            web.get("/session", self.session),
            web.post("/session/compress", self.compress),
            web.get("/session/forget", self.confirm_forget),
            web.post("/session/forget", self.forget),
            web.get("/pairing", self.pairing),
            web.post("/pairing/answer", self.answer_pairing),
            web.get("/metrics", self.scrape),
        ]

    def notice(self, page: str) -> str:
        found = self.notices.get(page)
        return found.text if found and found.at > time.time() - NOTICE_SECONDS else ""

    def _say(self, page: str, text: str) -> None:
        self.notices[page] = Notice(text, time.time())

    # -- reading ----------------------------------------------------------------------------

    async def overview(self, request: web.Request) -> web.StreamResponse:
        data = await self.views.overview()
        return render_page(request, "overview.html", {"data": data, "nav": "overview"})

    async def sessions(self, request: web.Request) -> web.StreamResponse:
        sort = request.query.get("sort", "updated")
        descending = request.query.get("dir", "desc") != "asc"
        data = await self.views.sessions(sort, descending)
        context = {"data": data, "nav": "sessions", "notice": self.notice("sessions")}
        return render_page(request, "sessions.html", context)

    async def session(self, request: web.Request) -> web.StreamResponse:
        key = request.query.get("key", "")
        before = request.query.get("before", "")
        data = await self.views.session(
            key,
            query=request.query.get("q", "")[:200],
            before=int(before) if before.isdigit() else None,
        )
        if data is None:
            missing = {"data": None, "nav": "sessions", "key": key}
            return render_page(request, "missing.html", missing, status=404)
        context = {"data": data, "nav": "sessions", "key": key, "notice": self.notice(key)}
        return render_page(request, "session.html", context)

    async def pairing(self, request: web.Request) -> web.StreamResponse:
        now = time.time()
        requests = await self.operations.pending_pairings()
        approved = await self.operations.approved_users()
        data = {
            "now": now,
            "enabled": {
                name: rules(self.config, name).pairing for name in platform_sections(self.config)
            },
            "requests": [
                {
                    "code": r.code,
                    "who": who(r.platform, r.user_id, r.user_name),
                    "line": describe_request(r, now),
                    "expires_at": r.expires_at,
                }
                for r in requests
            ],
            "approved": [
                {
                    "who": who(u.platform, u.user_id, u.user_name),
                    "at": u.approved_at,
                    "by": printable(u.approved_by),
                }
                for u in approved
            ],
        }
        context = {"data": data, "nav": "pairing", "notice": self.notice("pairing")}
        return render_page(request, "pairing.html", context)

    async def scrape(self, request: web.Request) -> web.StreamResponse:
        totals = await self.reader.dashboard.totals(time.time() - 86400)
        holding = [alert.condition for alert in self.operations.alerts()]
        body = self.metrics.exposition(totals, self.operations.platforms, holding)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    # -- actions ----------------------------------------------------------------------------

    async def compress(self, request: web.Request) -> web.StreamResponse:
        """Compress now: ``/compress`` without a focus, in the session's lane, after the
        turn in progress; the page shows how it went when it is done."""
        key = str((await request.post()).get("key", ""))
        self._say(key, "Compressing… (after the reply being written, if one is)")

        async def run() -> None:
            try:
                outcome = await self.operations.compress(key)
            except Exception:  # the operator must hear back; the lane logged nothing of it
                log.exception("dashboard: compressing %s failed", key)
                outcome = "That didn't work — something went wrong; nothing was changed."
            self._say(key, outcome)

        self.background.spawn(run())
        return see_other(session_url(key))

    async def confirm_forget(self, request: web.Request) -> web.StreamResponse:
        key = request.query.get("key", "")
        found = [s for s in await self.reader.dashboard.sessions() if s.session_key == key]
        context = {
            "data": None,
            "nav": "sessions",
            "key": key,
            "session": found[0] if found else None,
        }
        return render_page(request, "forget.html", context)

    async def forget(self, request: web.Request) -> web.StreamResponse:
        """Forget: everything stored under the key, erased and scrubbed — once the operator
        typed the key again. The erase runs in the session's lane (never under a turn)."""
        form = await request.post()
        key, typed = str(form.get("key", "")), str(form.get("confirm", "")).strip()
        if not key or typed != key:
            self._say(key, "Nothing was forgotten: type the session key exactly to confirm.")
            return see_other(session_url(key))
        self._say("sessions", f"Forgetting {printable(key)}…")

        async def run() -> None:
            forgotten = await self.operations.forget(key)
            self.notices.pop(key, None)
            tail = "" if forgotten.scrubbed else " (the WAL could not be truncated yet: it will be)"
            erased = forgotten.messages
            self._say("sessions", f"Forgot {printable(key)}: {erased:,} messages erased{tail}.")
            log.info("dashboard: forgot %s (%d messages)", key, erased)

        self.background.spawn(run())
        return see_other("/sessions")

    async def answer_pairing(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        code, action = str(form.get("code", "")), str(form.get("action", ""))
        if action == "approve":
            user = await self.operations.approve(code, "dashboard")
            text = (
                f"Approved {who(user.platform, user.user_id, user.user_name)}: their next "
                "message gets an answer."
                if user
                else f"No pending request has the code {printable(code)} (expired or answered)."
            )
        elif action == "deny":
            denied = await self.operations.deny(code)
            text = (
                f"Denied {who(denied.platform, denied.user_id, denied.user_name)}."
                if denied
                else f"No pending request has the code {printable(code)} (expired or answered)."
            )
        else:
            return web.Response(status=400, text="approve or deny\n")
        log.info("dashboard: pairing %s %s", action, printable(code))
        self._say("pairing", text)
        return see_other("/pairing")
