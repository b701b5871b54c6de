"""Settings of the Telegram adapter; the gateway maps its config onto these."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: Telegram's cap on one message, counted in UTF-16 code units after entity parsing.
TELEGRAM_MESSAGE_LIMIT = 4096


@dataclass(frozen=True)
class WebhookSettings:
    """Receive updates by webhook instead of long polling.

    ``url`` is the public HTTPS address Telegram posts to (usually a reverse proxy in
    front of ``listen:port``); the local server answers on ``path``, by default the
    path of ``url``. ``secret`` is given to Telegram in setWebhook and every request must
    carry it in the X-Telegram-Bot-Api-Secret-Token header (1-256 characters of A-Z, a-z,
    0-9, _ and -). It is required: a webhook without one would take updates from anyone
    who knows the URL (docs/design.md#webhook-secret).
    """

    url: str
    secret: str = field(repr=False)
    listen: str = "127.0.0.1"
    port: int = 8443
    path: str | None = None

    def __post_init__(self) -> None:
        if not self.secret:
            raise ValueError("a Telegram webhook needs a secret")

    @property
    def local_path(self) -> str:
        return self.path or urlsplit(self.url).path or "/"


@dataclass(frozen=True)
class TelegramSettings:
    """Everything the Telegram adapter needs; no field is read from YAML here.

    ``base_url`` points at a self-hosted Bot API server (or a test fake): give the server
    root (``http://host:8081``) or the full method prefix (``http://host:8081/bot``);
    ``{token}`` placeholders are passed through. ``base_file_url`` defaults to the same
    server's ``/file/bot`` prefix.
    """

    token: str = field(repr=False)
    base_url: str | None = None
    base_file_url: str | None = None
    #: In groups, only mentions, replies to the bot and commands are addressed to it.
    require_mention: bool = True
    #: Group chat ids (as strings) where every message is addressed to the bot.
    free_response_chats: tuple[str, ...] = ()
    #: Show replies while they are written (one message edited in place).
    stream: bool = False
    stream_edit_interval: float = 1.0
    webhook: WebhookSettings | None = None
    #: Seconds one getUpdates long poll may wait for news.
    poll_timeout: float = 30.0
    #: No successful getUpdates for this long while running: log and rebuild the poller.
    health_timeout_seconds: float = 300.0
    #: (command, description) pairs registered with setMyCommands at start.
    bot_commands: tuple[tuple[str, str], ...] = ()
    #: A reply needing more messages than this goes out as its first message plus the
    #: whole reply attached as reply.md.
    max_messages_per_reply: int = 4
    message_limit: int = TELEGRAM_MESSAGE_LIMIT
    #: Attempts for one API call on network errors and flood control (RetryAfter).
    max_attempts: int = 5
    #: First delay between network retries; doubles per attempt, capped at 30 s.
    retry_backoff: float = 1.0
    #: A RetryAfter longer than this is not waited out: the delivery fails instead.
    max_retry_after: float = 600.0
    #: A sink that fails on the same update this many times: the update is skipped.
    max_update_failures: int = 5
    #: "typing…" shows only when a turn runs longer than this (docs/design.md#typing),
    #: then is refreshed every ``typing_interval``.
    typing_delay: float = 0.5
    typing_interval: float = 4.0
    #: At the turn's end, how long a typing request already sent may take to finish.
    typing_finish: float = 2.0
    #: Photos: the largest size whose longer side is at most this is downloaded.
    photo_max_side: int = 2048
    #: Seconds stop() waits for the update being handed to the sink.
    stop_timeout: float = 10.0

    def __post_init__(self) -> None:
        if not self.token:
            raise ValueError("telegram token is empty")
        if self.message_limit < 64:
            raise ValueError("message_limit must be at least 64")
        if self.health_timeout_seconds <= self.poll_timeout:
            raise ValueError("health_timeout_seconds must exceed poll_timeout")

    @property
    def api_base_url(self) -> str:
        if not self.base_url:
            return "https://api.telegram.org/bot"
        base = self.base_url.rstrip("/")
        return base if base.endswith("/bot") or "{token}" in base else f"{base}/bot"

    @property
    def file_base_url(self) -> str:
        if self.base_file_url:
            return self.base_file_url
        api = self.api_base_url
        if api.endswith("/bot"):
            return api[: -len("/bot")] + "/file/bot"
        return "https://api.telegram.org/file/bot"
