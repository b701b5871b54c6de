"""Discord messages and slash commands -> :class:`InboundMessage`.

Addressing (docs/design.md#groups): a message is addressed in DMs, on an @mention of the bot (its user
or its managed role; leading mentions are stripped from the text), on a reply to the
bot, in a free-response channel (and its threads), when its text starts with "/" (a
typed command such as ``/status``), and everywhere when ``require_mention`` is off.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import Any

import discord

from adapters.base import (
    Attachment,
    AttachmentKind,
    ChatType,
    DeliveryError,
    InboundMessage,
    QuotedMessage,
)
from adapters.discord_adapter.outbound import PLATFORM, discord_errors
from adapters.discord_adapter.settings import DiscordSettings

log = logging.getLogger(__name__)

#: Conversation, not notices (joins, pins, "thread created", boosts).
_CONVERSATION_TYPES = (discord.MessageType.default, discord.MessageType.reply)


def is_conversation(message: discord.Message, me: discord.ClientUser, *, allow_bots: bool) -> bool:
    """Whether ``message`` is someone else's conversation the gateway should see."""
    if message.author.id == me.id:
        return False
    if message.author.bot and not allow_bots:
        return False
    return message.type in _CONVERSATION_TYPES


async def inbound_from_message(
    message: discord.Message,
    me: discord.ClientUser,
    settings: DiscordSettings,
    *,
    edited: bool = False,
) -> InboundMessage:
    """Read ``message`` (``edited``: its new text after an edit); replied-to messages are
    fetched, attachments only described (the gateway fetches what it reads)."""
    quoted = await quoted_message(message, me)
    text, mentioned = text_and_mention(message, me)
    forwarded = forwarded_text(message)
    if forwarded is not None:
        text = "\n".join(part for part in (text, forwarded) if part)
    text = "\n".join(part for part in (text, placeholder(message)) if part)
    kind = chat_type(message.channel)
    addressed = (
        kind == "private"
        or mentioned
        or (quoted is not None and quoted.from_bot)
        or text.startswith("/")
        or not settings.require_mention
        or is_free_response(message.channel, settings)
    )
    return InboundMessage(
        platform=PLATFORM,
        chat_id=str(message.channel.id),
        user_id=str(message.author.id),
        user_name=message.author.display_name,
        text=text,
        chat_type=kind,
        addressed=addressed,
        attachments=attachments(message, max_bytes=settings.max_image_bytes),
        reply_to=quoted,
        forwarded_from="another chat" if forwarded is not None else None,
        platform_message_id=str(message.id),
        dedupe_key=_dedupe_key(message, edited),
        is_edit=edited,
        received_at=(message.edited_at or message.created_at) if edited else message.created_at,
        parent_chat_id=parent_id(message.channel),
        user_roles=role_ids(message.author),
        can_moderate=moderates(message.author, message.channel),
    )


def inbound_from_interaction(
    interaction: discord.Interaction, name: str, args: str | None, key: str
) -> InboundMessage:
    """A slash command as the text ``/<name> <args>``; ``key`` finds the interaction later."""
    user = interaction.user
    if interaction.guild_id is None:
        kind: ChatType = "private"
    else:
        kind = "thread" if isinstance(interaction.channel, discord.Thread) else "group"
    return InboundMessage(
        platform=PLATFORM,
        chat_id=str(interaction.channel_id),
        user_id=str(user.id),
        user_name=user.display_name,
        text=f"/{name} {args or ''}".strip(),
        chat_type=kind,
        addressed=True,
        platform_message_id=key,
        dedupe_key=f"discord:interaction:{interaction.id}",
        needs_answer=True,
        parent_chat_id=parent_id(interaction.channel),
        user_roles=role_ids(user),
        can_moderate=bool(interaction.permissions.manage_messages),
    )


def parent_id(channel: Any) -> str | None:
    """The channel a thread lives in, so channel allowlists cover its threads."""
    parent = getattr(channel, "parent_id", None) if isinstance(channel, discord.Thread) else None
    return str(parent) if parent else None


def role_ids(author: Any) -> tuple[str, ...]:
    """Role ids of a guild member (none in DMs), for ``allowed_roles``; never @everyone,
    which every member has (an allowlist naming it would let everyone in)."""
    return tuple(
        str(role.id) for role in getattr(author, "roles", ()) or () if not role.is_default()
    )


