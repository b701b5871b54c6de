"""A reply shown while it is written: one message, edited in place as the text grows.

Partial text is shown plain (half-written Markdown would not parse); the last edit
carries the formatting. The first text goes out the moment it arrives, as a message
(unless this chat saw an edit less than ``stream_edit_interval`` ago). Edits in one chat
are at least ``stream_edit_interval`` apart (Telegram allows about one per second per
chat) and are made beside the stream, never in its way: :meth:`update` only notes the
text, and one edit due at the end of the interval shows the latest of it — so a model
that pauses (before a tool call, say) is shown up to its last word, and the model's
tokens are never read later for Telegram being slow (docs/design.md#slow-models).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from adapters.base import DeliveryError, OutboundMessage, ReplyStream
from adapters.chunking import split_message, utf16_length
from adapters.telegram.calls import TelegramCallFailed
from adapters.telegram.delivery import Sender

_ELLIPSIS = " …"


class TelegramReplyStream(ReplyStream):
    """Created by :meth:`TelegramAdapter.open_stream` for one reply."""

    def __init__(self, sender: Sender, target: OutboundMessage) -> None:
        self._sender = sender
        self._target = target
        self._message_id: int | None = None
        #: The chat the first message landed in; the edits go there. Should the chat move
        #: meanwhile (a group became a supergroup), the reply is sent anew where it went.
        self._where = target.chat_id
        self._shown = ""
        self._latest = ""
        #: The first message could not be sent: the rest goes out whole at the end.
        self._given_up = False
        self._finished = False
        #: Makes the edits that are due; ``_editing`` while a request of it is out.
        self._editor: asyncio.Task[None] | None = None
        self._editing = False

    async def update(self, text_so_far: str) -> None:
        preview = self._preview(text_so_far)
        if not preview or self._given_up or self._finished:
            return
        self._latest = preview
        if self._message_id is None and self._editor is None:
            if self._sender.edit_due(self._target.chat_id):
                await self._send_first(preview)  # at once: the first text is never held
                return
        if self._editor is None or self._editor.done():
            self._editor = asyncio.create_task(self._show_when_due())

    async def _send_first(self, text: str) -> None:
        try:
            self._message_id = await self._sender.send_plain(self._target, text)
            self._where = self._sender.chat(self._target.chat_id)
        except DeliveryError:
            self._given_up = True  # logged by the sender; finish() sends the whole reply
            return
        self._sender.mark_edited(self._target.chat_id)
        self._shown = text

    async def _show_when_due(self) -> None:
        """Show the latest text at the next slot this chat has, until it is shown."""
        chat_id = self._target.chat_id
        while self._latest != self._shown and not (self._finished or self._given_up):
            await self._sender.wait_for_edit_slot(chat_id)
            text = self._latest
            self._editing = True
            try:
                if self._message_id is None:
                    await self._send_first(text)
                    continue
                if self._moved():
                    return  # the old chat is read-only: finish() sends the reply anew
                if await self._sender.try_edit_plain(chat_id, self._where, self._message_id, text):
                    self._shown = text
                elif self._sender.edit_due(chat_id):
                    # Refused, not flood control (that postpones the slot itself):
                    # the next try, at the next update, waits its interval too.
                    self._sender.mark_edited(chat_id)
                    return
            finally:
                self._editing = False

    async def _stop_editing(self) -> None:
        """No more partial edits: one on its way is let finish (its answer decides the
        next edit's slot), one waiting for its slot is dropped."""
        self._finished = True
        editor = self._editor
        if editor is None or editor.done():
            return
        if not self._editing:
            editor.cancel()
        await asyncio.gather(editor, return_exceptions=True)

    def _moved(self) -> bool:
        return self._sender.chat(self._target.chat_id) != self._where

    async def finish(self, final_text: str) -> list[str]:
        await self._stop_editing()
        if self._message_id is None or self._moved():
            # Nothing shown yet, or shown in a chat that has moved since (the partial
            # reply stays behind there): the whole reply goes to where the chat is.
            return await self._sender.send(replace(self._target, text=final_text))
        chunks = self._sender.split(final_text)
        if not chunks:
            return [str(self._message_id)]
        chat_id = self._target.chat_id
        await self._sender.wait_for_edit_slot(chat_id)
        try:
            await self._sender.edit_formatted(chat_id, self._where, self._message_id, chunks[0])
        except TelegramCallFailed as failed:
            if failed.new_chat_id is None:
                raise
            # The group became a supergroup: the partial reply stays behind in the old
            # chat (read-only now), the whole reply goes to where the chat continues.
            return await self._sender.send(replace(self._target, text=final_text))
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
