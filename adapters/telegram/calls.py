"""Every Bot API call goes through here: python-telegram-bot's errors are mapped to ours
in one place (:func:`telegram_errors`, like httpx's ``map_exceptions``), and flood
control and network faults are handled in one place (:class:`ApiCaller`).

Above this module nothing catches ``telegram.error.*``: a failed call is a
:class:`TelegramCallFailed` (a :class:`DeliveryError`) whose ``kind`` says what went
wrong and which carries what a caller may act on — Telegram's description ("can't parse
entities": resend as plain text), the chat's new id (a group became a supergroup), the
flood wait.

python-telegram-bot can retry by itself only through ``AIORateLimiter``, which needs the
``aiolimiter`` extra and wraps an ``ExtBot``; its ``network_retry_loop`` is private. The
policy here is small — wait out flood control, back off on network faults, give up after
a bounded number of attempts — so it is written once here rather than pulling in a
dependency for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
import warnings
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import Any, Literal, TypeVar

import httpx
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest

from adapters.base import DeliveryError
from adapters.telegram.settings import TelegramSettings
from nightowl_errors import redact as redact  # the one redact (receiving, adapter use it)

log = logging.getLogger(__name__)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for every connection pool the adapter opens: httpx's own default
    (certifi, or ``SSL_CERT_FILE``), its CA bundle parsed once instead of once per pool
    (~0.7 MB each; docs/design.md#memory-footprint)."""
    return httpx.create_ssl_context()


def http_request(**options: Any) -> HTTPXRequest:
    """A python-telegram-bot request (one connection pool) on :func:`tls_context`."""
    extra = dict(options.pop("httpx_kwargs", None) or {})
    return HTTPXRequest(**options, httpx_kwargs={"verify": tls_context(), **extra})


T = TypeVar("T")
_MAX_BACKOFF = 30.0

#: What went wrong with a call: "bad_request" (Telegram refused it as made: chat not
#: found, can't parse entities, message not modified…), "moved" (the group is a
#: supergroup now), "flood" (flood control), "network" (timeouts, dropped connections,
#: HTTP 5xx), "forbidden" (blocked, or removed from the chat), "token" (rejected),
#: "conflict" (another getUpdates or a webhook uses the token), "other".
FailureKind = Literal[
    "bad_request", "moved", "flood", "network", "forbidden", "token", "conflict", "other"
]

#: Final failures :meth:`ApiCaller.call` leaves to its caller to handle or log.
_CALLER_DECIDES = ("bad_request", "moved")


class TelegramCallFailed(DeliveryError):
    """A Bot API call that failed (after the retries it was allowed); token redacted."""

    def __init__(
        self,
        what: str,
        chat_id: str,
        kind: FailureKind,
        reason: str,
        *,
        description: str = "",
        new_chat_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"Telegram {what} failed: {reason}", platform="telegram", chat_id=chat_id)
        self.what = what
        self.kind: FailureKind = kind
        #: "ClassName: description", as logged.
        self.reason = reason
        #: Telegram's own words (PTB strips "Bad Request: " and capitalises).
        self.description = description
        #: Where the chat continues ("moved" only).
        self.new_chat_id = new_chat_id
        #: Seconds Telegram asked us to wait ("flood" only).
        self.retry_after = retry_after
        #: Logged as a final failure already (:meth:`ApiCaller.gave_up`).
        self.logged = False

    def says(self, phrase: str) -> bool:
        """True for a refused request whose description mentions ``phrase`` (any case)."""
        return self.kind == "bad_request" and phrase.lower() in self.description.lower()


def retry_after_seconds(error: RetryAfter) -> float:
    """Seconds Telegram asked us to wait (int or timedelta, depending on PTB's opt-in)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PTB warns on every read until PTB_TIMEDELTA is set
        value = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _kind(error: TelegramError) -> FailureKind:
    # BadRequest is a NetworkError in PTB: the order matters.
    kinds: tuple[tuple[type[TelegramError], FailureKind], ...] = (
        (ChatMigrated, "moved"),
        (RetryAfter, "flood"),
        (InvalidToken, "token"),
        (Conflict, "conflict"),
        (Forbidden, "forbidden"),
        (BadRequest, "bad_request"),
        (NetworkError, "network"),  # TimedOut and HTTP 5xx too
    )
    return next((kind for cls, kind in kinds if isinstance(error, cls)), "other")


def map_telegram_error(
    what: str, chat_id: str, error: TelegramError, token: str
) -> TelegramCallFailed:
    """The one mapping of a ``telegram.error.*`` to ours."""
    description = redact(error.message, token)
    return TelegramCallFailed(
        what,
        chat_id,
        _kind(error),
        f"{type(error).__name__}: {description}",
        description=description,
        new_chat_id=str(error.new_chat_id) if isinstance(error, ChatMigrated) else None,
        retry_after=retry_after_seconds(error) if isinstance(error, RetryAfter) else None,
    )


@contextlib.contextmanager
def telegram_errors(what: str, chat_id: str, token: str) -> Iterator[None]:
    """Run a Bot API call: any ``telegram.error.*`` it raises leaves as a
    :class:`TelegramCallFailed` (the original is not chained: its text may hold the token)."""
    try:
        yield
    except TelegramError as error:
        raise map_telegram_error(what, chat_id, error, token) from None


class ApiCaller:
    """Runs Bot API requests with the adapter's retry policy."""

    def __init__(self, settings: TelegramSettings) -> None:
        self._settings = settings

    async def call(
        self,
        what: str,
        chat_id: str,
        request: Callable[[], Awaitable[T]],
        *,
        best_effort: bool = False,
    ) -> T:
        """Await ``request()`` through :func:`telegram_errors`, retrying flood control and
        network faults; raises :class:`TelegramCallFailed` only.

        A final failure is logged with the chat id, except "bad_request" and "moved": the
        caller knows which of those it can handle (:meth:`gave_up` logs the rest).
        ``best_effort`` calls (a partial edit, "typing…") are tried once and log nothing.
        """
        settings = self._settings
        for attempt in range(1, settings.max_attempts + 1):
            try:
                with telegram_errors(what, chat_id, settings.token):
                    return await request()
            except TelegramCallFailed as failed:
                delay = None if best_effort else self._retry_delay(failed, attempt)
                if delay is None:
                    if not best_effort and failed.kind not in _CALLER_DECIDES:
                        self.gave_up(failed)
                    raise
                if failed.kind == "flood":
                    log.warning(
                        "Telegram %s for chat %s: flood control, retrying in %.1f s",
                        what,
                        chat_id,
                        delay,
                    )
                else:
                    log.warning(
                        "Telegram %s for chat %s failed (%s), retry %d in %.1f s",
                        what,
                        chat_id,
                        failed.description,
                        attempt,
                        delay,
                    )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _retry_delay(self, failed: TelegramCallFailed, attempt: int) -> float | None:
        """Seconds to wait before trying again; None when retrying cannot help."""
        settings = self._settings
        if attempt >= settings.max_attempts:
            return None
        if failed.kind == "flood" and failed.retry_after is not None:
            return failed.retry_after if failed.retry_after <= settings.max_retry_after else None
        if failed.kind == "network":
            return min(settings.retry_backoff * 2 ** (attempt - 1), _MAX_BACKOFF)
        return None

    def gave_up(self, failed: TelegramCallFailed) -> TelegramCallFailed:
        """``failed``, logged once as a final failure (the caller gives up on it)."""
        if not failed.logged:
            failed.logged = True
            log.error(
                "Telegram %s for chat %s failed: %s", failed.what, failed.chat_id, failed.reason
            )
        return failed
