"""Catching up on what Discord never delivered: channel history read after every connect.

discord.py replays missed events only when a gateway session resumes. After an
invalidated session (op 9), a long outage or a restart, messages sent meanwhile never
arrive as events. So on every READY and RESUMED the adapter asks its
:class:`CatchUpSource` (the gateway, which reads its store) for the chats with activity
since ``catch_up_hours`` ago and the newest message id durably stored in each, then reads
each allowed chat's history after that id (never older than ``catch_up_hours``), oldest
first, at most ``catch_up_limit`` messages per chat, and hands them over exactly like
live messages. The gateway drops what it already stored (same ``dedupe_key``).

Sharded (docs/design.md#replicas), each shard's sessions start, resume and become ready
on their own: a shard's catch-up reads only the chats that shard carries — a guild's
channels and threads on shard ``(guild_id >> 22) % shard_count``, DMs on shard 0 — and
the cursors of chats carried elsewhere (another replica's, in a shared store) are
skipped; a channel the guild cache does not hold is looked up once over REST.

Live messages arriving while a catch-up runs wait for it, so a chat's messages still
reach the gateway in the order they were written.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import discord

from adapters.base import ChatType
from adapters.discord_adapter.inbound import chat_type, parent_id
from adapters.discord_adapter.outbound import DiscordCallFailed, discord_errors
from adapters.discord_adapter.recent import RecentKeys
from adapters.discord_adapter.settings import DiscordSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CatchUpChat:
    """A chat the adapter could catch up on, described for the gateway's allowlists."""

    chat_id: str
    chat_type: ChatType
    #: The channel a thread belongs to.
    parent_chat_id: str | None = None
    #: The other person of a DM.
    user_id: str | None = None


class CatchUpSource(Protocol):
    """What the gateway tells the adapter about the chats it has stored."""

    async def cursors(self, since: datetime) -> Sequence[tuple[int, int]]:
        """``(channel id, newest stored message id)`` of every chat with a message stored
        since ``since``. Only what is durably stored counts."""
        ...

    def allows(self, chat: CatchUpChat) -> bool:
        """Whether the gateway takes messages from ``chat`` at all (its allowlists)."""
        ...


class Taken(enum.Enum):
    """What became of one message read from history."""

    PASSED = "passed"  # handed to the gateway
    SKIPPED = "skipped"  # not conversation, or handed over already
    FAILED = "failed"  # the gateway did not take it: this chat's catch-up stops


#: Hands one message read from history over like a live one.
TakeMissed = Callable[[discord.Message], Awaitable[Taken]]

#: A shard of this process, or None for the one connection of an unsharded client.
Shard = int | None


