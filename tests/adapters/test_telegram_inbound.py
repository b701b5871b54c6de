"""Telegram inbound: what the gateway's sink receives for each kind of chat and message."""

from __future__ import annotations

import pytest

from adapters.base import OutboundMessage

BOT = "NightowlBot"
GROUP = -1001234


def _mention(text: str, who: str) -> dict:
    offset = len(text[: text.index(who)].encode("utf-16-le")) // 2
    return {"type": "mention", "offset": offset, "length": len(who)}


def _command(text: str) -> dict:
    return {"type": "bot_command", "offset": 0, "length": len(text.split()[0])}


async def test_private_chat_round_trip(telegram_server, sink, start_telegram):
    adapter = await start_telegram()

    async def echo(message):
        reply = OutboundMessage(
            "telegram",
            message.chat_id,
            f"You said: {message.text}",
            None,
            message.platform_message_id,
        )
        await adapter.send(reply)

    sink.on_message = echo
    pushed = telegram_server.push_text(5, "hello <there> & you")

    [message] = await sink.wait_for(1)
    assert message.platform == "telegram"
    assert (message.chat_id, message.user_id, message.user_name) == ("5", "5", "Ann")
    assert message.chat_type == "private" and message.addressed
    assert message.text == "hello <there> & you"
    assert message.platform_message_id == str(pushed["message_id"])
    assert message.dedupe_key == "telegram:1"
    assert not message.is_edit and message.thread_id is None

    [sent] = await telegram_server.wait_sent(1)
    assert sent.chat_id == 5
    assert sent.text == "You said: hello &lt;there&gt; &amp; you"
    assert sent.parse_mode == "HTML"
    assert sent.reply_to_message_id == pushed["message_id"]
    assert sent.allow_sending_without_reply is True


async def test_group_message_without_mention_is_observed_not_answered(
    telegram_server, sink, start_telegram
):
    await start_telegram()
    telegram_server.push_text(GROUP, "just chatting among ourselves", chat_type="supergroup")
    text = f"@{BOT} what do you think?"
    telegram_server.push_text(GROUP, text, chat_type="group", entities=[_mention(text, f"@{BOT}")])

    observed, addressed = await sink.wait_for(2)
    assert observed.chat_type == "group" and observed.addressed is False
    assert observed.text == "just chatting among ourselves"
    assert addressed.chat_type == "group" and addressed.addressed is True
    assert addressed.text == "what do you think?", "the bot's own mention is stripped"
    assert telegram_server.sent == [], "the adapter never answers by itself"


async def test_mention_is_case_insensitive_and_other_mentions_are_not_ours(
    telegram_server, sink, start_telegram
):
    await start_telegram()
    ours = "hey @nightowlbot look"
    theirs = "hey @SomeoneElse look"
    telegram_server.push_text(
        GROUP, ours, chat_type="supergroup", entities=[_mention(ours, "@nightowlbot")]
    )
    telegram_server.push_text(
        GROUP, theirs, chat_type="supergroup", entities=[_mention(theirs, "@SomeoneElse")]
    )
    first, second = await sink.wait_for(2)
    assert first.addressed and first.text == "hey look"
    assert not second.addressed and second.text == theirs


async def test_text_mention_of_the_bot_addresses_it(telegram_server, sink, start_telegram):
    await start_telegram()
    text = "Nightowl, summarize please"
    entity = {"type": "text_mention", "offset": 0, "length": 8, "user": telegram_server.bot_user}
    telegram_server.push_text(GROUP, text, chat_type="supergroup", entities=[entity])
    [message] = await sink.wait_for(1)
    assert message.addressed
    assert message.text == "summarize please"


async def test_reply_to_the_bot_addresses_it_and_carries_the_quote(
    telegram_server, sink, start_telegram
):
    await start_telegram()
    earlier = telegram_server.bot_message(GROUP, "The answer is 42.")
    telegram_server.push_text(GROUP, "why 42?", chat_type="supergroup", reply_to=earlier)
    human = telegram_server.make_message(
        GROUP,
        "lunch at noon",
        user={"id": 9, "is_bot": False, "first_name": "Bo", "last_name": "X"},
    )
    telegram_server.push_text(GROUP, "agreed", chat_type="supergroup", reply_to=human)

    to_bot, to_human = await sink.wait_for(2)
    assert to_bot.addressed
    assert to_bot.reply_to is not None
    assert (to_bot.reply_to.text, to_bot.reply_to.author, to_bot.reply_to.from_bot) == (
        "The answer is 42.",
        "Nightowl",
        True,
    )
    assert not to_human.addressed
    assert to_human.reply_to is not None
    assert (to_human.reply_to.author, to_human.reply_to.from_bot) == ("Bo X", False)


