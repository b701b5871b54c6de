"""Who gets in (docs/design.md#dashboard): every page needs a login with the token, kept in
an HttpOnly, SameSite=Strict cookie until logout (:mod:`gateway.dashboard.logins`); every
POST carries the login's CSRF value; the login form its own (a cookie set when the form
was shown); failed logins are limited per client (:mod:`gateway.dashboard.throttle`).
``/metrics`` has its own rule: a bearer token when ``metrics_token`` is set, else only
requests made on this machine and not forwarded by a proxy. Every answer forbids framing
and foreign scripts.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import secrets
from collections.abc import Awaitable, Callable
from urllib.parse import quote

from aiohttp import web

from gateway.dashboard.logins import LOGIN_SECONDS, Logins
from gateway.dashboard.render import PAGE, render_page, wants_json
from gateway.dashboard.throttle import FAILED_LOGINS_PER_MINUTE, LoginThrottle, client_of
from gateway.dashboard.token import Keys

log = logging.getLogger(__name__)

SESSION_COOKIE = "nightowl_session"
LOGIN_COOKIE = "nightowl_login"
#: Paths open without a login.
OPEN_PATHS = frozenset({"/login"})
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self';"
        " frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
#: Headers a reverse proxy adds: a forwarded request is not a local one.
_FORWARDED = ("Forwarded", "X-Forwarded-For", "X-Real-IP")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Guard:
    def __init__(self, keys: Keys, logins: Logins, metrics_token: str | None) -> None:
        self.keys = keys
        self.logins = logins
        self.metrics_token = metrics_token
        self.throttle = LoginThrottle()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        response = await self._admit(request, handler)
        response.headers.update(SECURITY_HEADERS)
        if not request.path.startswith("/static/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    async def _admit(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if path in OPEN_PATHS or path.startswith("/static/"):
            return await handler(request)
        if path == "/metrics":
            if not self.metrics_allowed(request):
                return web.Response(status=403, text="forbidden\n")
            return await handler(request)
        session = request.cookies.get(SESSION_COOKIE)
        if session is None or not self.logins.valid(session):
            if request.method == "GET" and not wants_json(request):
                return see_other("/login?next=" + quote(request.path_qs, safe="/"))
            return web.Response(status=401, text="log in first\n")
        if request.method == "POST":
            form = await request.post()
            if not self.keys.csrf_valid(session, _text(form.get("csrf"))):
                return web.Response(status=403, text="the form is stale: reload the page\n")
        request[PAGE] = {"logged_in": True, "csrf": self.keys.csrf(session)}
        return await handler(request)

    def metrics_allowed(self, request: web.Request) -> bool:
        if self.metrics_token:
            given = request.headers.get("Authorization", "")
            return hmac.compare_digest(given.encode(), f"Bearer {self.metrics_token}".encode())
        if forwarded(request):
            return False
        try:
            return ipaddress.ip_address(request.remote or "").is_loopback
        except ValueError:
            return False

    # -- the login form ---------------------------------------------------------------------

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        nonce = secrets.token_urlsafe(16)
        response = render_page(
            request, "login.html", {"nonce": nonce, "next": _safe_next(request), "error": ""}
        )
        self._cookie(request, response, LOGIN_COOKIE, nonce, max_age=3600)
        return response

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        nonce = request.cookies.get(LOGIN_COOKIE, "")
        if not nonce or not hmac.compare_digest(nonce.encode(), _text(form.get("nonce")).encode()):
            return web.Response(status=403, text="the login form is stale: reload it\n")
        client = client_of(request.remote, forwarded(request))
        if self.throttle.throttled(client):
            return web.Response(status=429, text="too many failed logins: wait a minute\n")
        if not self.keys.token_matches(_text(form.get("token"))):
            self.throttle.failed(client)
            if self.throttle.throttled(client):
                log.warning(
                    "dashboard: %d failed logins in a minute from %s; refusing it a minute",
                    FAILED_LOGINS_PER_MINUTE,
                    client,
                )
            context = {"nonce": nonce, "next": _safe_next(request, form), "error": "wrong token"}
            return render_page(request, "login.html", context, status=401)
        self.throttle.succeeded(client)
        response = see_other(_safe_next(request, form))
        self._cookie(request, response, SESSION_COOKIE, await self.logins.begin(), LOGIN_SECONDS)
        response.del_cookie(LOGIN_COOKIE, path="/")
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """End this login for good: its cookie, wherever a copy went, opens nothing more."""
        await self.logins.end(request.cookies.get(SESSION_COOKIE, ""))
        response = see_other("/login")
        response.del_cookie(SESSION_COOKIE, path="/")
        return response

    @staticmethod
    def _cookie(
        request: web.Request, response: web.StreamResponse, name: str, value: str, max_age: int
    ) -> None:
        # Secure when the browser reached us over TLS (a proxy in front says so).
        secure = request.secure or request.headers.get("X-Forwarded-Proto") == "https"
        response.set_cookie(
            name, value, max_age=max_age, path="/", httponly=True, samesite="Strict", secure=secure
        )


def see_other(location: str) -> web.Response:
    """A redirect after a POST (or to the login): the browser GETs ``location``."""
    return web.Response(status=303, headers={"Location": location})


def forwarded(request: web.Request) -> bool:
    """Whether a reverse proxy says it forwarded ``request`` (trusted for no more)."""
    return any(name in request.headers for name in _FORWARDED)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _safe_next(request: web.Request, form: object = None) -> str:
    """Where to go after the login: a path on this site only (never ``//host``)."""
    target = _text(form.get("next")) if hasattr(form, "get") else request.query.get("next", "")
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
