"""What a Telegram message carries besides its text: files the gateway may fetch (photos,
voice notes, audio, video notes, documents) and short text for everything else
(stickers, locations, venues, contacts, polls, dice), plus who a forward came from.

Nothing is downloaded here: each attachment gets a ``fetch`` the gateway calls only for
a message it decided to read (docs/design.md#authorization).
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial
from typing import Any

from telegram import (
    Message,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    PhotoSize,
)

from adapters.base import Attachment, AttachmentKind

#: The Bot API refuses getFile downloads above this size.
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024

#: Downloads one file by its id (chat id for logging, file id).
Download = Callable[[str, str], Awaitable[bytes | None]]


def seconds(value: Any) -> float | None:
    """A duration PTB gives as int or timedelta (depending on its opt-in)."""
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def duration_of(media: Any) -> float | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PTB warns on every read until PTB_TIMEDELTA is set
        return seconds(getattr(media, "duration", None))


def attachments(
    message: Message, download: Download, pick_photo: Callable[[tuple[PhotoSize, ...]], PhotoSize]
) -> list[Attachment]:
    """The files of ``message``, each fetched only if the gateway asks."""
    chat_id = str(message.chat.id)

    def lazy(kind: AttachmentKind, file: Any, mime: str, name: str = "") -> Attachment:
        size = getattr(file, "file_size", None)
        fetch = None
        if (size or 0) <= MAX_DOWNLOAD_BYTES:
            fetch = partial(download, chat_id, file.file_id)
        duration = duration_of(file) if kind != "image" and kind != "document" else None
        return Attachment(kind, mime, name=name, size=size, fetch=fetch, duration=duration)

    if message.photo:
        return [lazy("image", pick_photo(message.photo), "image/jpeg")]
    if message.voice:
        return [lazy("voice", message.voice, message.voice.mime_type or "audio/ogg")]
    if message.video_note:
        return [lazy("video_note", message.video_note, "video/mp4")]
    if message.audio:
        audio = message.audio
        return [lazy("audio", audio, audio.mime_type or "audio/mpeg", audio.file_name or "")]
    document = message.document
    if document is None or message.animation is not None:
        return []
    mime = document.mime_type or "application/octet-stream"
    name = document.file_name or ""
    if mime.startswith("image/") and (document.file_size or 0) <= MAX_DOWNLOAD_BYTES:
        return [lazy("image", document, mime, name)]
    if mime.startswith("audio/"):
        return [lazy("audio", document, mime, name)]
    return [lazy("document", document, mime, name)]


def placeholder(message: Message) -> str:
    """Short text for what a message holds that is not text nor a file the gateway reads."""
    if message.sticker:
        return f"[sticker {message.sticker.emoji or ''}]".replace(" ]", "]")
    if message.animation:
        return "[GIF]"
    if message.video:
        duration = duration_of(message.video)
        return f"[video {_clock(duration)}]" if duration else "[video]"
    if message.venue:
        venue = message.venue
        where = f"{venue.location.latitude:.5f}, {venue.location.longitude:.5f}"
        return f"[venue: {venue.title}, {venue.address} ({where})]"
    if message.location:
        location = message.location
        live = "live " if location.live_period else ""
        return f"[{live}location: {location.latitude:.5f}, {location.longitude:.5f}]"
    if message.contact:
        contact = message.contact
        name = " ".join(p for p in (contact.first_name, contact.last_name) if p)
        return f"[contact: {name}, {contact.phone_number}]"
    if message.poll:
        options = " / ".join(option.text for option in message.poll.options)
        return f"[poll: {message.poll.question} — options: {options}]"
    if message.dice:
        return f"[dice {message.dice.emoji} rolled {message.dice.value}]"
    return ""


def quoted_placeholder(message: Message) -> str:
    """How a replied-to message without text is quoted: what it held."""
    if message.voice:
        return "[voice message]"
    if message.video_note:
        return "[video message]"
    if message.audio:
        return f"[audio: {message.audio.title or message.audio.file_name or 'untitled'}]"
    if message.document and not message.animation:
        return f"[file: {message.document.file_name or 'unnamed'}]"
    if message.photo:
        return "[photo]"
    return placeholder(message)


def forwarded_from(message: Message) -> str | None:
    """Who a forwarded message first came from, as the chat shows it."""
    origin = message.forward_origin
    if origin is None:
        return None
    if isinstance(origin, MessageOriginUser):
        return origin.sender_user.full_name
    if isinstance(origin, MessageOriginHiddenUser):
        return origin.sender_user_name
    if isinstance(origin, MessageOriginChat):
        return origin.sender_chat.title or "a chat"
    if isinstance(origin, MessageOriginChannel):
        return origin.chat.title or "a channel"
    return "someone"


def _clock(value: float) -> str:
    minutes, secs = divmod(round(value), 60)
    return f"{minutes}:{secs:02d}"