@pytest.mark.parametrize(
    ("text", "addressed", "passed_on"),
    [
        (f"/status@{BOT}", True, "/status"),
        (f"/compress@{BOT.lower()} focus on code", True, "/compress focus on code"),
        ("/help", True, "/help"),
        ("/status@OtherBot", False, "/status@OtherBot"),
    ],
)
async def test_group_commands(telegram_server, sink, start_telegram, text, addressed, passed_on):
    await start_telegram()
    telegram_server.push_text(GROUP, text, chat_type="supergroup", entities=[_command(text)])
    [message] = await sink.wait_for(1)
    assert message.addressed is addressed
    assert message.text == passed_on


async def test_free_response_chat_and_require_mention_off(telegram_server, sink, start_telegram):
    await start_telegram(free_response_chats=(str(GROUP),))
    telegram_server.push_text(GROUP, "anyone?", chat_type="supergroup")
    telegram_server.push_text(-100999, "elsewhere", chat_type="supergroup")
    free, other = await sink.wait_for(2)
    assert free.addressed and not other.addressed


async def test_require_mention_off_addresses_every_group_message(
    telegram_server, sink, start_telegram
):
    await start_telegram(require_mention=False)
    telegram_server.push_text(GROUP, "anyone?", chat_type="supergroup")
    [message] = await sink.wait_for(1)
    assert message.addressed


async def test_forum_topic_sets_thread_and_replies_go_to_the_topic(
    telegram_server, sink, start_telegram
):
    adapter = await start_telegram()

    async def answer(message):
        await adapter.send(
            OutboundMessage(
                "telegram",
                message.chat_id,
                "in topic",
                message.thread_id,
                message.platform_message_id,
            )
        )

    sink.on_message = answer
    topic_start = telegram_server.make_message(
        GROUP, None, forum_topic_created={"name": "Ideas", "icon_color": 7322096}
    )
    text = f"@{BOT} hi"
    telegram_server.push_text(
        GROUP,
        text,
        chat_type="supergroup",
        thread_id=77,
        reply_to=topic_start,
        entities=[_mention(text, f"@{BOT}")],
    )
    [message] = await sink.wait_for(1)
    assert message.thread_id == "77"
    assert message.reply_to is None, "the topic's creation message is not a real reply"
    [sent] = await telegram_server.wait_sent(1)
    assert sent.thread_id == 77


async def test_plain_supergroup_reply_thread_is_not_a_topic(telegram_server, sink, start_telegram):
    await start_telegram()
    message = telegram_server.make_message(GROUP, "x", chat_type="supergroup")
    message["message_thread_id"] = 12  # reply threads carry it too, without is_topic_message
    telegram_server.push_update({"message": message})
    [received] = await sink.wait_for(1)
    assert received.thread_id is None


async def test_edited_message(telegram_server, sink, start_telegram):
    await start_telegram()
    original = telegram_server.push_text(5, "helo")
    telegram_server.push_text(5, "hello", edited=True, message_id=original["message_id"])
    first, edit = await sink.wait_for(2)
    assert not first.is_edit
    assert edit.is_edit and edit.text == "hello"
    assert edit.platform_message_id == first.platform_message_id
    assert edit.dedupe_key != first.dedupe_key


async def test_photo_becomes_image_attachment_of_a_reasonable_size(
    telegram_server, sink, start_telegram
):
    await start_telegram()
    sizes = [
        (90, 60, b"\xff\xd8tiny"),
        (1280, 853, b"\xff\xd8large-enough"),
        (2560, 1706, b"\xff\xd8too-big-to-be-useful"),
    ]
    telegram_server.push_photo(5, sizes, caption="what is this?")
    [message] = await sink.wait_for(1)
    assert message.text == "what is this?"
    [image] = message.attachments
    assert (image.kind, image.mime_type, image.data) == ("image", "image/jpeg", b"")
    assert telegram_server.method_calls("getFile") == []  # nothing fetched on arrival
    assert await image.read() == b"\xff\xd8large-enough"  # only when the gateway asks


async def test_photo_download_failure_keeps_the_message(telegram_server, sink, start_telegram):
    await start_telegram(max_attempts=1)
    telegram_server.fail_next("getFile", 400, "Bad Request: file is too big")
    telegram_server.push_photo(5, [(800, 600, b"jpeg")], caption="look")
    [message] = await sink.wait_for(1)
    assert message.text == "look"
    [image] = message.attachments
    assert await image.read() is None  # the gateway then notes it could not be downloaded


async def test_a_voice_note_is_an_attachment_and_service_messages_are_skipped(
    telegram_server, sink, start_telegram
):
    await start_telegram()
    join = telegram_server.make_message(GROUP, None, chat_type="supergroup", new_chat_members=[])
    telegram_server.push_update({"message": join})
    voice = telegram_server.make_message(
        5, None, voice={"file_id": "v", "file_unique_id": "v", "duration": 3}
    )
    telegram_server.push_update({"message": voice})
    [message] = await sink.wait_for(1)
    [note] = message.attachments  # transcribed by the gateway (docs/design.md#voice)
    assert (message.text, note.kind, note.duration, note.data) == ("", "voice", 3.0, b"")
    await telegram_server.wait_for(lambda: telegram_server.confirmed_offset >= 3)
