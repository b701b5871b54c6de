"""Webhook mode: a small aiohttp server that answers Telegram only after the sink returned.

PTB's webhook server needs the ``webhooks`` extra (tornado) and, like its polling, queues
updates and answers 200 before a handler ran. Here the HTTP answer is the
acknowledgement: 200 once the update is stored (or skipped for good), 500 when the sink
failed, so Telegram delivers it again later. Telegram may POST concurrently; updates are
handed to the sink one at a time, in arrival order, like polling does.

It fails closed (docs/design.md#webhook-secret): a request without the secret Telegram
was given in setWebhook is refused with 403 before its body is read, so whoever learns
the URL cannot post updates in an allowed user's name; a body that is not one update
object (not JSON, nested too deep for the parser, a shape python-telegram-bot cannot
read) is refused with 400 and one log line, and never reaches the sink.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import weakref

from aiohttp import web
from telegram import Bot, Update

from adapters.telegram.receiving import UpdateProcessor, chat_of
from adapters.telegram.settings import WebhookSettings

log = logging.getLogger(__name__)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookReceiver:
    """Serves ``settings.local_path`` on ``listen:port`` until stopped."""

    def __init__(self, settings: WebhookSettings, bot: Bot, processor: UpdateProcessor) -> None:
        self._settings = settings
        self._secret = settings.secret.encode()
        self._bot = bot
        self._processor = processor
        self._runner: web.AppRunner | None = None
        #: One update at a time per chat (its order), chats side by side. A chat's lock
        #: lives while a request holds or waits for it: nothing to clean up.
        self._chats: weakref.WeakValueDictionary[int | None, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(self._settings.local_path, self._receive)
        self._runner = web.AppRunner(app, shutdown_timeout=5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._settings.listen, self._settings.port)
        await site.start()
        log.info(
            "Telegram webhook listening on %s:%s%s",
            self._settings.listen,
            self._settings.port,
            self._settings.local_path,
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, self._secret):
            log.info("Telegram webhook: refused a request without the secret (%s)", request.remote)
            return web.Response(status=403)
        update = await self._read_update(request)
        if isinstance(update, str):
            log.warning(
                "Telegram webhook: refused a body that is not one update (%s) from %s",
                update,
                request.remote,
            )
            return web.Response(status=400)
        lock = self._chats.setdefault(chat_of(update), asyncio.Lock())
        async with lock:
            stored = await self._processor.process(update)
        return web.Response(status=200 if stored else 500)

    async def _read_update(self, request: web.Request) -> Update | str:
        """The update, or why the body is not one (a few words for the log, no body text)."""
        try:
            body = await request.json()
        except ValueError:  # not JSON (or not UTF-8) at all
            return "not JSON"
        except RecursionError:  # e.g. 100,000 nested arrays: the parser's stack ran out
            return "nested too deep"
        if not isinstance(body, dict):
            return "JSON, but not an object"
        try:
            return Update.de_json(body, self._bot)
        except Exception as error:  # a shape PTB cannot read is the sender's error: 400
            return f"unreadable: {type(error).__name__}"
