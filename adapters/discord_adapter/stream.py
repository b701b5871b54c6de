"""A Discord reply shown while it is written: one message, edited in place as the text
grows (``platforms.discord.stream``), like Telegram's stream.

Partial text goes out as it is (Discord renders unfinished Markdown harmlessly), with
unsafe links made plain like every reply (docs/design.md#outbound-links). Edits in one
channel are at least ``stream_edit_interval`` apart (Discord allows about five per five
seconds); updates arriving sooner are skipped, the next due edit shows the latest text.
The last edit carries the whole first part; further parts are posted after it.
"""

from __future__ import annotations

import asyncio
import logging
import time

import discord

from adapters.base import DeliveryError, OutboundMessage, ReplyStream
from adapters.chunking import split_message
from adapters.discord_adapter import outbound
from adapters.discord_adapter.outbound import MESSAGE_LIMIT, NO_PINGS, discord_errors
from adapters.discord_adapter.settings import DiscordSettings

log = logging.getLogger(__name__)

_ELLIPSIS = " …"


class DiscordReplyStream(ReplyStream):
    """Created by ``DiscordAdapter.open_stream`` for one reply."""

    def __init__(
        self,
        client: discord.Client,
        target: OutboundMessage,
        settings: DiscordSettings,
    ) -> None:
        self._client = client
        self._target = target
        self._interval = settings.stream_edit_interval
        self._max_chunks = settings.max_chunks
        self._poster = outbound.channel_poster(client, target)
        self._message: discord.Message | None = None
        self._shown = ""
        self._last_edit = 0.0

    async def update(self, text_so_far: str) -> None:
        preview = _preview(outbound.plain_unsafe_links(text_so_far.strip()))
        if not preview or preview == self._shown:
            return
        if time.monotonic() - self._last_edit < self._interval:
            return
        try:
            await self._show(preview)
        except DeliveryError as error:
            # A partial update may fail; finish() shows the whole reply anyway.
            log.info("Discord stream update in %s skipped: %s", self._channel_id, error)
            return
        self._shown = preview
        self._last_edit = time.monotonic()

    async def _show(self, preview: str) -> None:
        with discord_errors(self._target.chat_id):
            if self._message is None:
                channel = self._client.get_partial_messageable(self._channel_id)
                reference = outbound.reference_to(self._target, self._channel_id)
                if reference is None:
                    self._message = await channel.send(preview, allowed_mentions=NO_PINGS)
                else:
                    self._message = await channel.send(
                        preview, allowed_mentions=NO_PINGS, reference=reference
                    )
            else:
                await self._message.edit(content=preview, allowed_mentions=NO_PINGS)

    async def finish(self, final_text: str) -> list[str]:
        if not final_text.strip():
            return [str(self._message.id)] if self._message is not None else []
        message = self._message
        if message is None:
            return await self._post(final_text, self._poster)
        await asyncio.sleep(max(0.0, self._last_edit + self._interval - time.monotonic()))

        async def post(content: str, file: discord.File | None, first: bool) -> int:
            if first:
                with discord_errors(self._target.chat_id):
                    await message.edit(content=content, allowed_mentions=NO_PINGS)
                if file is None:
                    return message.id
                return await self._poster("", file, False)
            return await self._poster(content, file, False)

        return await self._post(final_text, post)

    async def _post(self, text: str, poster: outbound.Poster) -> list[str]:
        try:
            return await outbound.post_parts(text, poster, [], max_chunks=self._max_chunks)
        except DeliveryError as error:
            outbound.delivery_error(self._target.chat_id, error)  # logged
            raise

    @property
    def _channel_id(self) -> int:
        return int(self._target.thread_id or self._target.chat_id)


def _preview(text: str) -> str:
    if len(text) <= MESSAGE_LIMIT:
        return text
    return split_message(text, MESSAGE_LIMIT - len(_ELLIPSIS))[0] + _ELLIPSIS
