"""Discord shards (docs/design.md#replicas): a process connects the shards it is given
(discord.py's AutoShardedClient), receives the guilds they carry and DMs with shard 0,
registers slash commands only where shard 0 runs, and sends over REST to any channel,
whichever shard carries it."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.base import AdapterStatus, OutboundMessage
from adapters.discord_adapter import DiscordSettings
from tests.adapters.discord_fixtures import running_adapter
from tests.fakes.discord_server import running_fake_discord
from tests.fakes.discord_world import (
    BOTH_GUILDS,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    MENTION,
    SECOND_CHANNEL_ID,
)


def sharded(*shard_ids: int, **more: Any) -> dict[str, Any]:
    """Adapter settings for ``shard_ids`` of 2 shards, identifying without the 5 s pause."""
    return {"shard_count": 2, "shard_ids": shard_ids, "reidentify_delay": 0.0, **more}


async def test_one_process_with_both_shards_connects_each_and_answers_in_every_guild() -> None:
    async with (
        running_fake_discord(BOTH_GUILDS) as fake,
        running_adapter(fake, **sharded(0, 1)) as (adapter, sink),
    ):
        assert sorted(fake.identified_shards) == [[0, 2], [1, 2]]
        assert fake.connected_shards() == {0, 1}
        await fake.dispatch_message(CHANNEL_ID, f"{MENTION} night")
        await fake.dispatch_message(SECOND_CHANNEL_ID, f"{MENTION} day")
        await fake.dispatch_message(DM_CHANNEL_ID, "a DM")
        await fake.wait_for_sent(3)
        status = adapter.status()

    assert sorted((m.chat_id, m.text) for m in sink.received) == sorted(
        [(str(CHANNEL_ID), "night"), (str(SECOND_CHANNEL_ID), "day"), (str(DM_CHANNEL_ID), "a DM")]
    )
    assert sorted((s.channel_id, s.content) for s in fake.sent) == sorted(
        [
            (CHANNEL_ID, "echo: night"),
            (SECOND_CHANNEL_ID, "echo: day"),
            (DM_CHANNEL_ID, "echo: a DM"),
        ]
    )
    assert status == AdapterStatus(connected=True, mode="gateway, shards 0, 1 of 2")
    assert fake.command_registrations == [None]


async def test_two_processes_each_receive_only_the_guilds_of_their_shard() -> None:
    async with (
        running_fake_discord(BOTH_GUILDS) as fake,
        running_adapter(fake, **sharded(0)) as (first, first_sink),
        running_adapter(fake, **sharded(1)) as (second, second_sink),
    ):
        await fake.dispatch_message(CHANNEL_ID, f"{MENTION} night")
        await fake.dispatch_message(SECOND_CHANNEL_ID, f"{MENTION} day")
        await fake.dispatch_message(DM_CHANNEL_ID, "a DM")
        await fake.wait_for_sent(3)
        statuses = [first.status(), second.status()]

    assert fake.identified_shards == [[0, 2], [1, 2]]
    assert sorted(m.text for m in first_sink.received) == ["a DM", "night"]
    assert [m.text for m in second_sink.received] == ["day"]
    assert sorted(s.content for s in fake.sent) == ["echo: a DM", "echo: day", "echo: night"]
    assert [s.mode for s in statuses] == ["gateway, shard 0 of 2", "gateway, shard 1 of 2"]
    # One bulk overwrite per bot: by the process running shard 0.
    assert fake.command_registrations == [None]


async def test_a_process_without_shard_0_registers_no_commands() -> None:
    async with (
        running_fake_discord(BOTH_GUILDS) as fake,
        running_adapter(fake, **sharded(1)),
    ):
        pass

    assert fake.identified_shards == [[1, 2]]
    assert fake.command_registrations == []


async def test_replies_go_over_rest_to_a_guild_another_process_carries() -> None:
    """A lane may run on any replica: its replies must not need the guild in the cache."""
    async with (
        running_fake_discord(BOTH_GUILDS) as fake,
        running_adapter(fake, echo=False, **sharded(1, stream=True, stream_edit_interval=0.0)) as (
            adapter,
            _sink,
        ),
    ):
        # This process runs shard 1 only: Night Shift (shard 0) and DMs never reach it.
        assert fake.identified_shards == [[1, 2]]
        question = fake.post_while_away(CHANNEL_ID, f"{MENTION} asked on shard 0")
        reply = OutboundMessage(
            platform="discord",
            chat_id=str(CHANNEL_ID),
            text="answered from shard 1",
            reply_to_message_id=question["id"],
        )
        async with adapter.typing(str(CHANNEL_ID)):
            await fake.wait_until(lambda: CHANNEL_ID in fake.typing_calls)
        [sent_id] = await adapter.send(reply)
        await adapter.send(OutboundMessage("discord", str(DM_CHANNEL_ID), "a DM from shard 1"))
        stream = adapter.open_stream(OutboundMessage("discord", str(CHANNEL_ID), ""))
        assert stream is not None
        await stream.update("streamed so")
        await stream.finish("streamed so far, and done")

    assert [(s.channel_id, s.content) for s in fake.sent] == [
        (CHANNEL_ID, "answered from shard 1"),
        (DM_CHANNEL_ID, "a DM from shard 1"),
        (CHANNEL_ID, "streamed so"),
    ]
    assert fake.sent[0].payload["message_reference"]["message_id"] == int(question["id"])
    assert str(fake.sent[0].message_id) == sent_id
    assert [(channel, payload["content"]) for channel, _, payload in fake.edits] == [
        (CHANNEL_ID, "streamed so far, and done")
    ]


def test_settings_refuse_shards_that_cannot_exist() -> None:
    for wrong in ({"shard_ids": (0,)}, {"shard_count": 2, "shard_ids": (2,)},
                  {"shard_count": 2, "shard_ids": (1, 1)}, {"shard_count": 0}):  # fmt: skip
        with pytest.raises(ValueError):
            DiscordSettings(token="t", **wrong)
    assert DiscordSettings(token="t", shard_count=3).shards == (0, 1, 2)
    assert DiscordSettings(token="t").shards is None
