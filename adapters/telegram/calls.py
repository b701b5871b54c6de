"""One Bot API call with flood control and network faults handled in one place.

python-telegram-bot can do this itself only through ``AIORateLimiter``, which needs the
``aiolimiter`` extra and wraps an ``ExtBot``; its ``network_retry_loop`` is private. The
policy here is small — wait out RetryAfter, back off on NetworkError/TimedOut, give up
after a bounded number of attempts with a :class:`DeliveryError` — so it is written once
here rather than pulling in a dependency for it.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from telegram.error import BadRequest, ChatMigrated, NetworkError, RetryAfter, TelegramError

from adapters.base import DeliveryError
from adapters.telegram.settings import TelegramSettings

log = logging.getLogger(__name__)
T = TypeVar("T")
_MAX_BACKOFF = 30.0


def retry_after_seconds(error: RetryAfter) -> float:
    """Seconds Telegram asked us to wait (int or timedelta, depending on PTB's opt-in)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PTB warns on every read until PTB_TIMEDELTA is set
        value = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def redact(text: str, token: str) -> str:
    """``text`` with the bot token (which URLs and PTB messages may carry) blanked out."""
    return text.replace(token, "<token>") if token else text


def is_bad_request(error: Exception, phrase: str) -> bool:
    """True for a BadRequest whose description mentions ``phrase`` (case-insensitive)."""
    return isinstance(error, BadRequest) and phrase.lower() in str(error).lower()


class ApiCaller:
    """Runs Bot API requests with the adapter's retry policy."""

    def __init__(self, settings: TelegramSettings) -> None:
        self._settings = settings

    async def call(self, what: str, chat_id: str, request: Callable[[], Awaitable[T]]) -> T:
        """Await ``request()``, retrying flood control and network faults.

        ``BadRequest`` and ``ChatMigrated`` are raised unchanged (the caller knows which
        ones it can handle, e.g. "can't parse entities"); any other final failure is logged with the chat id
        and raised as :class:`DeliveryError`.
        """
        settings = self._settings
        for attempt in range(1, settings.max_attempts + 1):
            last_attempt = attempt == settings.max_attempts
            try:
                return await request()
            except (BadRequest, ChatMigrated):
                raise  # the caller knows what to do (ChatMigrated: send to the new id)
            except RetryAfter as error:
                delay = retry_after_seconds(error)
                if last_attempt or delay > settings.max_retry_after:
                    raise self.failure(what, chat_id, error) from None
                log.warning(
                    "Telegram %s for chat %s: flood control, retrying in %.1f s",
                    what,
                    chat_id,
                    delay,
                )
                await asyncio.sleep(delay)
            except NetworkError as error:  # TimedOut and HTTP 5xx are NetworkErrors too
                if last_attempt:
                    raise self.failure(what, chat_id, error) from None
                delay = min(settings.retry_backoff * 2 ** (attempt - 1), _MAX_BACKOFF)
                log.warning(
                    "Telegram %s for chat %s failed (%s), retry %d in %.1f s",
                    what,
                    chat_id,
                    redact(str(error), settings.token),
                    attempt,
                    delay,
                )
                await asyncio.sleep(delay)
            except TelegramError as error:  # Forbidden, ChatMigrated, …: retrying cannot help
                raise self.failure(what, chat_id, error) from None
        raise AssertionError("unreachable: the last attempt returns or raises")

    def failure(self, what: str, chat_id: str, error: Exception) -> DeliveryError:
        """Log a final failure and build the DeliveryError for it (token redacted)."""
        reason = redact(f"{type(error).__name__}: {error}", self._settings.token)
        log.error("Telegram %s for chat %s failed: %s", what, chat_id, reason)
        return DeliveryError(
            f"Telegram {what} failed: {reason}", platform="telegram", chat_id=chat_id
        )
