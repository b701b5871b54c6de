"""discord.py's client with its events forwarded to the adapter: one gateway connection,
or one per shard this process runs (docs/design.md#replicas)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import discord
from discord import app_commands

from adapters.discord_adapter.catch_up import CatchUp
from adapters.discord_adapter.outbound import NO_PINGS
from adapters.discord_adapter.settings import DiscordSettings

log = logging.getLogger(__name__)


class Owner(Protocol):
    """What a client forwards its events to: the DiscordAdapter (which imports this)."""

    settings: DiscordSettings
    _stopping: bool
    _ready: asyncio.Event
    _catch_up: CatchUp

    def _session_started(self, shard: int | None, *, resumed: bool) -> None: ...

    def _connection_lost(self) -> None: ...

    async def _on_message(self, message: discord.Message, *, edited: bool = False) -> None: ...


class Client(discord.Client):
    """discord.py's client with its events forwarded to the adapter: one connection."""

    def __init__(self, adapter: Owner, **sharding: Any) -> None:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: enable it in the Developer Portal
        super().__init__(
            intents=intents,
            allowed_mentions=NO_PINGS,
            guild_ready_timeout=adapter.settings.guild_ready_timeout,
            **sharding,
        )
        self.adapter = adapter
        self.tree = app_commands.CommandTree(self)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        if not initial:
            await asyncio.sleep(self.adapter.settings.reidentify_delay)

    async def on_connect(self) -> None:
        # A fresh session (READY): what was sent meanwhile is never replayed.
        self.adapter._session_started(None, resumed=False)

    async def on_ready(self) -> None:
        log.info("Discord connected as %s (%s guilds)", self.user, len(self.guilds))
        self.adapter._catch_up.session_ready(None)
        self.adapter._ready.set()

    async def on_message(self, message: discord.Message) -> None:
        await self.adapter._on_message(message)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        await self.adapter._on_message(payload.message, edited=True)

    async def on_disconnect(self) -> None:
        if not self.adapter._stopping:
            if self.adapter._ready.is_set():  # before READY the start says what went wrong
                log.info("Discord gateway disconnected; discord.py reconnects and resumes")
            self.adapter._connection_lost()

    async def on_resumed(self) -> None:
        log.info("Discord gateway session resumed")
        # Discord replayed what it kept; a long gap may have lost more.
        self.adapter._session_started(None, resumed=True)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("Error while handling Discord event %s", event_method)


class ShardedClient(Client, discord.AutoShardedClient):
    """The same with one connection per shard this process runs: sessions start, resume
    and become ready shard by shard (docs/design.md#replicas)."""

    async def on_connect(self) -> None:
        pass  # per shard: on_shard_connect

    async def on_shard_connect(self, shard_id: int) -> None:
        self.adapter._session_started(shard_id, resumed=False)

    async def on_shard_ready(self, shard_id: int) -> None:
        log.info("Discord shard %s of %s ready", shard_id, self.shard_count)
        self.adapter._catch_up.session_ready(shard_id)

    async def on_ready(self) -> None:  # every shard of this process is ready (again)
        log.info("Discord connected as %s (%s guilds)", self.user, len(self.guilds))
        self.adapter._ready.set()

    async def on_resumed(self) -> None:
        pass  # per shard: on_shard_resumed

    async def on_shard_resumed(self, shard_id: int) -> None:
        log.info("Discord shard %s resumed its session", shard_id)
        self.adapter._session_started(shard_id, resumed=True)


def new_client(adapter: Owner) -> Client:
    """The client for ``adapter``: sharded when its settings name a shard count."""
    settings = adapter.settings
    if settings.shards is None:
        return Client(adapter)
    return ShardedClient(adapter, shard_count=settings.shard_count, shard_ids=list(settings.shards))
