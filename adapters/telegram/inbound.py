"""Turn a Telegram update into an :class:`InboundMessage` (addressing, mentions, media)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from telegram import Bot, Message, MessageEntity, PhotoSize, Update

from adapters.base import (
    BotBlocked,
    ChatMoved,
    ChatType,
    DeliveryError,
    Inbound,
    InboundMessage,
    QuotedMessage,
)
from adapters.telegram import media
from adapters.telegram.calls import ApiCaller
from adapters.telegram.settings import TelegramSettings

log = logging.getLogger(__name__)

PLATFORM = "telegram"
_CHAT_TYPES: dict[str, ChatType] = {"private": "private", "group": "group", "supergroup": "group"}
CommandTarget = Literal["none", "ours", "other"]


@dataclass(frozen=True)
class BotIdentity:
    id: int
    username: str


def _blocked(update: Update) -> BotBlocked | None:
    """A user who blocked the bot in their private chat (``my_chat_member``: ``kicked``)."""
    member = update.my_chat_member
    if member is None or member.chat.type != "private":
        return None
    if member.new_chat_member.status != "kicked":
        return None
    return BotBlocked(PLATFORM, str(member.chat.id), str(member.from_user.id))


class UpdateConverter:
    """Builds InboundMessages; photos are downloaded through the Bot API on demand.

    An update that is no message but news of a chat (a group became a supergroup, a user
    blocked the bot) becomes its event (:class:`ChatMoved`, :class:`BotBlocked`)."""

    def __init__(
        self, settings: TelegramSettings, bot: Bot, identity: BotIdentity, caller: ApiCaller
    ) -> None:
        self._settings = settings
        self._bot = bot
        self._identity = identity
        self._caller = caller

    async def convert(self, update: Update) -> Inbound | None:
        """The message or chat event in ``update``, or None for updates that carry nothing
        for the gateway. The caller hands it to the sink: one that fails there is never
        confirmed, a move or a block as much as a message."""
        blocked = _blocked(update)
        if blocked is not None:
            return blocked
        message = update.message or update.edited_message
        if message is None:
            return None
        chat_type = _CHAT_TYPES.get(message.chat.type)
        if chat_type is None:
            return None
        moved = _moved(message)
        if moved is not None:
            return ChatMoved(PLATFORM, *moved)
        text = message.text or message.caption or ""
        entities = message.entities or message.caption_entities or ()
        command = self._command_target(text, entities)
        addressed = self._is_addressed(message, chat_type, entities, text, command)
        bare = chat_type != "private" and command == "ours" and "@" not in text.split(maxsplit=1)[0]
        text = self._strip_own_mentions(text, entities, command)
        attachments = media.attachments(message, self._download, self._pick_photo)
        text = "\n".join(part for part in (text, media.placeholder(message)) if part)
        if not text and not attachments:
            return None  # service messages (joins, pins, topic edits…)
        sender, sender_name = _sender(message)
        return InboundMessage(
            platform=PLATFORM,
            chat_id=str(message.chat.id),
            user_id=sender,
            user_name=sender_name,
            text=text,
            thread_id=str(message.message_thread_id) if message.is_topic_message else None,
            chat_type=chat_type,
            addressed=addressed,
            attachments=tuple(attachments),
            reply_to=self._quoted(message),
            forwarded_from=media.forwarded_from(message),
            platform_message_id=str(message.message_id),
            dedupe_key=f"telegram:{update.update_id}",
            is_edit=update.edited_message is not None,
            bare_command=bare,
            received_at=message.edit_date or message.date,
        )

    # -- addressing ------------------------------------------------------------------
    def _is_addressed(
        self,
        message: Message,
        chat_type: ChatType,
        entities: tuple[MessageEntity, ...],
        text: str,
        command: CommandTarget,
    ) -> bool:
        if chat_type == "private":
            return True
        if command != "none":
            return command == "ours"
        if not self._settings.require_mention:
            return True
        if str(message.chat.id) in self._settings.free_response_chats:
            return True
        return self._replies_to_bot(message) or any(
            self._is_own_mention(entity, text) for entity in entities
        )

    def _command_target(self, text: str, entities: tuple[MessageEntity, ...]) -> CommandTarget:
        for entity in entities:
            if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
                _, _, target = _entity_text(text, entity).partition("@")
                if not target or target.lower() == self._identity.username.lower():
                    return "ours"
                return "other"
        return "none"

    def _is_own_mention(self, entity: MessageEntity, text: str) -> bool:
        if entity.type == MessageEntity.MENTION:
            return _entity_text(text, entity).lower() == f"@{self._identity.username.lower()}"
        if entity.type == MessageEntity.TEXT_MENTION:
            return entity.user is not None and entity.user.id == self._identity.id
        return False

    def _replies_to_bot(self, message: Message) -> bool:
        reply = _real_reply(message)
        return bool(reply and reply.from_user and reply.from_user.id == self._identity.id)

    def _strip_own_mentions(
        self, text: str, entities: tuple[MessageEntity, ...], command: CommandTarget
    ) -> str:
        """Remove "@thisbot" mentions and the "@thisbot" suffix of a command."""
        spans: list[tuple[int, int]] = []
        for entity in entities:
            start = _utf16_index(text, entity.offset)
            end = _utf16_index(text, entity.offset + entity.length)
            if self._is_own_mention(entity, text):
                spans.append(_with_one_space(text, start, end))
            elif command == "ours" and entity.type == MessageEntity.BOT_COMMAND and start == 0:
                at = text.find("@", start, end)
                if at != -1:
                    spans.append((at, end))
        for start, end in sorted(spans, reverse=True):
            text = text[:start] + text[end:]
        return text.strip()

    # -- context and media -----------------------------------------------------------
    def _quoted(self, message: Message) -> QuotedMessage | None:
        reply = _real_reply(message)
        if reply is None:
            return None
        quote = message.quote.text if message.quote else ""
        text = quote or reply.text or reply.caption or media.quoted_placeholder(reply)
        author = reply.from_user
        origin = media.forwarded_from(reply)
        if origin is not None:  # a forward's words are its origin's, not the forwarder's
            return QuotedMessage(text=text, author=origin)
        return QuotedMessage(
            text=text,
            author=_sender(reply)[1],
            from_bot=bool(author and author.id == self._identity.id),
            author_id=str(author.id) if author else "",
        )

    def _pick_photo(self, sizes: tuple[PhotoSize, ...]) -> PhotoSize:
        """The largest size a vision model can use without it being scaled down anyway."""
        fitting = [
            size
            for size in sizes
            if max(size.width, size.height) <= self._settings.photo_max_side
            and (size.file_size or 0) <= media.MAX_DOWNLOAD_BYTES
        ]
        pool = fitting or [min(sizes, key=lambda size: size.width * size.height)]
        return max(pool, key=lambda size: size.width * size.height)

    async def _download(self, chat_id: str, file_id: str) -> bytes | None:
        try:
            file = await self._caller.call("getFile", chat_id, lambda: self._bot.get_file(file_id))
            data = await self._caller.call("file download", chat_id, file.download_as_bytearray)
        except DeliveryError as error:
            # The text still reaches the agent, with a note that the file is missing.
            log.warning(
                "Telegram file in chat %s not downloaded: %s", chat_id, type(error).__name__
            )
            return None
        return bytes(data)


def _real_reply(message: Message) -> Message | None:
    """The replied-to message; in forum topics Telegram reports the topic's creation
    service message as the reply target of every message, which is not a real reply."""
    reply = message.reply_to_message
    if reply is None or reply.forum_topic_created is not None:
        return None
    return reply


def _sender(message: Message) -> tuple[str, str]:
    if message.from_user is not None:
        return str(message.from_user.id), message.from_user.full_name
    if message.sender_chat is not None:  # anonymous admins and channels post as a chat
        return str(message.sender_chat.id), message.sender_chat.title or ""
    return "", ""


def _moved(message: Message) -> tuple[str, str] | None:
    """(old id, new id) when this service message says a group became a supergroup: sent
    in the old group (``migrate_to_chat_id``) and in the new one (``migrate_from_chat_id``)."""
    if message.migrate_to_chat_id:
        return str(message.chat.id), str(message.migrate_to_chat_id)
    if message.migrate_from_chat_id:
        return str(message.migrate_from_chat_id), str(message.chat.id)
    return None


def _entity_text(text: str, entity: MessageEntity) -> str:
    return text[
        _utf16_index(text, entity.offset) : _utf16_index(text, entity.offset + entity.length)
    ]


def _utf16_index(text: str, units: int) -> int:
    """The str index at ``units`` UTF-16 code units (entity offsets count those)."""
    count = 0
    for index, char in enumerate(text):
        if count >= units:
            return index
        count += 2 if ord(char) > 0xFFFF else 1
    return len(text)


def _with_one_space(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen a removed span so no double space (or a leading "@bot, ") is left behind."""
    if start == 0:
        while end < len(text) and text[end] in ",:":
            end += 1
        while end < len(text) and text[end] == " ":
            end += 1
        return start, end
    if text[start - 1] == " ":
        return start - 1, end
    return start, end
