"""The fixed world of the fake Discord and the payloads discord.py parses.

One guild ("Night Shift") with two text channels (``CHANNEL_ID``, ``FREE_CHANNEL_ID``) and a
thread under the first (``THREAD_ID``); the bot (with its managed role), one human
(:data:`ALICE`), one other bot (:data:`OTHER_BOT`) and Alice's DM channel with the bot.
A second guild ("Day Shift", one channel ``SECOND_CHANNEL_ID``) exists for sharding tests:
with two shards, Night Shift is on shard 0 and Day Shift on shard 1 (Discord's rule,
``(guild_id >> 22) % shard_count``); the fake sends it only when asked to.
Payloads leave optional keys out rather than sending null (discord.py trips on some).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

BOT_ID = 1_000_000_000_000_001
#: How a message mentions the bot.
MENTION = f"<@{BOT_ID}>"
APPLICATION_ID = BOT_ID
GUILD_ID = 2_000_000_000_000_001
CHANNEL_ID = 3_000_000_000_000_001
FREE_CHANNEL_ID = 3_000_000_000_000_002
THREAD_ID = 4_000_000_000_000_001
DM_CHANNEL_ID = 5_000_000_000_000_001
BOT_ROLE_ID = 8_000_000_000_000_001
SECOND_GUILD_ID = GUILD_ID + (1 << 22)
SECOND_CHANNEL_ID = 3_000_000_000_000_003
SECOND_BOT_ROLE_ID = 8_000_000_000_000_002
#: Both guilds: with two shards, Night Shift on shard 0 and Day Shift on shard 1.
BOTH_GUILDS = (GUILD_ID, SECOND_GUILD_ID)
#: The guild of each guild channel (a DM has none).
GUILD_OF = {
    CHANNEL_ID: GUILD_ID,
    FREE_CHANNEL_ID: GUILD_ID,
    THREAD_ID: GUILD_ID,
    SECOND_CHANNEL_ID: SECOND_GUILD_ID,
}
CHANNEL_IDS = frozenset({*GUILD_OF, DM_CHANNEL_ID})

BOT_USER: dict[str, Any] = {
    "id": str(BOT_ID),
    "username": "nightowl",
    "discriminator": "0",
    "avatar": None,
    "bot": True,
}
ALICE: dict[str, Any] = {
    "id": "6000000000000001",
    "username": "alice",
    "global_name": "Alice",
    "discriminator": "0",
    "avatar": None,
}
OTHER_BOT: dict[str, Any] = {
    "id": "7000000000000001",
    "username": "otherbot",
    "discriminator": "0",
    "avatar": None,
    "bot": True,
}
USERS = {int(u["id"]): u for u in (BOT_USER, ALICE, OTHER_BOT)}

_DISCORD_EPOCH_MS = 1_420_070_400_000
_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")


def now() -> str:
    return datetime.now(UTC).isoformat()


def snowflake(counter: int) -> int:
    """A fresh id; Discord ids carry their creation time (discord.py reads it, e.g. to
    decide whether an interaction expired)."""
    millis = int(datetime.now(UTC).timestamp() * 1000) - _DISCORD_EPOCH_MS
    return (millis << 22) | (counter % (1 << 22))


def member(user: dict[str, Any], roles: list[str] | None = None) -> dict[str, Any]:
    return {"user": user, "roles": roles or [], "joined_at": now(), "deaf": False,
            "mute": False, "flags": 0}  # fmt: skip


def application() -> dict[str, Any]:
    return {"id": str(APPLICATION_ID), "name": "nightowl", "description": "", "icon": None,
            "bot_public": False, "bot_require_code_grant": False, "owner": ALICE,
            "verify_key": "0" * 64, "flags": 0}  # fmt: skip


def channel(channel_id: int) -> dict[str, Any]:
    """The channel payload for one of the world's channel ids."""
    if channel_id == DM_CHANNEL_ID:
        return {"id": str(DM_CHANNEL_ID), "type": 1, "recipients": [ALICE]}
    if channel_id == THREAD_ID:
        return {
            "id": str(THREAD_ID), "type": 11, "guild_id": str(GUILD_ID),
            "parent_id": str(CHANNEL_ID), "owner_id": ALICE["id"], "name": "a thread",
            "message_count": 0, "member_count": 1,
            "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                                "archive_timestamp": now(), "locked": False},
        }  # fmt: skip
    name = {CHANNEL_ID: "general", FREE_CHANNEL_ID: "free-chat"}.get(channel_id, "day-chat")
    return {"id": str(channel_id), "type": 0, "guild_id": str(GUILD_OF[channel_id]),
            "name": name, "position": 0, "permission_overwrites": [], "nsfw": False}  # fmt: skip


