"""The dashboard's token, and the keys it gives what a login hands out
(docs/design.md#dashboard).

The token is ``dashboard.token``, or one generated once and kept 0600 in
``<data_dir>/dashboard_token`` (docs/design.md#private-files), which ``nightowl
dashboard-url`` prints. A login is a random value in a cookie, kept server-side as its
HMAC under the token (:mod:`gateway.dashboard.logins`), and its CSRF value is another
HMAC of it: a new token matches no login kept before, so it logs everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from pathlib import Path

from gateway.config.schema import Config
from gateway.private_files import write_private

log = logging.getLogger(__name__)

#: Where a generated token is kept, in the data dir.
DASHBOARD_TOKEN_FILE = "dashboard_token"
_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{16,256}")


def dashboard_token(config: Config) -> str:
    """The configured token, else the one kept in the data dir, else a new one kept there.

    Two processes asking at once (the gateway starting, ``nightowl dashboard-url``) get
    the same token: the file is created whole or not at all, and the loser reads it. When
    it cannot be written, the token holds for this process only (and says so).
    """
    if config.dashboard.token:
        return config.dashboard.token
    path = config.data_dir / DASHBOARD_TOKEN_FILE
    stored = _read_token(path)
    if stored:
        return stored
    token = secrets.token_urlsafe(32)
    try:
        if write_private(path, token + "\n", replace=False):
            return token
    except OSError as error:
        log.warning(
            "could not keep the dashboard token in %s (%s): it holds for this run", path, error
        )
        return token
    return _read_token(path) or token


def _read_token(path: Path) -> str:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return text if _TOKEN_SHAPE.fullmatch(text) else ""


class Keys:
    """Checks the token, and keys with it what a login hands out."""

    def __init__(self, token: str) -> None:
        self._token = token.encode()
        self._key = hashlib.sha256(b"nightowl dashboard\0" + self._token).digest()

    def token_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.strip().encode(), self._token)

    def login_digest(self, login: str) -> str:
        """What the server keeps of a login: reading it logs no one in."""
        return self._sign("login", login)

    def list_mark(self) -> str:
        """What heads the list of logins kept under this token: another token's list is
        read as empty, so going back to an old token revives nothing either."""
        return self._sign("logins", "")

    def csrf(self, login: str) -> str:
        """The value forms of this login post back: a page of another origin cannot know it."""
        return self._sign("csrf", login)[:32]

    def csrf_valid(self, login: str, candidate: str | None) -> bool:
        return hmac.compare_digest((candidate or "").encode(), self.csrf(login).encode())

    def _sign(self, purpose: str, value: str) -> str:
        return hmac.new(self._key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()
