"""Discord connection and slash commands: start, intents, resume, interactions, login errors."""

from __future__ import annotations

import logging

import discord
import pytest

from adapters.base import OutboundMessage
from adapters.discord_adapter import DiscordAdapter
from adapters.discord_adapter.outbound import DiscordStartError
from gateway.conversation.command_registry import MENU
from tests.adapters.discord_fixtures import fake_and_adapter, settings
from tests.fakes.discord_server import running_fake_discord
from tests.fakes.discord_world import (
    ALICE,
    BOT_ID,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    GUILD_ID,
    THREAD_ID,
)
from tests.fakes.sink import RecordingSink

MESSAGE_CONTENT_INTENT = 1 << 15


async def test_start_identifies_with_the_message_content_intent_and_registers_commands() -> None:
    async with fake_and_adapter(command_guild_ids=(GUILD_ID,)) as (fake, _adapter, _sink):
        pass

    [identify] = fake.identify_payloads
    assert identify["intents"] & MESSAGE_CONTENT_INTENT
    global_commands = fake.registered_commands[None]
    assert [(c["name"], c["description"]) for c in global_commands] == list(MENU)
    [option] = global_commands[0]["options"]
    assert (option["name"], option["type"], option["required"]) == ("args", 3, False)
    assert [c["name"] for c in fake.registered_commands[GUILD_ID]] == [name for name, _ in MENU]


async def test_sync_commands_off_registers_nothing() -> None:
    async with fake_and_adapter(sync_commands=False) as (fake, _adapter, _sink):
        pass

    assert fake.registered_commands == {}


async def test_after_op7_reconnect_the_session_resumes_and_answers_once() -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        await fake.dispatch_message(DM_CHANNEL_ID, "before")
        await fake.wait_for_sent(1)

        await fake.reconnect()
        after = await fake.dispatch_message(DM_CHANNEL_ID, "after the resume")
        await fake.wait_for_sent(2)
        await fake.dispatch_message(DM_CHANNEL_ID, "and later")
        await fake.wait_for_sent(3)

    assert len(fake.identify_payloads) == 1  # resumed, not a fresh session
    assert fake.resume_count == 1
    assert [m.text for m in sink.received] == ["before", "after the resume", "and later"]
    replies_to_after = [
        s for s in fake.sent if s.payload["message_reference"]["message_id"] == int(after["id"])
    ]
    assert [s.content for s in replies_to_after] == ["echo: after the resume"]


async def test_a_message_replayed_after_resume_is_passed_once() -> None:
    async with fake_and_adapter(echo=False) as (fake, _adapter, sink):
        first = await fake.dispatch_message(CHANNEL_ID, f"<@{BOT_ID}> hello")
        await sink.wait_for(1)
        await fake.reconnect()
        await fake.replay(first)
        await fake.dispatch_message(CHANNEL_ID, f"<@{BOT_ID}> next")

        messages = await sink.wait_for(2)

    assert [m.text for m in messages] == ["hello", "next"]
    assert len({m.dedupe_key for m in messages}) == 2


@pytest.mark.parametrize(
    ("channel_id", "chat_type"),
    [(CHANNEL_ID, "group"), (DM_CHANNEL_ID, "private"), (THREAD_ID, "thread")],
)
async def test_a_slash_command_is_acknowledged_and_answered_through_the_interaction(
    channel_id: int, chat_type: str
) -> None:
    async with fake_and_adapter() as (fake, _adapter, sink):
        interaction = await fake.dispatch_interaction(
            "compress", "focus on tests", channel_id=channel_id
        )

        [inbound] = await sink.wait_for(1)
        [reply] = await fake.wait_for_sent(1)

    [callback] = fake.interaction_callbacks
    assert callback["interaction_id"] == interaction["id"]
    assert callback["type"] == 5  # deferred: Discord shows "thinking…" until the followup
    assert inbound.text == "/compress focus on tests"
    assert inbound.addressed
    assert (inbound.chat_id, inbound.chat_type) == (str(channel_id), chat_type)
    assert inbound.user_id == ALICE["id"]
    assert inbound.platform_message_id == f"interaction:{interaction['id']}"
    assert inbound.dedupe_key == f"discord:interaction:{interaction['id']}"
    assert (reply.route, reply.channel_id, reply.content) == (
        "followup",
        channel_id,
        "echo: /compress focus on tests",
    )
    assert reply.payload["allowed_mentions"]["parse"] == []


async def test_a_command_without_args_and_a_redelivered_interaction() -> None:
    async with fake_and_adapter(echo=False) as (fake, _adapter, sink):
        interaction = await fake.dispatch_interaction("status")
        await sink.wait_for(1)
        await fake.dispatch("INTERACTION_CREATE", interaction)
        await fake.dispatch_interaction("help")

        messages = await sink.wait_for(2)

    assert [m.text for m in messages] == ["/status", "/help"]
    assert len(fake.interaction_callbacks) == 2


async def test_a_reply_to_an_unknown_interaction_goes_to_the_channel() -> None:
    async with fake_and_adapter(echo=False) as (fake, adapter, _sink):
        reply = OutboundMessage(
            platform="discord",
            chat_id=str(CHANNEL_ID),
            text="the gateway restarted meanwhile",
            reply_to_message_id="interaction:123",
        )
        await adapter.send(reply)

    [sent] = fake.sent
    assert (sent.route, sent.channel_id) == ("channel", CHANNEL_ID)
    assert "message_reference" not in sent.payload


async def test_a_rejected_token_fails_start_without_logging_it() -> None:
    async with running_fake_discord() as fake:
        fake.reject_token = True
        adapter = DiscordAdapter(settings())
        with pytest.raises(DiscordStartError, match="refused the bot token") as raised:
            await adapter.start(RecordingSink())
        await adapter.stop()

    assert fake.identify_payloads == []
    assert "test-token" not in repr(adapter.settings)
    assert isinstance(raised.value.__cause__, discord.LoginFailure)
    assert "test-token" not in str(raised.value)


async def test_a_missing_message_content_intent_fails_start_clearly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with running_fake_discord() as fake:
        fake.close_on_identify = 4014
        adapter = DiscordAdapter(settings())
        with (
            caplog.at_level(logging.INFO, logger="adapters.discord_adapter.client"),
            pytest.raises(DiscordStartError, match="Message Content intent") as raised,
        ):
            await adapter.start(RecordingSink())
        await adapter.stop()
    assert isinstance(raised.value.__cause__, discord.PrivilegedIntentsRequired)
    # Never connected: no "reconnects and resumes" before the start's own sentence.
    assert not [r for r in caplog.records if "reconnects" in r.getMessage()]

    assert len(fake.identify_payloads) == 1


async def test_after_stop_receiving_messages_are_not_passed_but_replies_still_go_out() -> None:
    async with fake_and_adapter(echo=False) as (fake, adapter, sink):
        await fake.dispatch_message(DM_CHANNEL_ID, "before the drain")
        await sink.wait_for(1)
        await adapter.stop_receiving()
        await fake.dispatch_message(DM_CHANNEL_ID, "during the drain")
        await fake.reconnect()  # the client has read everything sent before op 7
        await adapter.send(
            OutboundMessage(platform="discord", chat_id=str(DM_CHANNEL_ID), text="last words")
        )

    assert [m.text for m in sink.received] == ["before the drain"]
    assert [s.content for s in fake.sent] == ["last words"]


@pytest.mark.parametrize("command", [("Status", "Show status"), ("has space", "x"), ("ok", "")])
def test_invalid_slash_commands_are_refused_when_configured(command: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="slash command"):
        settings(slash_commands=(command,))
