"""Discord catch-up: what was sent while the bot was disconnected is read from channel
history after every (re)connect, from the cursors the gateway gives, and passed on like
live messages — in order, once, bounded, and one broken chat never stops the others."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import discord

from adapters.discord_adapter import DiscordAdapter
from adapters.discord_adapter.catch_up import CatchUpChat
from tests.adapters.discord_fixtures import LogCapture, settings, watching_logs
from tests.fakes.discord_server import FakeDiscord, running_fake_discord
from tests.fakes.discord_world import (
    BOTH_GUILDS,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    MENTION,
    SECOND_CHANNEL_ID,
    THREAD_ID,
)
from tests.fakes.sink import RecordingSink


class StoredSoFar:
    """The gateway's side, as the store would answer it: per chat, the newest message id
    the sink took (plus ``seeded`` cursors); ``allowed`` chat ids (None: every chat)."""

    def __init__(self, sink: RecordingSink, allowed: set[int] | None = None) -> None:
        self.sink = sink
        self.allowed = allowed
        self.seeded: dict[int, int] = {}
        self.asked: list[datetime] = []
        self.judged: list[CatchUpChat] = []

    async def cursors(self, since: datetime) -> Sequence[tuple[int, int]]:
        self.asked.append(since)
        newest = dict(self.seeded)
        for message in self.sink.received:
            chat, last = int(message.chat_id), int(message.platform_message_id or 0)
            newest[chat] = max(newest.get(chat, 0), last)
        return sorted(newest.items())

    def allows(self, chat: CatchUpChat) -> bool:
        self.judged.append(chat)
        place = {chat.chat_id, chat.parent_chat_id}
        return self.allowed is None or any(str(c) in place for c in self.allowed)


@contextlib.asynccontextmanager
async def catching_up(
    fake: FakeDiscord, *, allowed: set[int] | None = None, **overrides: Any
) -> AsyncIterator[tuple[DiscordAdapter, RecordingSink, StoredSoFar, LogCapture]]:
    """A started adapter with a catch-up source; fails the test on any logged error."""
    async with watching_logs() as capture:
        adapter = DiscordAdapter(settings(**{"reidentify_delay": 0.0, **overrides}))
        sink = RecordingSink()
        source = StoredSoFar(sink, allowed)
        adapter.catch_up_from(source)
        try:
            await adapter.start(sink)
            yield adapter, sink, source, capture
        finally:
            await adapter.stop()


async def settle(fake: FakeDiscord, sink: RecordingSink) -> None:
    """Pass the catch-up of the first connect: a live message waits for it."""
    await fake.dispatch_message(DM_CHANNEL_ID, "hello")
    await sink.wait_for(1)


def warnings_of(capture: LogCapture) -> list[str]:
    return [r.getMessage() for r in capture.records if r.levelno == logging.WARNING]


async def test_after_an_invalidated_session_missed_messages_arrive_in_order() -> None:
    async with running_fake_discord() as fake, catching_up(fake) as (_, sink, _source, _log):
        seen = await fake.dispatch_message(DM_CHANNEL_ID, "before the outage")
        await sink.wait_for(1)
        fake.post_while_away(DM_CHANNEL_ID, "missed one")
        fake.post_while_away(CHANNEL_ID, "chatter while away")
        fake.post_while_away(DM_CHANNEL_ID, "missed two")
        fake.post_while_away(CHANNEL_ID, f"{MENTION} did I miss anything?")

        await fake.invalidate_session()  # op 9: discord.py identifies afresh, replays nothing
        messages = await sink.wait_for(3)
        await fake.dispatch_message(DM_CHANNEL_ID, "live again")
        messages = await sink.wait_for(4)

    assert [m.text for m in messages] == [
        "before the outage",
        "missed one",
        "missed two",
        "live again",
    ]
    assert [m.dedupe_key for m in messages[1:3]] == [
        f"discord:{m.platform_message_id}" for m in messages[1:3]
    ]
    # Only chats with something stored are read, after the newest stored message.
    assert fake.history_requests == [(DM_CHANNEL_ID, int(seen["id"]))]


async def test_a_chat_read_after_a_reconnect_keeps_addressing_and_context() -> None:
    async with running_fake_discord() as fake, catching_up(fake) as (_, sink, source, _log):
        await settle(fake, sink)
        source.seeded = {CHANNEL_ID: 1, THREAD_ID: 1}  # active lately, long ago in ids
        chatter = fake.post_while_away(CHANNEL_ID, "chatter while away")
        fake.post_while_away(CHANNEL_ID, f"{MENTION} did I miss anything?")
        fake.post_while_away(THREAD_ID, f"{MENTION} and here?")
        await fake.invalidate_session()
        messages = (await sink.wait_for(4))[1:]

    assert [(m.chat_id, m.chat_type, m.text, m.addressed) for m in messages] == [
        (str(CHANNEL_ID), "group", "chatter while away", False),
        (str(CHANNEL_ID), "group", "did I miss anything?", True),
        (str(THREAD_ID), "thread", "and here?", True),
    ]
    assert messages[0].platform_message_id == chatter["id"]
    assert messages[2].parent_chat_id == str(CHANNEL_ID)
    # Nothing older than catch_up_hours is read, whatever the cursor says.
    oldest = discord.utils.time_snowflake(source.asked[-1])
    assert {after for chat, after in fake.history_requests if chat != DM_CHANNEL_ID} == {oldest}


async def test_a_live_copy_of_a_message_caught_up_on_is_passed_once_and_after_it() -> None:
    async with running_fake_discord() as fake, catching_up(fake) as (_, sink, _source, _log):
        await fake.dispatch_message(DM_CHANNEL_ID, "before")
        await sink.wait_for(1)
        missed = fake.post_while_away(DM_CHANNEL_ID, "missed")
        fake.hold_history()
        await fake.invalidate_session()
        await fake.wait_until(lambda: len(fake.history_requests) == 1)
        # While the history is being read: a new message, and the missed one delivered
        # late as an event after all. Both must wait, and the missed one count once.
        await fake.dispatch_message(DM_CHANNEL_ID, "live during the catch-up")
        await fake.replay(missed)
        fake.release_history()
        await sink.wait_for(3)
        await fake.dispatch_message(DM_CHANNEL_ID, "afterwards")
        messages = await sink.wait_for(4)

    assert [m.text for m in messages] == [
        "before",
        "missed",
        "live during the catch-up",
        "afterwards",
    ]


async def test_a_resume_replays_and_the_catch_up_adds_nothing_twice() -> None:
    async with running_fake_discord() as fake, catching_up(fake) as (_, sink, _source, _log):
        await fake.dispatch_message(DM_CHANNEL_ID, "one")
        await sink.wait_for(1)
        await fake.reconnect()  # op 7: resumed, the catch-up reads after "one"
        await fake.dispatch_message(DM_CHANNEL_ID, "two")
        messages = await sink.wait_for(2)

    assert [m.text for m in messages] == ["one", "two"]
    assert len(fake.history_requests) == 1


async def test_at_most_the_limit_is_read_per_chat_paging_after_the_cursor() -> None:
    async with (
        running_fake_discord() as fake,
        catching_up(fake, catch_up_limit=150) as (
            _,
            sink,
            _source,
            capture,
        ),
    ):
        seen = await fake.dispatch_message(DM_CHANNEL_ID, "seen")
        await sink.wait_for(1)
        missed = [fake.post_while_away(DM_CHANNEL_ID, f"missed {i}") for i in range(160)]
        await fake.invalidate_session()
        messages = await sink.wait_for(151)
        await fake.dispatch_message(DM_CHANNEL_ID, "live")
        messages = await sink.wait_for(152)

    assert [m.text for m in messages[1:151]] == [f"missed {i}" for i in range(150)]
    assert messages[-1].text == "live"
    assert fake.history_requests == [
        (DM_CHANNEL_ID, int(seen["id"])),
        (DM_CHANNEL_ID, int(missed[99]["id"])),  # the next page starts after the first
    ]
    assert any("the limit" in text for text in warnings_of(capture))


async def test_a_chat_that_cannot_be_read_is_logged_and_the_others_are_read() -> None:
    async with running_fake_discord() as fake, catching_up(fake) as (_, sink, source, capture):
        await settle(fake, sink)
        unknown_channel = 3_999_999_999_999_999
        source.seeded = {CHANNEL_ID: 1, unknown_channel: 1, THREAD_ID: 1}
        fake.hidden_history.add(CHANNEL_ID)  # 403: the bot lost access meanwhile
        fake.post_while_away(CHANNEL_ID, f"{MENTION} unreadable")
        fake.post_while_away(THREAD_ID, f"{MENTION} readable")
        await fake.invalidate_session()
        await sink.wait_for(2)
        await fake.dispatch_message(DM_CHANNEL_ID, "still live")
        messages = await sink.wait_for(3)

    assert [m.text for m in messages] == ["hello", "readable", "still live"]
    warnings = warnings_of(capture)
    assert any(str(CHANNEL_ID) in w and "403" in w for w in warnings), warnings
    assert any(str(unknown_channel) in w and "404" in w for w in warnings), warnings


async def test_chats_not_allowed_are_not_read() -> None:
    async with (
        running_fake_discord() as fake,
        catching_up(fake, allowed={CHANNEL_ID}) as (
            _,
            sink,
            source,
            _log,
        ),
    ):
        await settle(fake, sink)
        source.seeded = {CHANNEL_ID: 1, THREAD_ID: 1}
        fake.post_while_away(THREAD_ID, f"{MENTION} in a thread of the allowed channel")
        fake.post_while_away(DM_CHANNEL_ID, "in a DM nobody allowed")
        await fake.invalidate_session()
        await sink.wait_for(2)
        await fake.dispatch_message(CHANNEL_ID, f"{MENTION} live")
        messages = await sink.wait_for(3)

    assert [m.text for m in messages] == ["hello", "in a thread of the allowed channel", "live"]
    assert {channel for channel, _ in fake.history_requests} == {CHANNEL_ID, THREAD_ID}
    [dm] = [chat for chat in source.judged if chat.chat_type == "private"]
    assert dm.user_id is not None  # a DM is judged by who is in it


async def test_catch_up_hours_zero_reads_nothing() -> None:
    async with (
        running_fake_discord() as fake,
        catching_up(fake, catch_up_hours=0) as (
            _,
            sink,
            source,
            _log,
        ),
    ):
        source.seeded = {DM_CHANNEL_ID: 1}  # never asked for
        fake.post_while_away(DM_CHANNEL_ID, "missed")
        await fake.invalidate_session()
        await fake.dispatch_message(DM_CHANNEL_ID, "live")
        messages = await sink.wait_for(1)

    assert [m.text for m in messages] == ["live"]
    assert fake.history_requests == [] and source.asked == []


# -- shards (docs/design.md#replicas) -------------------------------------------------------


async def test_a_shard_that_reconnects_catches_up_on_its_own_guilds_only() -> None:
    async with (
        running_fake_discord(BOTH_GUILDS) as fake,
        catching_up(fake, shard_count=2) as (_, sink, _source, capture),
    ):
        await fake.dispatch_message(CHANNEL_ID, f"{MENTION} night")
        await fake.dispatch_message(SECOND_CHANNEL_ID, f"{MENTION} day")
        await sink.wait_for(2)
        fake.post_while_away(CHANNEL_ID, f"{MENTION} missed at night")
        fake.post_while_away(SECOND_CHANNEL_ID, f"{MENTION} missed by day")

        # Shard 1 alone starts afresh: discord.py sends no on_ready, only on_shard_ready.
        await fake.invalidate_session(shard=1)
        await sink.wait_for(3)
        assert [channel for channel, _ in fake.history_requests] == [SECOND_CHANNEL_ID]
        await fake.invalidate_session(shard=0)
        await sink.wait_for(4)
        await fake.dispatch_message(SECOND_CHANNEL_ID, f"{MENTION} live again")
        messages = await sink.wait_for(5)

    assert [m.text for m in messages[2:]] == ["missed by day", "missed at night", "live again"]
    assert [channel for channel, _ in fake.history_requests] == [SECOND_CHANNEL_ID, CHANNEL_ID]
    assert warnings_of(capture) == []  # no catch-up waited out ready_timeout


async def test_chats_another_process_carries_are_not_read_and_looked_up_once() -> None:
    async with (
        running_fake_discord(BOTH_GUILDS) as fake,
        catching_up(fake, shard_count=2, shard_ids=(1,)) as (_, sink, source, capture),
    ):
        await fake.dispatch_message(SECOND_CHANNEL_ID, f"{MENTION} hello")
        await sink.wait_for(1)  # the first connect's catch-up is over
        # A shared store: the other replica's chats have cursors too.
        source.seeded = {CHANNEL_ID: 1, THREAD_ID: 1, DM_CHANNEL_ID: 1}
        fake.post_while_away(CHANNEL_ID, f"{MENTION} for shard 0")
        fake.post_while_away(DM_CHANNEL_ID, "a DM, for shard 0")
        fake.post_while_away(SECOND_CHANNEL_ID, f"{MENTION} missed by day")
        for live in ("live once", "live twice"):
            await fake.invalidate_session(shard=1)
            await fake.dispatch_message(SECOND_CHANNEL_ID, f"{MENTION} {live}")  # after it
            await sink.wait_for(len(sink.received) + 1)

    assert [m.text for m in sink.received] == ["hello", "missed by day", "live once", "live twice"]
    assert [channel for channel, _ in fake.history_requests] == [SECOND_CHANNEL_ID] * 2
    # Not in this process's guild cache: asked Discord once which guild they are in.
    assert sorted(fake.channel_lookups) == sorted([CHANNEL_ID, THREAD_ID, DM_CHANNEL_ID])
    assert warnings_of(capture) == []


def test_the_oldest_message_read_is_catch_up_hours_old() -> None:
    since = datetime.now(UTC) - timedelta(hours=24)
    assert discord.utils.snowflake_time(discord.utils.time_snowflake(since)) <= since