def guild(guild_id: int = GUILD_ID) -> dict[str, Any]:
    """GUILD_CREATE: the guild with its roles, channels, thread and the bot as member."""
    role = {"color": 0, "hoist": False, "mentionable": False, "flags": 0, "position": 0}
    second = guild_id == SECOND_GUILD_ID
    bot_role = SECOND_BOT_ROLE_ID if second else BOT_ROLE_ID
    channels = [c for c, g in GUILD_OF.items() if g == guild_id and c != THREAD_ID]
    return {
        "id": str(guild_id), "name": "Day Shift" if second else "Night Shift",
        "owner_id": ALICE["id"],
        "member_count": 3, "large": False, "features": [], "emojis": [], "stickers": [],
        "roles": [
            {**role, "id": str(guild_id), "name": "@everyone", "permissions": "68608",
             "managed": False},
            {**role, "id": str(bot_role), "name": "nightowl", "permissions": "0",
             "managed": True, "position": 1, "tags": {"bot_id": str(BOT_ID)}},
        ],
        "channels": [channel(c) for c in channels],
        "threads": [] if second else [channel(THREAD_ID)],
        "members": [member(BOT_USER, [str(bot_role)])],
        "voice_states": [], "presences": [],
    }  # fmt: skip


def message(
    message_id: int,
    channel_id: int,
    content: str,
    *,
    author: dict[str, Any],
    mentions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A message payload; mentions are read from ``content`` as Discord does, unless given."""
    if mentions is None:
        ids = {int(m) for m in _MENTION.findall(content)}
        mentions = [USERS[i] for i in ids if i in USERS]
    data: dict[str, Any] = {
        "id": str(message_id), "channel_id": str(channel_id), "type": 0,
        "content": content, "author": author, "timestamp": now(), "tts": False,
        "mention_everyone": "@everyone" in content or "@here" in content,
        "mentions": mentions, "mention_roles": _ROLE_MENTION.findall(content),
        "attachments": [], "embeds": [], "pinned": False, "flags": 0,
    }  # fmt: skip
    if channel_id != DM_CHANNEL_ID:
        data["guild_id"] = str(GUILD_OF[channel_id])
        data["member"] = {k: v for k, v in member(author).items() if k != "user"}
    return data


def interaction(
    interaction_id: int,
    command_id: int,
    name: str,
    args: str | None,
    channel_id: int,
    user: dict[str, Any],
) -> dict[str, Any]:
    """INTERACTION_CREATE for the slash command ``/name`` with its optional ``args``."""
    options = [] if args is None else [{"name": "args", "type": 3, "value": args}]
    data: dict[str, Any] = {
        "id": str(interaction_id), "application_id": str(APPLICATION_ID), "type": 2,
        "token": f"interaction-token-{interaction_id}", "version": 1,
        "attachment_size_limit": 8_388_608, "locale": "en-US", "app_permissions": "0",
        "entitlements": [], "channel": channel(channel_id), "channel_id": str(channel_id),
        "data": {"id": str(command_id), "name": name, "type": 1, "options": options},
    }  # fmt: skip
    if channel_id == DM_CHANNEL_ID:
        data.update(user=user, context=1)
    else:
        guild_id = str(GUILD_OF[channel_id])
        data.update(guild_id=guild_id, member={**member(user), "permissions": "0"}, context=0)
    return data