class CatchUp:
    """One catch-up per (re)connect, and the gate that holds live messages meanwhile."""

    def __init__(
        self,
        settings: DiscordSettings,
        take: TakeMissed,
        receiving: Callable[[], bool],
    ) -> None:
        self.settings = settings
        self.source: CatchUpSource | None = None
        self._take = take
        self._receiving = receiving
        self._guilds_ready: dict[Shard, asyncio.Event] = {}
        self._gate: asyncio.Future[None] | None = None
        self._run: asyncio.Task[None] | None = None
        #: Shards (re)connected since their chats were last read.
        self._due: set[Shard] = set()
        #: Channels carried by shards this process does not run.
        self._elsewhere = RecentKeys(4096)

    @property
    def gate(self) -> asyncio.Future[None] | None:
        """What a live message arriving now waits for before it is handed over."""
        return self._gate if self._gate is not None and not self._gate.done() else None

    @property
    def running(self) -> asyncio.Task[None] | None:
        return self._run if self._run is not None and not self._run.done() else None

    def session_started(
        self,
        client: discord.Client,
        in_flight: Iterable[asyncio.Future[None]],
        shard: Shard,
        *,
        resumed: bool,
    ) -> None:
        """A shard's connect (READY) or resume (RESUMED). Must run before the session's
        first message is handled: from here on live messages wait for the catch-up."""
        if not resumed:
            self._ready_event(shard).clear()  # its guild cache is rebuilt until ready
        if self.source is None or self.settings.catch_up_hours <= 0:
            return
        self._due.add(shard)
        if self.running is not None:
            return  # it reads again for this shard once done, the gate still up
        self._gate = asyncio.get_running_loop().create_future()
        self._run = asyncio.create_task(self._catch_up(client, list(in_flight), self._gate))

    def session_ready(self, shard: Shard) -> None:
        """The shard's guilds are in the cache (on_ready, or on_shard_ready)."""
        self._ready_event(shard).set()

    def _ready_event(self, shard: Shard) -> asyncio.Event:
        return self._guilds_ready.setdefault(shard, asyncio.Event())

    async def stop(self) -> None:
        """Abandon a catch-up still running (the gateway takes nothing any more)."""
        run, gate = self._run, self._gate
        if run is not None and not run.done():
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
        if gate is not None and not gate.done():
            gate.set_result(None)

    async def _catch_up(
        self,
        client: discord.Client,
        in_flight: list[asyncio.Future[None]],
        gate: asyncio.Future[None],
    ) -> None:
        try:
            # Messages handed over before the disconnect go first: they are older.
            if in_flight:
                await asyncio.wait(in_flight, timeout=self.settings.drain_timeout)
            while self._due and self._receiving():
                shards, self._due = self._due, set()
                await self._wait_for_guilds(shards)
                await self._read_all_chats(client, shards)
        finally:
            if not gate.done():
                gate.set_result(None)

    async def _wait_for_guilds(self, shards: set[Shard]) -> None:
        ready = [self._ready_event(shard).wait() for shard in shards]
        try:
            await asyncio.wait_for(asyncio.gather(*ready), self.settings.ready_timeout)
        except TimeoutError:
            log.warning("Discord sent no READY; catching up without the guild cache")

    async def _read_all_chats(self, client: discord.Client, shards: set[Shard]) -> None:
        assert self.source is not None
        since = datetime.now(UTC) - timedelta(hours=self.settings.catch_up_hours)
        try:
            cursors = await self.source.cursors(since)
        except Exception as error:  # the store failing must not stop live messages
            log.warning("Could not read the Discord catch-up cursors: %r", error)
            return
        oldest = discord.utils.time_snowflake(since)
        for channel_id, newest_stored in cursors:
            if not self._receiving():
                return
            if channel_id not in self._elsewhere:
                await self._read_chat(client, channel_id, max(newest_stored, oldest), shards)

    async def _read_chat(
        self, client: discord.Client, channel_id: int, after: int, shards: set[Shard]
    ) -> None:
        assert self.source is not None
        limit, read, passed = self.settings.catch_up_limit, 0, 0
        try:
            with discord_errors(str(channel_id)):
                channel = await resolve_channel(client, channel_id)
                if not self._carried_by(channel, shards):
                    return
                if not self.source.allows(describe(channel)):
                    log.debug("Not catching up on Discord channel %s: not allowed", channel_id)
                    return
                async for message in missed_messages(channel, after, limit):
                    read += 1
                    taken = await self._take(message) if self._receiving() else Taken.FAILED
                    if taken is Taken.FAILED:
                        return  # the rest waits for the next catch-up: its cursor is unchanged
                    passed += taken is Taken.PASSED
        except DiscordCallFailed as error:
            log.warning("Could not catch up on Discord channel %s: %s", channel_id, error.reason)
            return
        if passed:
            log.info("Caught up on %d missed messages in Discord channel %s", passed, channel_id)
        if read >= limit:
            log.warning(
                "Discord channel %s: read the limit of %d messages sent while disconnected; "
                "later ones were not read (catch_up_limit)",
                channel_id,
                limit,
            )

    def _carried_by(self, channel: Any, shards: set[Shard]) -> bool:
        """Whether ``channel``'s events come on one of ``shards``; a channel no shard of
        this process carries is remembered, and never looked up again."""
        count, runs = self.settings.shard_count, self.settings.shards
        if count is None or runs is None:  # unsharded: every chat
            return True
        shard = shard_of(channel, count)
        if shard not in runs:
            self._elsewhere.add(channel.id)
            log.debug("Discord channel %s is on shard %d: another process's", channel.id, shard)
        return shard in shards


def shard_of(channel: Any, shard_count: int) -> int:
    """The shard that carries ``channel``'s events: its guild's, or 0 for a DM (Discord's
    rule: ``(guild_id >> 22) % shard_count``)."""
    guild_id = getattr(channel, "guild_id", None)
    if guild_id is None and getattr(channel, "guild", None) is not None:
        guild_id = channel.guild.id
    return 0 if guild_id is None else (guild_id >> 22) % shard_count


async def resolve_channel(client: discord.Client, channel_id: int) -> Any:
    """The cached channel (or thread), else Discord's; a DM needs its recipient."""
    channel = client.get_channel(channel_id)
    if isinstance(channel, discord.DMChannel) and channel.recipient is None:
        channel = None
    if channel is None:
        channel = await client.fetch_channel(channel_id)
    if not isinstance(channel, discord.abc.Messageable):
        raise discord.InvalidData(f"channel {channel_id} holds no messages")
    return channel


def describe(channel: Any) -> CatchUpChat:
    recipient = getattr(channel, "recipient", None) if chat_type(channel) == "private" else None
    return CatchUpChat(
        chat_id=str(channel.id),
        chat_type=chat_type(channel),
        parent_chat_id=parent_id(channel),
        user_id=str(recipient.id) if recipient is not None else None,
    )


def missed_messages(channel: Any, after: int, limit: int) -> AsyncIterator[discord.Message]:
    """Up to ``limit`` messages written after message id ``after``, oldest first (paged
    by discord.py, 100 a request)."""
    history: AsyncIterator[discord.Message] = channel.history(
        after=discord.Object(id=after), limit=limit, oldest_first=True
    )
    return history
