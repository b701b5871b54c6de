"""Replies out to Telegram: split, format, fall back to plain text, show typing.

Long replies: a reply that needs more than ``max_messages_per_reply`` messages (4 by
default, i.e. more than ~16,000 characters) is not sent as a flood of messages. Its first
message goes out as usual and the whole reply follows as a ``reply.md`` document, so the
chat shows the start and the user can open the rest in one piece.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from telegram import Bot, Message, ReplyParameters
from telegram.constants import ChatAction, ParseMode

from adapters.base import OutboundMessage
from adapters.chunking import split_message, utf16_length
from adapters.telegram.calls import ApiCaller, TelegramCallFailed
from adapters.telegram.formatting import (
    markdown_to_telegram_html,
    visible_length,
    visible_text,
)
from adapters.telegram.settings import TelegramSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

ENTITY_ERROR = "can't parse entities"
NOT_MODIFIED = "message is not modified"
DOCUMENT_NAME = "reply.md"


def chat_ref(chat_id: str) -> int | str:
    """Numeric chat ids as int; "@channelname" stays a string."""
    return int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id


#: Chats whose last edit time is kept before those past their interval are forgotten.
EDIT_TIMES_KEPT = 1024


class Sender:
    """Sends and edits messages for the adapter and its reply streams."""

    def __init__(
        self,
        settings: TelegramSettings,
        bot: Bot,
        caller: ApiCaller,
        on_moved: Callable[[str, str], None] | None = None,
    ) -> None:
        self.settings = settings
        self._bot = bot
        self._caller = caller
        self._last_edit: dict[str, float] = {}
        #: Chats that continue under another id (a group upgraded to a supergroup).
        self.moved: dict[str, str] = {}
        self._on_moved = on_moved

    # -- chats that moved (docs/design.md#chat-moves) ---------------------------------
    def chat(self, chat_id: str) -> str:
        """Where ``chat_id`` is now."""
        return self.moved.get(chat_id, chat_id)

    def chat_moved(self, old_chat_id: str, new_chat_id: str) -> None:
        if self.moved.get(old_chat_id) == new_chat_id or old_chat_id == new_chat_id:
            return
        self.moved[old_chat_id] = new_chat_id
        log.info("Telegram chat %s continues as %s", old_chat_id, new_chat_id)
        if self._on_moved is not None:
            self._on_moved(old_chat_id, new_chat_id)

    async def _in_chat(self, what: str, chat_id: str, request: Callable[[str], Awaitable[T]]) -> T:
        """``request(chat)`` for the chat where it is now; when Telegram answers that the
        group became a supergroup, once more there (nothing is lost to the move)."""
        try:
            return await self._caller.call(what, chat_id, lambda: request(self.chat(chat_id)))
        except TelegramCallFailed as failed:
            if failed.new_chat_id is None:
                raise
            self.chat_moved(chat_id, failed.new_chat_id)
        try:
            return await self._caller.call(what, chat_id, lambda: request(self.chat(chat_id)))
        except TelegramCallFailed as again:
            if again.new_chat_id is not None:  # moved twice: not followed further
                self._caller.gave_up(again)
            raise

    # -- whole replies ---------------------------------------------------------------
    async def send(self, message: OutboundMessage) -> list[str]:
        """Deliver ``message`` (see the module doc for long replies); returns message ids."""
        chunks = self.split(message.text)
        if len(chunks) > self.settings.max_messages_per_reply:
            first = await self.send_chunk(message, chunks[0], reply=True)
            return [first, await self.send_document(message)]
        return [
            await self.send_chunk(message, chunk, reply=index == 0)
            for index, chunk in enumerate(chunks)
        ]

    def split(self, text: str) -> list[str]:
        """Markdown chunks that each fit one message once formatted."""
        limit = self.settings.message_limit
        return [
            piece
            for chunk in split_message(text, limit, length=utf16_length)
            for piece in self._fit_formatted(chunk, limit)
        ]

    def _fit_formatted(self, chunk: str, limit: int) -> list[str]:
        # Formatting rarely lengthens visible text (it removes markup), but never assume.
        if visible_length(markdown_to_telegram_html(chunk)) <= limit:
            return [chunk]
        smaller = split_message(chunk, limit * 9 // 10, length=utf16_length)
        return [piece for part in smaller for piece in self._fit_formatted(part, limit)]

    async def send_chunk(self, target: OutboundMessage, chunk: str, *, reply: bool) -> str:
        """Send one chunk as HTML; resend it as plain text if Telegram rejects the entities."""
        placement = self._placement(target, reply)
        html_text = markdown_to_telegram_html(chunk)
        try:
            sent = await self._send_text(target.chat_id, html_text, ParseMode.HTML, placement)
        except TelegramCallFailed as failed:
            if not failed.says(ENTITY_ERROR):
                raise self._caller.gave_up(failed) from None
            log.warning(
                "Telegram rejected formatting in chat %s; sending plain text", target.chat_id
            )
            try:
                plain = visible_text(html_text)
                sent = await self._send_text(target.chat_id, plain, None, placement)
            except TelegramCallFailed as plain_failed:
                raise self._caller.gave_up(plain_failed) from None
        return str(sent.message_id)

    async def send_plain(self, target: OutboundMessage, text: str) -> int:
        """Send unformatted text replying to the target (a stream's first message)."""
        try:
            sent = await self._send_text(target.chat_id, text, None, self._placement(target, True))
        except TelegramCallFailed as failed:
            raise self._caller.gave_up(failed) from None
        return sent.message_id

    async def send_document(self, target: OutboundMessage) -> str:
        caption = (
            f"The full reply ({len(target.text):,} characters) is attached as {DOCUMENT_NAME}."
        )
        placement = self._placement(target, reply=True)
        try:
            sent = await self._in_chat(
                "sendDocument",
                target.chat_id,
                lambda chat: self._bot.send_document(
                    chat_ref(chat),
                    target.text.encode("utf-8"),
                    filename=DOCUMENT_NAME,
                    caption=caption,
                    **placement,
                ),
            )
        except TelegramCallFailed as failed:
            raise self._caller.gave_up(failed) from None
        return str(sent.message_id)

    async def _send_text(
        self, chat_id: str, text: str, parse_mode: str | None, placement: dict[str, Any]
    ) -> Message:
        return await self._in_chat(
            "sendMessage",
            chat_id,
            lambda chat: self._bot.send_message(
                chat_ref(chat), text, parse_mode=parse_mode, **placement
            ),
        )

    @staticmethod
    def _placement(target: OutboundMessage, reply: bool) -> dict[str, Any]:
        placement: dict[str, Any] = {}
        if target.thread_id:
            placement["message_thread_id"] = int(target.thread_id)
        if reply and target.reply_to_message_id:
            # A deleted original must not make the reply fail.
            placement["reply_parameters"] = ReplyParameters(
                message_id=int(target.reply_to_message_id), allow_sending_without_reply=True
            )
        return placement

    # -- edits (reply streams) -------------------------------------------------------
    def edit_due(self, chat_id: str) -> bool:
        """True when an edit in this chat keeps to one per ``stream_edit_interval``."""
        last = self._last_edit.get(chat_id)
        return last is None or time.monotonic() - last >= self.settings.stream_edit_interval

    def mark_edited(self, chat_id: str, *, delay: float = 0.0) -> None:
        """Record an edit just done; ``delay`` postpones the next one (flood control)."""
        now = time.monotonic()
        self._last_edit[chat_id] = now + delay
        if len(self._last_edit) > EDIT_TIMES_KEPT:  # a chat whose slot is free again needs none
            interval = self.settings.stream_edit_interval
            for chat, last in list(self._last_edit.items()):
                if now - last >= interval:
                    del self._last_edit[chat]

    async def wait_for_edit_slot(self, chat_id: str) -> None:
        last = self._last_edit.get(chat_id)
        if last is not None:
            await asyncio.sleep(
                max(0.0, last + self.settings.stream_edit_interval - time.monotonic())
            )

    async def try_edit_plain(self, chat_id: str, where: str, message_id: int, text: str) -> bool:
        """One best-effort edit of a partial reply, the message ``message_id`` in the chat
        ``where`` it was sent to; flood control postpones later ones."""
        try:
            await self._caller.call(
                "editMessageText",
                chat_id,
                lambda: self._bot.edit_message_text(text, chat_ref(where), message_id),
                best_effort=True,
            )
        except TelegramCallFailed as failed:  # a partial update may fail; the final edit retries
            if failed.retry_after is not None:
                self.mark_edited(chat_id, delay=failed.retry_after)
            elif failed.new_chat_id is not None:
                self.chat_moved(chat_id, failed.new_chat_id)
            elif not failed.says(NOT_MODIFIED):
                log.info("Telegram stream edit in chat %s skipped: %s", chat_id, failed.reason)
            return False
        self.mark_edited(chat_id)
        return True

    async def edit_formatted(self, chat_id: str, where: str, message_id: int, chunk: str) -> None:
        """The final edit of ``message_id`` in ``where``: formatted, plain text if the
        entities are rejected.

        A chat that moved is noted and the failure raised (its ``new_chat_id`` set): the
        message stays behind in the old chat, the caller sends the reply anew."""
        html_text = markdown_to_telegram_html(chunk)
        for text, parse_mode in ((html_text, ParseMode.HTML), (visible_text(html_text), None)):
            try:
                await self._caller.call(
                    "editMessageText",
                    chat_id,
                    partial(
                        self._bot.edit_message_text,
                        text,
                        chat_ref(where),
                        message_id,
                        parse_mode=parse_mode,
                    ),
                )
            except TelegramCallFailed as failed:
                if failed.says(NOT_MODIFIED):
                    break
                if failed.new_chat_id is not None:
                    self.chat_moved(chat_id, failed.new_chat_id)
                    raise
                if parse_mode is None or not failed.says(ENTITY_ERROR):
                    raise self._caller.gave_up(failed) from None
                continue
            break
        self.mark_edited(chat_id)

    # -- typing (docs/design.md#typing) --------------------------------------------
    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str, thread_id: str | None) -> AsyncIterator[None]:
        in_flight: set[asyncio.Task[float]] = set()
        task = asyncio.create_task(self._keep_typing(chat_id, thread_id, in_flight))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            # A request already out is let finish: "typing…" then lands before the reply
            # (never under it), and the keep-alive connection it rides survives.
            if in_flight:
                _, late = await asyncio.wait(in_flight, timeout=self.settings.typing_finish)
                for request in late:
                    request.cancel()

    async def _keep_typing(
        self, chat_id: str, thread_id: str | None, in_flight: set[asyncio.Task[float]]
    ) -> None:
        # Only a turn that takes a noticeable time shows "typing…" (Telegram's advice);
        # Telegram shows it for ~5 s per action, so it is refreshed until cancelled.
        await asyncio.sleep(self.settings.typing_delay)
        thread = int(thread_id) if thread_id else None
        while True:
            request = asyncio.create_task(self._send_typing(chat_id, thread))
            in_flight.add(request)
            request.add_done_callback(in_flight.discard)
            await asyncio.sleep(await asyncio.shield(request))

    async def _send_typing(self, chat_id: str, thread: int | None) -> float:
        """One typing action; the seconds until the next."""
        interval = self.settings.typing_interval
        try:
            await self._caller.call(
                "sendChatAction",
                chat_id,
                lambda: self._bot.send_chat_action(
                    chat_ref(self.chat(chat_id)), ChatAction.TYPING, message_thread_id=thread
                ),
                best_effort=True,
            )
        except TelegramCallFailed as failed:  # cosmetic: a failed indicator must not end a turn
            if failed.retry_after is not None:
                return max(interval, failed.retry_after)
            log.debug("Telegram typing in chat %s failed: %s", chat_id, failed.kind)
        return interval
