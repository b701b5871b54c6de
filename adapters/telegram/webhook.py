"""Webhook mode: a small aiohttp server that answers Telegram only after the sink returned.

PTB's webhook server needs the ``webhooks`` extra (tornado) and, like its polling, queues
updates and answers 200 before a handler ran. Here the HTTP answer is the
acknowledgement: 200 once the update is stored (or skipped for good), 500 when the sink
failed, so Telegram delivers it again later. Telegram may POST concurrently; updates are
handed to the sink one at a time, in arrival order, like polling does.
"""

from __future__ import annotations

import asyncio
import hmac
import logging

from aiohttp import web
from telegram import Bot, Update

from adapters.telegram.receiving import UpdateProcessor
from adapters.telegram.settings import WebhookSettings

log = logging.getLogger(__name__)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookReceiver:
    """Serves ``settings.local_path`` on ``listen:port`` until stopped."""

    def __init__(self, settings: WebhookSettings, bot: Bot, processor: UpdateProcessor) -> None:
        self._settings = settings
        self._bot = bot
        self._processor = processor
        self._runner: web.AppRunner | None = None
        self._one_at_a_time = asyncio.Lock()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(self._settings.local_path, self._receive)
        self._runner = web.AppRunner(app, shutdown_timeout=5)
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
        secret = self._settings.secret
        given = request.headers.get(SECRET_HEADER, "")
        if secret and not hmac.compare_digest(given.encode(), secret.encode()):
            return web.Response(status=403)
        try:
            update = Update.de_json(await request.json(), self._bot)
        except (ValueError, TypeError, KeyError):
            return web.Response(status=400)
        async with self._one_at_a_time:
            stored = await self._processor.process(update)
        return web.Response(status=200 if stored else 500)
