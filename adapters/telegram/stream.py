"""A reply shown while it is written: one message, edited in place as the text grows.

Partial text is shown plain (half-written Markdown would not parse); the last edit
carries the formatting. Edits in one chat are at least ``stream_edit_interval`` apart
(Telegram allows about one per second per chat); updates arriving sooner are skipped,
the latest text is shown by the next edit that is due.
"""

from __future__ import annotations

from dataclasses import replace

from adapters.base import DeliveryError, OutboundMessage, ReplyStream
from adapters.chunking import split_message, utf16_length
from adapters.telegram.delivery import Sender

_ELLIPSIS = " …"


class TelegramReplyStream(ReplyStream):
    """Created by :meth:`TelegramAdapter.open_stream` for one reply."""

    def __init__(self, sender: Sender, target: OutboundMessage) -> None:
        self._sender = sender
        self._target = target
        self._message_id: int | None = None
        self._shown = ""

    async def update(self, text_so_far: str) -> None:
        preview = self._preview(text_so_far)
        chat_id = self._target.chat_id
        if not preview or preview == self._shown or not self._sender.edit_due(chat_id):
            return
        if self._message_id is None:
            try:
                self._message_id = await self._sender.send_plain(self._target, preview)
            except DeliveryError:
                return  # logged by the sender; finish() will try a normal send
            self._sender.mark_edited(chat_id)
            self._shown = preview
        elif await self._sender.try_edit_plain(chat_id, self._message_id, preview):
            self._shown = preview

    async def finish(self, final_text: str) -> list[str]:
        if self._message_id is None:
            return await self._sender.send(replace(self._target, text=final_text))
        chunks = self._sender.split(final_text)
        if not chunks:
            return [str(self._message_id)]
        chat_id = self._target.chat_id
        await self._sender.wait_for_edit_slot(chat_id)
        await self._sender.edit_formatted(chat_id, self._message_id, chunks[0])
        ids = [str(self._message_id)]
        if len(chunks) > self._sender.settings.max_messages_per_reply:
            ids.append(await self._sender.send_document(replace(self._target, text=final_text)))
            return ids
        for chunk in chunks[1:]:
            ids.append(await self._sender.send_chunk(self._target, chunk, reply=False))
        return ids

    def _preview(self, text: str) -> str:
        text = text.strip()
        limit = self._sender.settings.message_limit
        if utf16_length(text) <= limit:
            return text
        head = split_message(text, limit - utf16_length(_ELLIPSIS), length=utf16_length)[0]
        return head + _ELLIPSIS
