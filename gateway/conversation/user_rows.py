"""The user row an inbound message becomes: what the agent sees of it.

Group rows name their sender on every line, and a sender who may not start a turn (not an
allowed user, and the group's ``group_members`` is not ``all``) is marked ``(untrusted)``:
what they say is context, never an instruction (docs/design.md#groups). Words of others
— a quoted reply, a forward — keep their author's marker.
Images are fetched only for a message that starts a turn, with a vision model, up to
``max_image_bytes`` per message; an observed message keeps a placeholder
("Eve: [photo]"), so a group's photos are not stored for ever in the database.
A message that reaches nightowl late — sent while it was stopped, or held by the
platform — says when it was sent (:class:`LateMarks`, docs/design.md#late-messages).
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo

from adapters.base import PRIVATE_CHAT_TYPES, Attachment, InboundMessage
from agent.messages import JSON, Message

UNTRUSTED = "(untrusted) "
QUOTE_CHARS = 500
#: A message sent this long before it reached nightowl is late: its row says when.
LATE_SECONDS = 120
#: Within one chat, late rows say when at most once per this much of sending time.
MARK_EVERY_SECONDS = 600
#: Chats whose last mark is remembered (the oldest forgotten first: a mark then repeats).
MARKED_CHATS = 1024


def one_line(text: str) -> str:
    """``text`` on one line: every kind of line break (``\\r``, U+2028...) a space."""
    return " ".join(text.splitlines())


def describe_text(message: InboundMessage, *, quoted_trusted: bool = False) -> str:
    """The row's text, before its sender is named (docs/design.md#groups): an edit, a
    reply's quote and a forward marked — words of others keep their author's mark.

    ``quoted_trusted``: the author of the message it replies to may instruct (the bot's
    own words always may). Names come from the platform, chosen by their owners: each is
    kept to one line, so none can start a line of its own."""
    text = message.text
    if message.forwarded_from is not None:
        # Someone else's words: a quoted block, its lines unable to pass for anyone's.
        origin = one_line(message.forwarded_from[:QUOTE_CHARS])
        body = "\n".join(f"> {line}" for line in text.splitlines() or [""])
        text = f"(forwarded from {UNTRUSTED}{origin})\n{body}"
    if message.is_edit:
        text = f"(edited) {text}"
    if message.reply_to is not None:
        reply = message.reply_to
        quoted = one_line(reply.text.strip())
        if len(quoted) > QUOTE_CHARS:
            quoted = quoted[:QUOTE_CHARS] + "…"
        who = "you" if reply.from_bot else one_line(reply.author or "someone")
        mark = "" if reply.from_bot or quoted_trusted else UNTRUSTED
        text = f'(replying to {mark}{who}: "{quoted}")\n{text}'
    return text


def named(message: InboundMessage, text: str, *, instructs: bool) -> str:
    """In a group, every line of ``text`` named by its sender — the message, the notes of
    its files and voice, whatever they hold — so that no line can pass for another
    person's; a private chat's text as it is."""
    if message.chat_type in PRIVATE_CHAT_TYPES:
        return text
    label = f"{'' if instructs else UNTRUSTED}{one_line(message.user_name or 'someone')}: "
    return "\n".join(label + line for line in text.splitlines() or [""])


class LateMarks:
    """When a late message was sent, said in its row as ``(sent 23:10 UTC)``
    (docs/design.md#late-messages): a night's lines read while nightowl was stopped are
    not all "now" to the model, nor in the export. Like a chat app's time separators, a
    chat's late rows carry a mark once per :data:`MARK_EVERY_SECONDS` of sending time,
    and the first row on time after them says the time too, so the model sees where the
    night ends. Each mark is part of the stored row, in the configured time zone.

    :meth:`mark` only reads; :meth:`stored` moves the chat on, once its row is stored:
    a redelivered duplicate, or a row the store refused, changes nothing. ``arrived`` is
    when the message reached nightowl (before any download or transcription of its own).
    """

    def __init__(self, zone: tzinfo, limit: int = MARKED_CHATS) -> None:
        self.zone = zone
        self.limit = limit
        self._last: OrderedDict[str, float] = OrderedDict()

    def mark(self, key: str, sent: datetime, arrived: datetime) -> str | None:
        """The mark for a message of session ``key`` sent at ``sent``, or None."""
        sent = _aware(sent)
        last = self._last.get(key)
        if _late(sent, arrived):
            if last is not None and abs(sent.timestamp() - last) < MARK_EVERY_SECONDS:
                return None
        elif last is None:
            return None  # on time, and nothing late before it
        return sent_mark(sent, arrived, self.zone)

    def stored(self, key: str, sent: datetime, arrived: datetime, *, marked: bool) -> None:
        """The row :meth:`mark` was asked for is stored, ``marked`` if it had a mark."""
        sent = _aware(sent)
        if not _late(sent, arrived):
            self._last.pop(key, None)  # on time again: the next late row is marked
        elif marked:
            self._last[key] = sent.timestamp()
            self._last.move_to_end(key)
            if len(self._last) > self.limit:
                self._last.popitem(last=False)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _late(sent: datetime, arrived: datetime) -> bool:
    return (arrived - sent).total_seconds() >= LATE_SECONDS


def sent_mark(sent: datetime, now: datetime, zone: tzinfo) -> str:
    """``(sent 23:10 UTC)``, with the date when it was not today there."""
    local = sent.astimezone(zone)
    when = f"{local:%H:%M}"
    if local.date() != now.astimezone(zone).date():
        when = f"{local:%b} {local.day}, {when}"
    return f"(sent {when} {local.tzname()})"


async def user_row(
    message: InboundMessage,
    *,
    instructs: bool,
    take_images: bool,
    vision: bool,
    max_image_bytes: int,
    media_notes: Sequence[str] | None = None,
    quoted_trusted: bool = False,
    sent: str | None = None,
) -> Message:
    """The user message the agent will see for ``message``.

    ``instructs``: the sender may start turns (else the row is marked untrusted);
    ``take_images``: the message starts a turn, so its images may be fetched and kept;
    ``media_notes``: what its other attachments say (docs/design.md#media), one note
    each; without them each is only named; ``sent``: a late message's mark
    (:class:`LateMarks`), a line of its own before the message's (in a group no
    sender's line can pass for it: each is named).
    """
    text = describe_text(message, quoted_trusted=quoted_trusted)
    images = [a for a in message.attachments if a.kind == "image"]
    if media_notes is None:
        media_notes = [_file_note(a) for a in message.attachments if a.kind != "image"]
    notes = list(media_notes)
    parts: list[JSON] = []
    if images and not take_images:
        # Not looked at: named only (the line's label says whose it is).
        notes.insert(0, "[photo]" if len(images) == 1 else f"[{len(images)} photos]")
    elif images and not vision:
        notes.insert(0, f"[{len(images)} image(s) attached; this model cannot see images]")
    elif images:
        parts, missing = await _image_parts(images, max_image_bytes)
        notes[:0] = missing
    text = "\n".join(part for part in [text, *notes] if part) if notes else text
    text = named(message, text, instructs=instructs)
    if sent is not None:
        text = f"{sent}\n{text}"
    if not parts:
        return {"role": "user", "content": text}
    return {"role": "user", "content": [{"type": "text", "text": text}, *parts]}


async def _image_parts(images: list[Attachment], budget: int) -> tuple[list[JSON], list[str]]:
    parts: list[JSON] = []
    notes: list[str] = []
    for image in images:
        if image.size is not None and image.size > budget:
            notes.append(f"[{_named(image)} is too large to keep here]")
            continue
        data = await image.read()
        if data is None:
            notes.append(f"[{_named(image)} could not be downloaded]")
            continue
        if len(data) > budget:
            notes.append(f"[{_named(image)} is too large to keep here]")
            continue
        budget -= len(data)
        encoded = base64.b64encode(data).decode("ascii")
        url = f"data:{image.mime_type};base64,{encoded}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts, notes


def _file_note(attachment: Attachment) -> str:
    return f"[attached: {attachment.name or 'a file'} ({attachment.mime_type}), not readable here]"


def _named(image: Attachment) -> str:
    return f"the image {image.name}" if image.name else "a photo"
