"""The Telegram adapter: python-telegram-bot's Bot, our own exactly-once receiving."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx
from telegram import Bot
from telegram.request import BaseRequest

from adapters.base import (
    Adapter,
    AdapterStatus,
    ChatMoved,
    DeliveryError,
    InboundSink,
    OutboundMessage,
    PlatformTraits,
    ReplyStream,
    StartError,
)
from adapters.telegram.calls import ApiCaller, http_request, redact, telegram_errors
from adapters.telegram.delivery import Sender
from adapters.telegram.inbound import PLATFORM, BotIdentity, UpdateConverter
from adapters.telegram.receiving import ALLOWED_UPDATES, Dedupe, UpdatePoller, UpdateProcessor
from adapters.telegram.settings import TelegramSettings
from adapters.telegram.stream import TelegramReplyStream

if TYPE_CHECKING:
    from adapters.telegram.webhook import WebhookReceiver

log = logging.getLogger(__name__)
# Bot API URLs contain the token: httpx logs each request URL at INFO, PTB's Bot logs its
# base URLs at DEBUG. Logger filters only see records of that exact logger, hence the list.
_LOGGERS_SEEING_THE_TOKEN = ("httpx", "telegram.Bot")
#: Sends, edits and chat actions in flight at once; of those connections at most
#: _SEND_KEPT stay open between requests. Telegram's rate limits keep a few busy at a
#: time; every idle one costs each request a readiness check in httpcore's pool (a tenth
#: of the throughput of a busy gateway with sixteen kept).
SEND_CONNECTIONS = 16
_SEND_KEPT = 8
_SEND_LIMITS = httpx.Limits(max_connections=SEND_CONNECTIONS, max_keepalive_connections=_SEND_KEPT)


class TelegramStartError(StartError):
    """The adapter could not connect (bad token, unreachable API); message is redacted."""


class TelegramAdapter(Adapter):
    """Telegram private chats, groups, supergroups and forum topics.

    ``dedupe`` (optional) answers whether a dedupe key ("telegram:<update_id>") is
    already stored; such redelivered updates are confirmed without calling the sink.
    """

    platform = PLATFORM
    #: Users have positive chat ids, groups negative ones (docs/design.md#platform-traits).
    traits = PlatformTraits(private_ids_positive=True)

    def __init__(self, settings: TelegramSettings, *, dedupe: Dedupe | None = None) -> None:
        self.settings = settings
        self._dedupe = dedupe
        self._caller = ApiCaller(settings)
        self._bot: Bot | None = None
        self._sender: Sender | None = None
        self._poller: UpdatePoller | None = None
        self._webhook: WebhookReceiver | None = None
        secret = settings.webhook.secret if settings.webhook else ""
        self._log_filter = _RedactToken(settings.token, secret)
        self.identity: BotIdentity | None = None
        self._sink: InboundSink | None = None
        self._moves: set[asyncio.Task[None]] = set()
        self._processor: UpdateProcessor | None = None
        #: Updates Telegram said it holds while polling got none (see :meth:`check`):
        #: since when, how many, and the poller's count of updates at the last look.
        self._stuck_since: float | None = None
        self._stuck_count = 0
        self._stuck_reason = ""
        self._received_at_look = -1
        #: Webhook mode: where Telegram sends updates when it is not here, and since when.
        self._elsewhere: tuple[str, float] | None = None
        self._webhook_set_again = 0

    async def start(self, sink: InboundSink) -> None:
        for name in _LOGGERS_SEEING_THE_TOKEN:
            logging.getLogger(name).addFilter(self._log_filter)
        bot = self._make_bot()
        try:
            await self._caller.call("getMe", "-", bot.initialize)
        except DeliveryError as error:
            await bot.shutdown()  # initialize() opened the connection pools before getMe
            reason = redact(str(error), self.settings.token)
            raise TelegramStartError(f"Telegram adapter could not start: {reason}") from None
        self._bot = bot
        self.identity = BotIdentity(id=bot.id, username=bot.username)
        self._sink = sink
        self._sender = Sender(self.settings, bot, self._caller, on_moved=self._chat_moved)
        converter = UpdateConverter(self.settings, bot, self.identity, self._caller)
        processor = UpdateProcessor(self.settings, converter.convert, sink, self._dedupe)
        self._processor = processor
        await self._register_commands(bot)
        try:
            if self.settings.webhook is not None:
                await self._start_webhook(bot, processor)
            else:
                await self._start_polling(bot, processor)
        except BaseException:
            await self.stop()
            raise
        log.info("Telegram adapter running as @%s", self.identity.username)

    async def stop_receiving(self) -> None:
        """Take no new updates (the one in the sink finishes first); sending still works."""
        if self._poller is not None:
            await self._poller.stop()
            self._poller = None
        if self._webhook is not None:
            await self._webhook.stop()
            self._webhook = None

    async def stop(self) -> None:
        await self.stop_receiving()
        self._sender = None
        if self._bot is not None:
            with contextlib.suppress(DeliveryError):
                with telegram_errors("shutdown", "-", self.settings.token):
                    await self._bot.shutdown()
            self._bot = None
        for name in _LOGGERS_SEEING_THE_TOKEN:
            logging.getLogger(name).removeFilter(self._log_filter)

    async def send(self, message: OutboundMessage) -> list[str]:
        return await self._running_sender().send(message)

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str, thread_id: str | None = None) -> AsyncIterator[None]:
        async with self._running_sender().typing(chat_id, thread_id):
            yield

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        if not self.settings.stream:
            return None
        return TelegramReplyStream(self._running_sender(), target)

    def status(self) -> AdapterStatus:
        poller = self._poller
        if self._webhook is None and poller is None:
            return AdapterStatus(connected=False, mode="stopped")
        problem, since = "", None
        if poller is not None and poller.failing_since is not None:
            problem, since = f"getUpdates fails: {poller.failure}", poller.failing_since
        elif self._elsewhere is not None:
            where, since = self._elsewhere
            ours = self.settings.webhook.url if self.settings.webhook else ""
            elsewhere = where or "no webhook (it keeps them for getUpdates)"
            problem = redact(
                f"Telegram sends its updates to {elsewhere}, not to this gateway's {ours}"
                + ("" if not where else ": another deployment of this bot? Only one can have it"),
                self.settings.token,
            )
        elif self._stuck_since is not None:
            how = "getUpdates returns none" if poller is not None else "none reach the webhook"
            problem = f"Telegram holds {self._stuck_count} update(s) for the bot, but {how}"
            if self._stuck_reason:
                problem += f" (Telegram says: {self._stuck_reason})"
            since = self._stuck_since
        if poller is None:
            return AdapterStatus(
                not problem, "webhook", problem, since, restarts=self._webhook_set_again
            )
        return AdapterStatus(
            connected=poller.healthy and not problem,
            mode="polling",
            problem=problem,
            problem_since=since,
            restarts=poller.rebuilds,
        )

    async def check(self) -> AdapterStatus:
        """Are updates waiting that never reach us? Asks getWebhookInfo (its
        ``pending_update_count``, and in webhook mode Telegram's last error) unless
        getUpdates fails anyway. Stuck means updates waited at two looks in a row with none
        arriving in between; it clears only when updates arrive or none wait."""
        poller, bot, processor = self._poller, self._bot, self._processor
        if bot is None or processor is None or (poller and poller.failing_since is not None):
            return self.status()
        try:
            info = await self._caller.call("getWebhookInfo", "-", bot.get_webhook_info)
        except DeliveryError as error:  # the look failed; what we knew stands
            log.info("Telegram getWebhookInfo failed: %s", redact(str(error), self.settings.token))
            return self.status()
        webhook = self.settings.webhook
        if self._webhook is not None and webhook is not None and info.url != webhook.url:
            # Another process deleted or moved it (a script calling getUpdates must).
            self._elsewhere = (info.url, self._elsewhere[1] if self._elsewhere else time.time())
        else:
            self._elsewhere = None
        waiting = info.pending_update_count
        if waiting and processor.arrived == self._received_at_look:
            self._stuck_since = self._stuck_since or time.time()
            self._stuck_count = waiting
            self._stuck_reason = info.last_error_message or ""
        else:
            self._stuck_since = None
        self._received_at_look = processor.arrived
        return self.status()

    async def restart_receiving(self) -> bool:
        """Rebuild the polling loop with fresh connections; in webhook mode, set the
        webhook again when another process deleted it (a webhook has no connection of
        its own to rebuild). One set to another URL is left to the operator: setting it
        back would fight another deployment of the bot for its updates."""
        if self._poller is not None:
            return await self._poller.restart()
        if self._elsewhere is None or self._elsewhere[0] or self._bot is None:
            return False
        try:
            await self._set_webhook(self._bot)
        except DeliveryError as error:
            log.warning("Telegram setWebhook failed: %s", redact(str(error), self.settings.token))
            return False
        log.warning("Telegram's webhook was deleted: set back to this gateway's")
        self._webhook_set_again += 1
        return True

    def _chat_moved(self, old_chat_id: str, new_chat_id: str) -> None:
        """A send found the chat under a new id: the gateway moves its session too
        (docs/design.md#chat-moves), in the background — a send must not wait on it."""
        if self._sink is None:
            return
        moved = ChatMoved(self.platform, old_chat_id, new_chat_id)
        task = asyncio.create_task(self._pass_move(self._sink, moved))
        self._moves.add(task)
        task.add_done_callback(self._moves.discard)

    async def _pass_move(self, sink: InboundSink, moved: ChatMoved) -> None:
        try:
            await sink(moved)
        except Exception:  # the move is retried by the next service message or send
            log.exception("Telegram chat move %s not passed on", moved.old_chat_id)

    def _running_sender(self) -> Sender:
        if self._sender is None:
            raise DeliveryError("Telegram adapter is not running", platform=PLATFORM)
        return self._sender

    def _make_bot(
        self, request: BaseRequest | None = None, get_updates_request: BaseRequest | None = None
    ) -> Bot:
        settings = self.settings
        return Bot(
            settings.token,
            base_url=settings.api_base_url,
            base_file_url=settings.file_base_url,
            request=request
            or http_request(
                connection_pool_size=SEND_CONNECTIONS,
                read_timeout=15.0,
                httpx_kwargs={"limits": _SEND_LIMITS},
            ),
            get_updates_request=get_updates_request or http_request(connection_pool_size=1),
        )

    async def _register_commands(self, bot: Bot) -> None:
        commands = list(self.settings.bot_commands)
        if not commands:
            return
        try:
            await self._caller.call("setMyCommands", "-", lambda: bot.set_my_commands(commands))
        except DeliveryError as error:  # the menu is a convenience only
            log.warning("Telegram setMyCommands failed: %s", type(error).__name__)

    async def _start_polling(self, bot: Bot, processor: UpdateProcessor) -> None:
        try:
            # Pending updates stay queued: they are processed, never dropped (docs/design.md#delivery-guarantee).
            await self._caller.call(
                "deleteWebhook", "-", lambda: bot.delete_webhook(drop_pending_updates=False)
            )
        except DeliveryError as error:  # polling reports a Conflict if it matters
            log.warning("Telegram deleteWebhook failed: %s", type(error).__name__)
        self._poller = UpdatePoller(self.settings, self._make_bot, processor)
        await self._poller.start()

    async def _start_webhook(self, bot: Bot, processor: UpdateProcessor) -> None:
        from adapters.telegram.webhook import WebhookReceiver  # aiohttp only when used

        webhook = self.settings.webhook
        assert webhook is not None
        self._webhook = WebhookReceiver(webhook, bot, processor)
        try:
            await self._webhook.start()
        except OSError as error:  # the port is taken (another gateway?), or not ours to bind
            where = f"{webhook.listen}:{webhook.port}"
            # The system's words, not asyncio's sentence around them (a name that does not
            # resolve has a resolver's errno, below zero: its own words).
            code = error.errno or 0
            why = os.strerror(code) if code > 0 else error.strerror
            taken = error.errno == errno.EADDRINUSE
            raise TelegramStartError(
                f"Telegram webhook cannot listen on {where}: {why or error}"
                + (
                    " (is another gateway running? choose another platforms.telegram.webhook.port)"
                    if taken
                    else " (check platforms.telegram.webhook.listen and port)"
                )
            ) from None
        try:
            await self._set_webhook(bot)
        except DeliveryError as error:
            reason = redact(str(error), self.settings.token)
            raise TelegramStartError(f"Telegram setWebhook failed: {reason}") from None

    async def _set_webhook(self, bot: Bot) -> None:
        """Telegram sends the updates to the configured URL, with the secret; those
        waiting stay (none is dropped)."""
        webhook = self.settings.webhook
        assert webhook is not None
        await self._caller.call(
            "setWebhook",
            "-",
            lambda: bot.set_webhook(
                webhook.url,
                allowed_updates=ALLOWED_UPDATES,
                secret_token=webhook.secret,
                drop_pending_updates=False,
            ),
        )


class _RedactToken(logging.Filter):
    """Blanks the token (and the webhook secret, which setWebhook's parameters carry)."""

    def __init__(self, token: str, secret: str = "") -> None:
        super().__init__()
        self._token = token
        self._secret = secret

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message, self._token)
        if self._secret:
            clean = clean.replace(self._secret, "<webhook secret>")
        if clean != message:
            record.msg, record.args = clean, None
        return True
