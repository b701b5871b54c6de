"""Discord end to end for issue 13: a voice message is transcribed, an edit is a new
row like a Telegram edit, a reply streams by editing one message. The real gateway and
discord.py against the fake Discord, the fake LLM and its transcription endpoint."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.discord_stack import running_stack, user_texts
from tests.fakes import discord_world as world
from tests.fakes.discord_world import DM_CHANNEL_ID
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.media_files import ogg_opus

#: Discord's attachment flag for a voice message.
IS_VOICE_MESSAGE = 1 << 13


async def test_a_voice_message_is_transcribed_and_its_text_reaches_the_model(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    voice = ogg_opus(5.0)
    async with running_stack(tmp_path, fake_llm) as stack:
        fake = stack.fake
        data = fake.post_while_away(
            DM_CHANNEL_ID, "", attachments=[("voice-message.ogg", "audio/ogg", voice)]
        )
        data["flags"] = IS_VOICE_MESSAGE
        data["attachments"][0].update(flags=IS_VOICE_MESSAGE, duration_secs=5.0, waveform="AAAA")
        await fake.dispatch("MESSAGE_CREATE", data)
        [reply] = await fake.wait_for_sent(1)
    [upload] = fake_llm.transcriptions.uploads
    assert (upload.file_name, upload.data) == ("voice-message.ogg", voice)
    assert user_texts(fake_llm.requests[-1]) == ["[voice 0:05] hello from a voice note"]
    assert reply.content == "echo: [voice 0:05] hello from a voice note"


async def test_an_edited_message_is_stored_again_marked_like_a_telegram_edit(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(tmp_path, fake_llm) as stack:
        fake = stack.fake
        first = await fake.dispatch_message(DM_CHANNEL_ID, "meet at 5")
        await fake.wait_for_sent(1)
        # A link preview arriving is an update without an edit: nothing happens.
        await fake.dispatch("MESSAGE_UPDATE", {**first, "embeds": []})
        edited = {**first, "content": "meet at 6", "edited_timestamp": world.now()}
        await fake.dispatch("MESSAGE_UPDATE", edited)
        await fake.dispatch("MESSAGE_UPDATE", edited)  # delivered twice: stored once
        await fake.wait_for_sent(2)
        await stack.wait_received(2)
        rows = await stack.rows(f"discord:dm:{world.ALICE['id']}")
    assert [content for role, content in rows if role == "user"] == [
        "meet at 5",
        "(edited) meet at 6",
    ]
    assert user_texts(fake_llm.requests[-1]) == ["meet at 5", "(edited) meet at 6"]


async def test_a_streamed_reply_is_one_message_edited_as_it_grows(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    answer = " ".join(f"word{n}" for n in range(40))
    fake_llm.script(Reply(answer))
    tuning = {"stream_edit_interval": 0.0}
    async with running_stack(tmp_path, fake_llm, stream=True, tuning=tuning) as stack:
        fake = stack.fake
        asked = await fake.dispatch_message(DM_CHANNEL_ID, "count for me")
        await fake.wait_until(lambda: any(e[2].get("content") == answer for e in fake.edits))
        await stack.wait_received(1)
    [posted] = fake.sent  # one message, replying to the user's
    assert posted.payload["message_reference"]["message_id"] == int(asked["id"])
    edits = [
        payload["content"]
        for _, message_id, payload in fake.edits
        if message_id == posted.message_id
    ]
    assert len(edits) >= 2 and edits[-1] == answer
    assert posted.content != answer  # it started with part of the reply
