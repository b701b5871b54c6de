"""The dashboard's logins (docs/design.md#dashboard): each a random value in an HttpOnly
cookie, known to the server until it ends — at logout, after :data:`LOGIN_SECONDS`, or
when the token changes — so a cookie copied before the end opens nothing after it, and
no restart revives it.

The server keeps each login as its HMAC under the token (:meth:`Keys.login_digest`): the
list opens nothing to whoever reads it, and a new token matches none of it. The list is
``<data_dir>/dashboard_logins`` (0600 from its first byte, beside the token; see
docs/design.md#private-files): a line marking the token it was kept under
(:meth:`Keys.list_mark`; under another token it reads as empty, so changing the token
back revives nothing), then one ``<digest> <issued>`` line a login, rewritten whole
(a rename) whenever a login begins or ends, off the event loop and one write at a time.
It is read once, when the dashboard is built: a list that cannot be read starts empty
(everyone logs in again); one that cannot be written is removed — a restart then logs
everyone out rather than reviving an ended login — and holds in memory meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from gateway.dashboard.token import Keys
from gateway.private_files import write_private

log = logging.getLogger(__name__)

#: Where the list of logins is kept, in the data dir.
LOGINS_FILE = "dashboard_logins"
#: How long a login lasts.
LOGIN_SECONDS = 7 * 24 * 3600
#: Logins kept at once; past it the oldest ends (its browser is asked to log in again).
MAX_LOGINS = 64
_HEADER = "nightowl-dashboard-logins"


class Logins:
    def __init__(self, path: Path, keys: Keys, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.keys = keys
        self.clock = clock
        #: Each login's digest and when it began, the oldest first.
        self._issued = _read(path, keys.list_mark())
        self._writing = asyncio.Lock()

    def valid(self, login: str | None) -> bool:
        issued = self._issued.get(self.keys.login_digest(login)) if login else None
        return issued is not None and self._current(issued, self.clock())

    async def begin(self) -> str:
        """A new login: the cookie's value, kept (on disk too) before it is handed out."""
        login = secrets.token_urlsafe(32)
        now = self.clock()
        issued = {d: at for d, at in self._issued.items() if self._current(at, now)}
        issued[self.keys.login_digest(login)] = now
        self._issued = dict(list(issued.items())[-MAX_LOGINS:])
        await self._save()
        return login

    async def end(self, login: str) -> None:
        if self._issued.pop(self.keys.login_digest(login), None) is not None:
            await self._save()

    @staticmethod
    def _current(issued: float, now: float) -> bool:
        return -60 <= now - issued <= LOGIN_SECONDS  # a minute's leeway for a clock set back

    async def _save(self) -> None:
        async with self._writing:  # the last write holds the latest list
            text = f"{_HEADER} {self.keys.list_mark()}\n" + "".join(
                f"{digest} {int(at)}\n" for digest, at in self._issued.items()
            )
            try:
                await asyncio.to_thread(write_private, self.path, text)
            except OSError as error:
                # An older list on disk would revive ended logins at the next start.
                removed = await asyncio.to_thread(_remove, self.path)
                log.warning(
                    "dashboard: could not keep the logins in %s (%s); %s",
                    self.path,
                    error.strerror or error,
                    "removed it: a restart logs everyone out"
                    if removed
                    else "a restart would bring back the logins it holds",
                )


def _read(path: Path, mark: str) -> dict[str, float]:
    try:
        lines = path.read_text(encoding="ascii").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        log.warning("dashboard: could not read %s (%s): everyone logs in again", path, error)
        return {}
    if not lines or lines[0] != f"{_HEADER} {mark}":
        return {}  # kept under another token: every login in it has ended
    issued: dict[str, float] = {}
    for line in lines[1:]:
        digest, _, at = line.partition(" ")
        if len(digest) == 64 and at.isdigit():
            issued[digest] = float(at)
    return dict(sorted(issued.items(), key=lambda item: item[1]))


def _remove(path: Path) -> bool:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return False
    return True
