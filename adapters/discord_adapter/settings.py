"""Settings of the Discord adapter, built once by the gateway's config loader."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Discord's rule for chat-input command names (lowercase where a case exists).
_COMMAND_NAME = re.compile(r"^[-_\w]{1,32}$")


@dataclass(frozen=True)
class DiscordSettings:
    """Everything the Discord adapter needs. Only ``token`` is required."""

    token: str = field(repr=False)
    #: In guild channels, answer only when addressed (mention, reply, command).
    require_mention: bool = True
    #: Channel ids (int or str) where every message counts as addressed; threads inherit.
    free_response_channels: tuple[int | str, ...] = ()
    #: Pass messages written by other bots (own messages are always ignored).
    allow_bots: bool = False
    #: (name, description) of each application command; each takes an optional ``args``.
    #: The gateway gives its commands' menu (docs/design.md#commands).
    slash_commands: tuple[tuple[str, str], ...] = ()
    #: Register ``slash_commands`` with Discord at start (a bulk overwrite).
    sync_commands: bool = True
    #: Also register them in these guilds (instant there; global ones can take a while).
    command_guild_ids: tuple[int, ...] = ()
    #: Images up to this size are downloaded and passed to the gateway.
    max_image_bytes: int = 5 * 1024 * 1024
    #: Show replies while they are written: one message edited in place.
    stream: bool = False
    #: Seconds between two edits of a streamed reply (Discord allows ~5 per 5 s).
    stream_edit_interval: float = 1.0
    #: Longer replies are sent as their first part plus the full text as a .md file.
    max_chunks: int = 4
    #: Seconds between typing refreshes (Discord shows typing for about 10 s).
    typing_interval: float = 8.0
    #: discord.py waits this long after the last GUILD_CREATE before READY.
    guild_ready_timeout: float = 2.0
    #: discord.py waits this long before identifying again after a lost session, and
    #: between the shards it starts (Discord allows one IDENTIFY per 5 s); tests shorten it.
    reidentify_delay: float = 5.0
    #: start() gives up when READY has not arrived after this many seconds (plus
    #: ``reidentify_delay`` for each shard after the first).
    ready_timeout: float = 60.0
    #: stop() waits this long for messages already being handed to the gateway.
    drain_timeout: float = 10.0
    #: After every (re)connect, read what was missed in chats with activity this recent
    #: (and no older than this); 0 turns catching up off. See ``catch_up.py``.
    catch_up_hours: float = 24.0
    #: At most this many missed messages are read per chat and reconnect.
    catch_up_limit: int = 200
    #: The bot's shards across every process that runs it (docs/design.md#replicas);
    #: None: one unsharded connection. With a count, one connection per shard of
    #: ``shard_ids`` (discord.py's AutoShardedClient); empty ``shard_ids``: every shard.
    shard_count: int | None = None
    shard_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.catch_up_hours < 0 or self.catch_up_limit < 1:
            raise ValueError("catch_up_hours must be >= 0 and catch_up_limit >= 1")
        count, ids = self.shard_count, self.shard_ids
        if count is None and ids:
            raise ValueError("shard_ids need a shard_count")
        if count is not None:
            if count < 1 or not all(0 <= shard < count for shard in ids):
                raise ValueError(f"shard_ids must be in 0..shard_count-1 (shard_count {count})")
            if len(set(ids)) < len(ids):
                raise ValueError("each shard id may be listed once")
        for name, description in self.slash_commands:
            if not _COMMAND_NAME.match(name) or name != name.lower():
                raise ValueError(f"invalid Discord slash command name {name!r}")
            if not 1 <= len(description) <= 100:
                raise ValueError(f"slash command {name!r} needs a description of 1-100 chars")

    @property
    def shards(self) -> tuple[int, ...] | None:
        """The shards this process connects; None when unsharded."""
        if self.shard_count is None:
            return None
        return self.shard_ids or tuple(range(self.shard_count))

    def runs_shard(self, shard: int) -> bool:
        """Whether this process receives shard ``shard``'s events (unsharded: all)."""
        return self.shards is None or shard in self.shards