def moderates(author: Any, channel: Any) -> bool:
    """Whether a guild member may manage messages in ``channel`` (False in DMs)."""
    permissions_for = getattr(channel, "permissions_for", None)
    if permissions_for is None or not isinstance(author, discord.Member):
        return False
    return bool(permissions_for(author).manage_messages)


def chat_type(channel: Any) -> ChatType:
    if isinstance(channel, discord.Thread):
        return "thread"
    if isinstance(channel, discord.DMChannel | discord.GroupChannel):
        return "private"
    return "private" if getattr(channel, "guild", None) is None else "group"


def text_and_mention(message: discord.Message, me: discord.ClientUser) -> tuple[str, bool]:
    """The text without leading bot mentions, other mentions made readable; and whether
    the bot was mentioned at all."""
    own = [f"<@{me.id}>", f"<@!{me.id}>"]
    self_role = message.guild.self_role if message.guild else None
    if self_role is not None:
        own.append(f"<@&{self_role.id}>")
    mentioned = any(token in message.content for token in own)
    leading = "|".join(map(re.escape, own))
    text = re.sub(rf"^\s*(?:(?:{leading})[\s,:]*)+", "", message.content)
    for token in own:
        text = text.replace(token, f"@{me.display_name}")
    for user in message.mentions:
        text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
    for role in message.role_mentions:
        text = text.replace(f"<@&{role.id}>", f"@{role.name}")
    for channel in message.channel_mentions:
        text = text.replace(f"<#{channel.id}>", f"#{channel.name}")
    return text.strip(), mentioned


def is_free_response(channel: Any, settings: DiscordSettings) -> bool:
    free = {str(c) for c in settings.free_response_channels}
    return str(channel.id) in free or str(getattr(channel, "parent_id", None)) in free


async def quoted_message(message: discord.Message, me: discord.ClientUser) -> QuotedMessage | None:
    """The message ``message`` replies to, if it still exists."""
    reference = message.reference
    if reference is None or reference.message_id is None:
        return None
    if isinstance(reference.resolved, discord.DeletedReferencedMessage):
        return None
    target = reference.resolved or reference.cached_message
    if target is None:
        try:
            with discord_errors(str(message.channel.id)):
                target = await message.channel.fetch_message(reference.message_id)
        except DeliveryError as error:
            log.debug("Replied-to Discord message unavailable: %s", error)
            return None
    return QuotedMessage(
        text=target.content,
        author=target.author.display_name,
        from_bot=target.author.id == me.id,
        author_id=str(target.author.id),
    )


def attachments(message: discord.Message, *, max_bytes: int) -> tuple[Attachment, ...]:
    """Images up to ``max_bytes``, voice messages, audio and documents, each fetched only
    if the gateway asks; a larger image is only named."""
    found = []
    for item in message.attachments:
        mime = (item.content_type or "application/octet-stream").split(";")[0]
        kind: AttachmentKind = "document"
        if mime.startswith("image/"):
            kind = "image" if item.size <= max_bytes else "file"
        elif item.is_voice_message():
            kind = "voice"
        elif mime.startswith("audio/"):
            kind = "audio"
        fetch = partial(_download, item) if kind != "file" else None
        duration = item.duration if kind in ("voice", "audio") else None
        found.append(
            Attachment(
                kind, mime, name=item.filename, size=item.size, fetch=fetch, duration=duration
            )
        )
    return tuple(found)


def placeholder(message: discord.Message) -> str:
    """Stickers and polls as short text."""
    parts = [f"[sticker {sticker.name}]" for sticker in message.stickers]
    poll = message.poll
    if poll is not None:
        options = " / ".join(answer.text for answer in poll.answers)
        parts.append(f"[poll: {poll.question} — options: {options}]")
    return "\n".join(parts)


def forwarded_text(message: discord.Message) -> str | None:
    """The text of a forwarded message (Discord shows it as a snapshot), or None."""
    snapshots = getattr(message, "message_snapshots", None) or []
    if not snapshots:
        return None
    return "\n".join(snapshot.content for snapshot in snapshots if snapshot.content)


def _dedupe_key(message: discord.Message, edited: bool) -> str:
    if not edited:
        return f"discord:{message.id}"
    stamp = message.edited_at.timestamp() if message.edited_at else 0
    return f"discord:edit:{message.id}:{stamp}"


async def _download(item: discord.Attachment) -> bytes | None:
    try:
        with discord_errors("-"):
            return await item.read()
    except DeliveryError as error:
        log.warning("Could not download a Discord attachment: %s", error)
        return None
