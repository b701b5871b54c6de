"""The Discord adapter: lifecycle, event wiring, ordering, dedupe, catch-up, slash commands,
send."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from typing import Any

import discord

from adapters.base import (
    Adapter,
    CatchUpSource,
    DeliveryError,
    InboundMessage,
    InboundSink,
    OutboundMessage,
    PlatformTraits,
    ReplyStream,
)
from adapters.discord_adapter import outbound
from adapters.discord_adapter.catch_up import CatchUp, Taken
from adapters.discord_adapter.client import Client, new_client
from adapters.discord_adapter.inbound import (
    inbound_from_interaction,
    inbound_from_message,
    is_conversation,
)
from adapters.discord_adapter.outbound import PLATFORM, discord_errors
from adapters.discord_adapter.recent import RecentKeys
from adapters.discord_adapter.settings import DiscordSettings
from adapters.discord_adapter.slash import add_slash_commands, sync_commands
from adapters.discord_adapter.status import AdapterStatus, client_status
from adapters.discord_adapter.stream import DiscordReplyStream

log = logging.getLogger(__name__)

#: ``platform_message_id`` of a slash command; ``send`` answers through the interaction.
INTERACTION_PREFIX = "interaction:"
_MAX_LIVE_INTERACTIONS = 256


class DiscordAdapter(Adapter):
    """Discord DMs, guild channels, threads and slash commands through discord.py.

    See the package docstring for how messages map to :class:`InboundMessage`.
    """

    platform = PLATFORM
    #: docs/design.md#platform-traits: moderators (Manage Messages), a DM's session is
    #: its user's, and history missed while disconnected can be read back.
    traits = PlatformTraits(moderated_groups=True, private_session_by_user=True, catches_up=True)

    def __init__(self, settings: DiscordSettings) -> None:
        self.settings = settings
        self._client: Client | None = None
        self._sink: InboundSink | None = None
        self._connection: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._stopping = False
        self._receiving = False
        self._seen = RecentKeys(4096)
        # Messages the gateway took: a live copy of a message caught up on is not passed.
        self._delivered = RecentKeys(4096)
        self._catch_up = CatchUp(settings, self._take_missed, lambda: self._receiving)
        self._interactions: OrderedDict[str, discord.Interaction] = OrderedDict()
        self._chat_tails: dict[str, asyncio.Future[None]] = {}
        self._in_flight: set[asyncio.Task[Any]] = set()
        #: Since when the gateway connection is down (discord.py closes one whose
        #: heartbeats go unacknowledged, then reconnects); how often it came back.
        self._lost_since: float | None = None
        self._reconnects = 0

    def catch_up_from(self, source: CatchUpSource) -> None:
        """Read what was missed after every (re)connect, from ``source``'s cursors (see
        :mod:`adapters.discord_adapter.catch_up`). Without a source nothing is read."""
        self._catch_up.source = source

    # ---- lifecycle ---------------------------------------------------------------------

    async def start(self, sink: InboundSink) -> None:
        """Log in, register slash commands, connect; returns once Discord sent READY.

        Raises :class:`DiscordStartError` (its cause discord.py's or aiohttp's error) for
        a bad token, the Message Content intent off, no network, or no READY in time.
        """
        if self._client is not None:
            raise RuntimeError("the Discord adapter is already running")
        self._sink, self._stopping, self._receiving = sink, False, True
        self._ready = asyncio.Event()
        client = self._client = new_client(self)
        try:
            await client.login(self.settings.token)
            add_slash_commands(client.tree, self.settings, self._on_slash_command)
            if self.settings.sync_commands and self.settings.runs_shard(0):
                # One bulk overwrite per bot is enough: the process running shard 0 does it.
                await sync_commands(client.tree, self.settings)
            self._connection = asyncio.create_task(client.connect(reconnect=True))
            self._connection.add_done_callback(self._log_connection_end)
            await self._wait_until_ready(self._connection)
        except outbound.START_ERRORS as error:
            await self._close_client()
            raise outbound.start_failure(error) from error
        except BaseException:
            await self._close_client()
            raise

    async def _wait_until_ready(self, connection: asyncio.Task[None]) -> None:
        ready = asyncio.create_task(self._ready.wait())
        settings = self.settings
        # Shards identify one after another, reidentify_delay apart (Discord's limit).
        later_shards = len(settings.shards) - 1 if settings.shards else 0
        timeout = settings.ready_timeout + settings.reidentify_delay * later_shards
        done, _ = await asyncio.wait(
            {ready, connection}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if ready in done:
            return
        ready.cancel()
        if connection not in done:
            raise outbound.DiscordStartError(
                f"Discord adapter could not start: no READY within {timeout:g} s",
                platform=outbound.PLATFORM,
            )
        error = connection.exception()
        raise error or ConnectionError("Discord closed the connection before READY")

    def _log_connection_end(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None or self._stopping:
            return
        if not self._ready.is_set():
            return  # start() raises it to its caller
        error = task.exception()
        if isinstance(error, discord.PrivilegedIntentsRequired):
            log.error(
                "Discord refused the connection: enable the Message Content intent for this "
                "bot (Developer Portal -> Bot -> Privileged Gateway Intents)"
            )
        else:
            log.error("Discord connection ended: %s", type(error).__name__, exc_info=error)

    async def stop_receiving(self) -> None:
        """Pass no new messages on but keep sending, once in-flight ones are handed over.

        Discord does not redeliver: what arrives from now on is dropped (and logged).
        """
        self._receiving = False
        busy = set(self._in_flight)
        if self._catch_up.running is not None:
            busy.add(self._catch_up.running)  # it stops after the message it is handing over
        if busy:
            await asyncio.wait(busy, timeout=self.settings.drain_timeout)

    async def stop(self) -> None:
        """Finish handing in-flight messages to the gateway (bounded), then disconnect."""
        if self._client is None:
            return
        await self.stop_receiving()
        self._stopping = True
        await self._close_client()

    async def _close_client(self) -> None:
        client, connection = self._client, self._connection
        self._client = self._connection = None
        self._stopping = True
        await self._catch_up.stop()
        if client is not None:
            await client.close()
        if connection is not None and not connection.done():
            try:
                await connection
            except Exception as error:  # closing anyway; a late failure must not break stop()
                log.debug("Discord connection ended while closing: %r", error)

    # ---- inbound -----------------------------------------------------------------------

    async def _on_message(self, message: discord.Message, *, edited: bool = False) -> None:
        # Runs as its own task; everything before the first await runs in arrival order.
        client = self._client
        if client is None or client.user is None:
            return
        if not self._receiving:
            log.info("Discord message %s arrived while stopping; not passed on", message.id)
            return
        if not is_conversation(message, client.user, allow_bots=self.settings.allow_bots):
            return
        if edited and message.edited_at is None:
            return  # Discord added an embed (a link preview): nobody edited anything
        key = ("edit", message.id, message.edited_at) if edited else ("message", message.id)
        if not self._seen.add(key):
            log.debug("Discord message %s delivered twice; passing it once", message.id)
            return
        inbound = inbound_from_message(message, client.user, self.settings, edited=edited)
        await self._deliver_in_order(str(message.channel.id), inbound, key)

    async def _deliver_in_order(
        self, chat_id: str, inbound: Awaitable[InboundMessage], key: object = None
    ) -> None:
        """Build the message (maybe downloading), then hand it over after its predecessor
        and after a catch-up running when it arrived (which read the older messages)."""
        gate = self._catch_up.gate
        previous = self._chat_tails.get(chat_id)
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._chat_tails[chat_id] = finished
        task = asyncio.current_task()
        if task is not None:
            self._in_flight.add(task)
        try:
            message = await inbound
            if previous is not None:
                await previous
            if gate is not None:
                await gate
            if key is not None and key in self._delivered:
                return  # the catch-up passed it on already
            assert self._sink is not None
            await self._sink(message)
            if key is not None:
                self._delivered.add(key)
        except Exception:  # one bad message must not stop the adapter or its chat
            log.exception("Could not pass a Discord message from channel %s on", chat_id)
        finally:
            finished.set_result(None)
            if self._chat_tails.get(chat_id) is finished:
                del self._chat_tails[chat_id]
            if task is not None:
                self._in_flight.discard(task)

    # ---- catching up -------------------------------------------------------------------

    def _connection_lost(self) -> None:
        if self._lost_since is None:
            self._lost_since = time.time()

    def _session_started(self, shard: int | None, *, resumed: bool) -> None:
        if self._lost_since is not None:  # traffic flows again
            self._lost_since = None
            self._reconnects += 1
        # Runs before the session's first message is handled (discord.py starts event
        # handlers in order), so the gate is up before any live message looks for it.
        if self._client is not None:
            in_flight = list(self._chat_tails.values())
            self._catch_up.session_started(self._client, in_flight, shard, resumed=resumed)

    async def _take_missed(self, message: discord.Message) -> Taken:
        """Hand over a message read from history like a live one."""
        client = self._client
        if client is None or client.user is None:
            return Taken.FAILED
        key = ("message", message.id)
        if key in self._delivered:
            return Taken.SKIPPED
        if not is_conversation(message, client.user, allow_bots=self.settings.allow_bots):
            return Taken.SKIPPED
        self._seen.add(key)  # a replay of it arriving later is not passed again
        try:
            inbound = await inbound_from_message(message, client.user, self.settings)
            assert self._sink is not None
            await self._sink(inbound)
        except Exception:  # one bad message must not stop the adapter or the other chats
            log.exception("Could not pass a missed Discord message from %s on", message.channel.id)
            return Taken.FAILED
        self._delivered.add(key)
        return Taken.PASSED

    # ---- slash commands ----------------------------------------------------------------

    async def _on_slash_command(
        self, interaction: discord.Interaction, name: str, args: str | None
    ) -> None:
        if not self._seen.add(("interaction", interaction.id)) or not self._receiving:
            return
        task = asyncio.current_task()
        if task is not None:  # stop_receiving() waits for it from here on, defer included
            self._in_flight.add(task)
        try:
            # Discord wants an answer within 3 s; a turn takes longer. Shows "thinking…".
            with discord_errors(str(interaction.channel_id)):
                await interaction.response.defer(thinking=True)
        except DeliveryError as error:
            log.warning("Could not acknowledge /%s in %s: %s", name, interaction.channel_id, error)
        finally:
            if task is not None:
                self._in_flight.discard(task)
        if not self._receiving:
            return
        key = f"{INTERACTION_PREFIX}{interaction.id}"
        self._interactions[key] = interaction
        while len(self._interactions) > _MAX_LIVE_INTERACTIONS:
            self._interactions.popitem(last=False)
        inbound = inbound_from_interaction(interaction, name, args, key)
        await self._deliver_in_order(inbound.chat_id, asyncio.sleep(0, inbound))

    # ---- outbound ----------------------------------------------------------------------

    def status(self) -> AdapterStatus:
        status = client_status(self._client)
        problem = ""
        if self._lost_since is not None:
            problem = "the gateway connection dropped; discord.py is reconnecting"
        elif self._client is not None and status.connected is False and not self._stopping:
            problem = "the gateway connection is not ready"
        return replace(
            status, problem=problem, problem_since=self._lost_since, restarts=self._reconnects
        )

    async def private_chat(self, user_id: str) -> str:
        """A DM channel with ``user_id``, opened if need be (Discord's DM ids are not
        user ids)."""
        client = self._client
        if client is None or not user_id.isdigit():
            raise DeliveryError("no DM with this user", platform=PLATFORM, chat_id=user_id)
        with discord_errors(user_id):
            channel = await client.create_dm(discord.Object(int(user_id)))
        return str(channel.id)

    async def send(self, message: OutboundMessage) -> list[str]:
        """Post a reply (split, pings disabled); through the interaction when it answers one.

        Raises :class:`DeliveryError` when Discord refuses it (after discord.py's retries).
        """
        if not message.text.strip():
            return []
        client = self._client
        problem = "Discord is not connected" if client is None else None
        if not (message.thread_id or message.chat_id).isdigit():
            problem = "Not a Discord channel id"
        if problem is not None or client is None:
            raise DeliveryError(problem or "", platform=PLATFORM, chat_id=message.chat_id)
        limit = self.settings.max_chunks
        interaction = self._live_interaction(message.reply_to_message_id)
        if interaction is not None:
            posted: list[str] = []
            poster = outbound.followup_poster(interaction)
            try:
                return await outbound.post_parts(message.text, poster, posted, max_chunks=limit)
            except DeliveryError as error:  # mapped by outbound.discord_errors
                if posted:
                    outbound.delivery_error(message.chat_id, error)  # logged
                    raise
                log.info("Interaction followup failed (%s); replying in the channel", error)
        poster = outbound.channel_poster(client, message)
        try:
            return await outbound.post_parts(message.text, poster, [], max_chunks=limit)
        except DeliveryError as error:
            outbound.delivery_error(message.chat_id, error)  # logged
            raise

    def _live_interaction(self, key: str | None) -> discord.Interaction | None:
        interaction = self._interactions.get(key or "")
        if interaction is None or interaction.is_expired():
            return None
        return interaction

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str, thread_id: str | None = None) -> AsyncIterator[None]:
        """Show "typing…" in the channel, refreshed, until the block ends."""
        channel_id = int(thread_id or chat_id)
        async with outbound.typing_in(self._client, channel_id, self.settings.typing_interval):
            yield

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        """Edit one message as the reply grows (``stream``); not for slash commands."""
        interaction = self._live_interaction(target.reply_to_message_id)
        if not self.settings.stream or self._client is None or interaction is not None:
            return None
        return DiscordReplyStream(self._client, target, self.settings)
