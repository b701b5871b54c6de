"""Telegram end to end: the real gateway and python-telegram-bot against the fake Bot API
and the fake LLM (issue 5). The adapter's own behaviour is tested in tests/adapters;
here each test follows a user's message through router, store, lane, agent and back."""

from __future__ import annotations

import base64
import itertools
import logging
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from adapters.chunking import utf16_length
from tests.db import session_ends, session_keys, session_rows, write_locked
from tests.e2e.telegram_helpers import (
    ANN,
    BOB,
    last_update_id,
    push_command,
    push_mention,
    redeliver,
    telegram_config,
    telegram_gateway,
    user_texts,
    visible,
)
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import HeldAnswers, turns_done

# PTB warns about its own RetryAfter.retry_after type when it builds the exception.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

GROUP = -1001
FORUM = -100500
STRANGER = {"id": 99, "is_bot": False, "first_name": "Eve"}


async def test_private_chat_round_trip_continues_the_session(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config):
        first = telegram.push_text(42, "My name is Ann.")
        [reply] = await telegram.wait_sent(1)
        second = telegram.push_text(42, "What is my name?")
        await telegram.wait_sent(2)
    assert (reply.chat_id, reply.reply_to_message_id) == (42, first["message_id"])
    assert visible(reply.text) == "echo: My name is Ann."
    assert telegram.sent[1].reply_to_message_id == second["message_id"]
    assert user_texts(fake_llm.requests[-1]) == ["My name is Ann.", "What is my name?"]
    assert session_keys(config) == ["telegram:42"]


async def test_group_chatter_is_observed_and_a_mention_answers_with_it(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(GROUP,))
    async with telegram_gateway(config) as gateway:
        telegram.push_text(GROUP, "the deploy is at 5", user=BOB, chat_type="supergroup")
        chatter = last_update_id(telegram)
        await telegram.wait_for(lambda: telegram.confirmed_offset > chatter)
        await turns_done(gateway)
        # Bob is a member, not an allowed user: his words are context, marked untrusted.
        assert session_rows(config, f"telegram:{GROUP}") == [
            ("user", "(untrusted) Bob: the deploy is at 5", 1)
        ]
        assert telegram.sent == [] and fake_llm.requests == []

        asked = push_mention(telegram, GROUP, "when is the deploy?", user=ANN, chat_type="group")
        [reply] = await telegram.wait_sent(1)
    assert (reply.chat_id, reply.reply_to_message_id) == (GROUP, asked["message_id"])
    assert user_texts(fake_llm.requests[0]) == [
        "(untrusted) Bob: the deploy is at 5",
        "Ann: when is the deploy?",
    ]


async def test_a_night_of_updates_waiting_at_start_is_taken_in_and_said_once(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    """Two and a half batches of group lines waited while the bot was stopped: all are
    stored, and the log says how many, once (Discord's catch-up says so too)."""
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(GROUP,))
    for i in range(250):
        telegram.push_text(GROUP, f"line {i}", user=BOB, chat_type="supergroup")
    newest = last_update_id(telegram)
    with caplog.at_level(logging.INFO, logger="adapters.telegram.receiving"):
        async with telegram_gateway(config):
            await telegram.wait_for(lambda: telegram.confirmed_offset > newest)
            telegram.push_text(GROUP, "one more, later", user=BOB, chat_type="supergroup")
            later = last_update_id(telegram)
            await telegram.wait_for(lambda: telegram.confirmed_offset > later)
    said = [r.getMessage() for r in caplog.records if "waited for the bot" in r.getMessage()]
    assert said == ["Telegram: took in 250 updates that waited for the bot"]
    assert len(session_rows(config, f"telegram:{GROUP}")) == 251


async def test_a_message_written_after_the_start_is_no_backlog(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    """The first long poll brings a message written after the start, and an edit made
    after it of an older message: nothing waited."""
    config = telegram_config(tmp_path, fake_llm, telegram)
    with caplog.at_level(logging.INFO, logger="adapters.telegram.receiving"):
        async with telegram_gateway(config):
            after_start = int(time.time()) + 2  # Telegram's dates are whole seconds
            telegram.push_text(42, "hello", date=after_start)
            edited = telegram.make_message(42, "fixed", date=after_start - 3_600)
            telegram.push_update({"edited_message": {**edited, "edit_date": after_start}})
            newest = last_update_id(telegram)
            await telegram.wait_for(lambda: telegram.confirmed_offset > newest)
    assert "waited for the bot" not in caplog.text


def _mark(at: datetime) -> str:
    """What a row sent at ``at``, before today, says of it (UTC, the default zone)."""
    return f"(sent {at:%b} {at.day}, {at:%H:%M} UTC)"


async def test_a_nights_lines_read_late_say_when_they_were_sent(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """Lines written while the bot was stopped reach the model with their time, once per
    ten minutes of the night, and the morning's question says "now": the model can tell
    the night from the question (docs/design.md#late-messages)."""
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(GROUP,))
    # Thirty hours ago: before today whenever the test runs, so every mark has its date.
    night = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=30)
    for minutes, text in [(0, "server down"), (4, "rebooting"), (9, "back up"), (35, "down again")]:
        at = night + timedelta(minutes=minutes)
        telegram.push_text(GROUP, text, user=BOB, chat_type="supergroup", date=int(at.timestamp()))
    async with telegram_gateway(config):
        push_mention(telegram, GROUP, "what did I miss?", user=ANN, chat_type="group")
        await telegram.wait_sent(1)
    *lines, question = user_texts(fake_llm.requests[0])
    assert lines == [
        f"{_mark(night)}\n(untrusted) Bob: server down",
        "(untrusted) Bob: rebooting",
        "(untrusted) Bob: back up",
        f"{_mark(night + timedelta(minutes=35))}\n(untrusted) Bob: down again",
    ]
    assert re.fullmatch(r"\(sent \d\d:\d\d UTC\)\nAnn: what did I miss\?", question)


async def test_forum_topics_are_separate_sessions_answered_in_their_topic(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(FORUM,))
    async with telegram_gateway(config):
        push_mention(telegram, FORUM, "fact: alpha", chat_type="supergroup", thread_id=11)
        await telegram.wait_sent(1)
        push_mention(telegram, FORUM, "fact: beta", chat_type="supergroup", thread_id=22)
        await telegram.wait_sent(2)
        push_mention(telegram, FORUM, "which fact?", chat_type="supergroup", thread_id=11)
        await telegram.wait_sent(3)
    assert [(s.chat_id, s.thread_id) for s in telegram.sent] == [
        (FORUM, 11),
        (FORUM, 22),
        (FORUM, 11),
    ]
    assert user_texts(fake_llm.requests[-1]) == ["Ann: fact: alpha", "Ann: which fact?"]
    assert session_keys(config) == [f"telegram:{FORUM}:11", f"telegram:{FORUM}:22"]
    assert {(a.chat_id, a.thread_id) for a in telegram.chat_actions} == {
        (FORUM, 11),
        (FORUM, 22),
    }


async def test_strangers_get_a_one_line_refusal_with_their_id_and_unknown_groups_silence(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(GROUP,), pairing=False)
    async with telegram_gateway(config):
        push_mention(telegram, -2002, "hello bot", user=STRANGER, chat_type="group")
        asked = telegram.push_text(99, "let me in", user=STRANGER)
        [refusal] = await telegram.wait_sent(1)
        await telegram.wait_for(lambda: not telegram.pending)
    assert (refusal.chat_id, refusal.reply_to_message_id) == (99, asked["message_id"])
    text = visible(refusal.text)
    assert "99" in text and "\n" not in text
    assert len(telegram.sent) == 1  # the unknown group heard nothing
    assert fake_llm.requests == []
    assert session_keys(config) == []


async def test_a_crash_after_storing_is_answered_exactly_once_after_restart(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram)
    fake_llm.script(Reply(hang=True))
    async with telegram_gateway(config) as gateway:
        with write_locked(config):
            asked = telegram.push_text(42, "are you there?")
            update_id = last_update_id(telegram)
            # While the row cannot be stored, Telegram must not be told the update arrived.
            with pytest.raises(TimeoutError):
                await telegram.wait_for(lambda: telegram.confirmed_offset > update_id, 0.4)
            assert [u["update_id"] for u in telegram.pending] == [update_id]
        await fake_llm.wait_for_requests(1)  # stored; the turn is running
        await telegram.wait_for(lambda: telegram.confirmed_offset > update_id)
        await gateway.lanes.cancel_all()  # what a crash does to the turn in flight
    assert telegram.sent == []
    redeliver(telegram, update_id, asked)  # and Telegram may send the update again

    fake_llm.script(Reply("yes, here"))
    async with telegram_gateway(config) as gateway:
        [reply] = await telegram.wait_sent(1)
        await telegram.wait_for(lambda: not telegram.pending)
        await turns_done(gateway)
    assert visible(reply.text) == "yes, here"
    assert reply.reply_to_message_id == asked["message_id"]
    assert len(telegram.sent) == 1 and fake_llm.request_count == 2
    assert user_texts(fake_llm.requests[-1]) == ["are you there?"]
    roles = [role for role, _, _ in session_rows(config, "telegram:42")]
    assert roles == ["user", "assistant"]


async def test_a_redelivered_update_gets_no_second_reply(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config):
        hello = telegram.push_text(42, "hello")
        hello_id = last_update_id(telegram)
        await telegram.wait_sent(1)
        redeliver(telegram, hello_id, hello)
        telegram.push_text(42, "marker one")
        await telegram.wait_sent(2)
    redeliver(telegram, hello_id, hello)  # after a restart the process remembers nothing
    async with telegram_gateway(config):
        telegram.push_text(42, "marker two")
        await telegram.wait_sent(3)
        await telegram.wait_for(lambda: not telegram.pending)
    assert [visible(s.text) for s in telegram.sent] == [
        "echo: hello",
        "echo: marker one",
        "echo: marker two",
    ]
    assert user_texts(fake_llm.requests[-1]) == ["hello", "marker one", "marker two"]


async def test_a_ten_thousand_char_reply_is_split_with_balanced_code_fences(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    prose = "Here is the plan, step by step, with **care** and 🦉. " * 90
    code = "\n".join(f"    total_{i} = add(value_{i}, 1)  # keep <{i}> & go" for i in range(110))
    answer = f"{prose}\n\n```python\n{code}\n```\n\nThat is all."
    assert len(answer) >= 10_000
    fake_llm.script(Reply(answer))
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config) as gateway:
        asked = telegram.push_text(42, "plan please")
        await telegram.wait_sent(1)
        await turns_done(gateway)
    sent = telegram.sent
    assert 3 <= len(sent) <= 4 and all(s.method == "sendMessage" for s in sent)
    for message in sent:
        assert utf16_length(visible(message.text)) <= 4096
        assert message.text.count("<pre>") == message.text.count("</pre>")
        assert "```" not in message.text and "**" not in message.text
    assert sum("language-python" in s.text for s in sent) >= 2, "fence closed and reopened"
    shown_code = [line for s in sent for line in visible(s.text).splitlines() if "total_" in line]
    assert shown_code == code.splitlines()
    assert [s.reply_to_message_id for s in sent] == [asked["message_id"]] + [None] * (len(sent) - 1)


async def test_rejected_entities_are_resent_as_plain_text(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    fake_llm.script(Reply("**Bold** move"))
    telegram.fail_next("sendMessage", 400, "Bad Request: can't parse entities: bad tag")
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config):
        asked = telegram.push_text(42, "go")
        [reply] = await telegram.wait_sent(1)
        await telegram.wait_for(lambda: not telegram.pending)
    assert len(telegram.method_calls("sendMessage")) == 2
    assert (reply.parse_mode, reply.reply_to_message_id) == (None, asked["message_id"])
    assert "Bold" in reply.text and "parse entities" not in reply.text
    assert len(telegram.sent) == 1


async def test_flood_control_on_the_reply_is_waited_out_and_delivered_once(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    telegram.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=0.2)
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config) as gateway:
        telegram.push_text(42, "busy day")
        await telegram.wait_sent(1)
        await turns_done(gateway)
    assert [visible(s.text) for s in telegram.sent] == ["echo: busy day"]
    first, second = [r for r in telegram.requests if r.method == "sendMessage"]
    assert second.at - first.at >= 0.2


async def test_typing_runs_during_the_turn_and_stops_when_the_provider_fails(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    turn = HeldAnswers(lambda request: Reply(status=401))  # slow, then rejected
    fake_llm.responder = turn.respond
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config):
        telegram.push_text(42, "think about it")
        await telegram.wait_for(lambda: len(telegram.chat_actions) >= 3)
        assert telegram.sent == []
        turn.release()
        [notice] = await telegram.wait_sent(1)
        typed = len(telegram.chat_actions)
        with pytest.raises(TimeoutError):  # no refresh in six typing intervals
            await telegram.wait_for(lambda: len(telegram.chat_actions) > typed, 0.3)
    assert "credentials" in visible(notice.text) and "401" not in notice.text
    assert {(a.chat_id, a.action) for a in telegram.chat_actions} == {(42, "typing")}
    assert max(a.at for a in telegram.chat_actions) < notice.at


async def test_group_commands_with_the_bot_name_and_new_starts_a_new_session(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(GROUP,))
    async with telegram_gateway(config):
        push_mention(telegram, GROUP, "old topic", chat_type="supergroup")
        await telegram.wait_sent(1)
        status = push_command(telegram, GROUP, "/status@NightowlBot", chat_type="supergroup")
        await telegram.wait_sent(2)
        push_command(telegram, GROUP, "/new@NightowlBot", chat_type="supergroup")
        await telegram.wait_sent(3)
        push_mention(telegram, GROUP, "new topic", chat_type="supergroup")
        await telegram.wait_sent(4)
    answer = telegram.sent[1]
    assert "Model: fake-model" in visible(answer.text)
    assert answer.reply_to_message_id == status["message_id"]
    assert "new conversation" in visible(telegram.sent[2].text)
    assert fake_llm.request_count == 2  # commands never reach the model
    assert user_texts(fake_llm.requests[-1]) == ["Ann: new topic"]
    assert session_ends(config) == ["reset", None]
    registered = [c["command"] for c in telegram.commands[-1]]
    assert registered[:2] == ["new", "compress"] and "status" in registered


async def test_a_redelivered_command_after_a_restart_is_not_run_again(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """SPEC F7 / issue 5: "a redelivered update never produces a second reply"."""
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config):
        status = push_command(telegram, 42, "/status")
        status_id = last_update_id(telegram)
        await telegram.wait_sent(1)
    redeliver(telegram, status_id, status)  # the crash came before the offset was confirmed
    async with telegram_gateway(config):
        telegram.push_text(42, "marker")
        await telegram.wait_sent(2)
        await telegram.wait_for(lambda: not telegram.pending)
    assert [visible(s.text).split("\n")[0] for s in telegram.sent][1:] == ["echo: marker"]


async def test_streamed_reply_is_one_message_edited_in_place(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    words = " ".join(f"word{i}" for i in range(40))
    fake_llm.script(Reply(f"**Done:** {words}", chunk_delay=0.05))
    config = telegram_config(tmp_path, fake_llm, telegram, stream=True)
    async with telegram_gateway(config) as gateway:
        asked = telegram.push_text(42, "stream it")
        await telegram.wait_for(lambda: any(e.parse_mode == "HTML" for e in telegram.edits))
        await turns_done(gateway)
    [first] = telegram.sent
    assert first.reply_to_message_id == asked["message_id"] and first.parse_mode is None
    assert (telegram.edits[-1].parse_mode, telegram.edits[-1].text) == (
        "HTML",
        f"<b>Done:</b> {words}",
    )
    edit_times = [first.at] + [e.at for e in telegram.edits]
    assert min(b - a for a, b in itertools.pairwise(edit_times)) >= 0.1


async def test_a_reply_telegram_refused_is_delivered_after_a_restart(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = telegram_config(tmp_path, fake_llm, telegram)
    telegram.fail_next("sendMessage", 502, "Bad Gateway", times=5)  # every attempt fails
    async with telegram_gateway(config) as gateway:
        telegram.push_text(42, "still there?")
        await telegram.wait_for(lambda: len(telegram.method_calls("sendMessage")) == 5)
        await turns_done(gateway)
    assert telegram.sent == []
    assert "failed" in caplog.text and "42" in caplog.text
    assert telegram.token not in caplog.text
    async with telegram_gateway(config) as gateway:
        [reply] = await telegram.wait_sent(1)
        await turns_done(gateway)
    assert (reply.chat_id, visible(reply.text)) == (42, "echo: still there?")
    assert fake_llm.request_count == 1  # the stored reply, not a second turn


async def test_a_reply_lost_to_an_outage_arrives_without_a_restart(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram)
    telegram.fail_next("sendMessage", 502, "Bad Gateway", times=5)  # a short outage
    async with telegram_gateway(config) as gateway:
        telegram.push_text(42, "first")
        await telegram.wait_for(lambda: len(telegram.method_calls("sendMessage")) == 5)
        await turns_done(gateway)
        telegram.push_text(42, "second")  # Telegram is back
        await telegram.wait_sent(1)
        await turns_done(gateway)
    # The model saw its first answer as said; the user must see it too, in order.
    assert [visible(s.text) for s in telegram.sent] == ["echo: first", "echo: second"]


async def test_a_reply_to_the_bot_in_a_group_is_answered_with_the_quote(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(GROUP,))
    async with telegram_gateway(config):
        push_mention(telegram, GROUP, "pick a colour", chat_type="supergroup")
        [bot_reply] = await telegram.wait_sent(1)
        quoted = telegram.bot_message(GROUP, bot_reply.text, message_id=bot_reply.message_id)
        quoted["chat"]["type"] = "supergroup"
        telegram.push_text(GROUP, "why that one?", chat_type="supergroup", reply_to=quoted)
        await telegram.wait_sent(2)
    assert telegram.sent[1].reply_to_message_id is not None
    assert user_texts(fake_llm.requests[-1])[-1] == (
        'Ann: (replying to you: "echo: Ann: pick a colour")\nAnn: why that one?'
    )


async def test_a_photo_reaches_a_vision_model_as_an_image(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    model = {"model": {"supports_vision": True}}
    config = telegram_config(tmp_path, fake_llm, telegram, sections=model)
    photo = b"\xff\xd8 a jpeg of a cat"
    async with telegram_gateway(config):
        telegram.push_photo(42, [(90, 90, b"thumb"), (1280, 960, photo)], caption="what is it?")
        await telegram.wait_sent(1)
    [user] = [m for m in fake_llm.requests[-1].messages if m["role"] == "user"]
    text, image = user["content"]
    assert text == {"type": "text", "text": "what is it?"}
    encoded = base64.b64encode(photo).decode()
    assert image["image_url"]["url"] == f"data:image/jpeg;base64,{encoded}"


async def test_flood_control_on_a_command_answer_does_not_hold_up_other_chats(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram, users=(ANN["id"], BOB["id"]))
    async with telegram_gateway(config) as gateway:
        telegram.fail_next("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=0.5)
        push_command(telegram, 42, "/status")
        telegram.push_text(43, "hello", user=BOB)
        await telegram.wait_sent(2)
        await turns_done(gateway)
    # Bob's chat is not the one Telegram slowed down: his answer need not wait for Ann's.
    assert [s.chat_id for s in telegram.sent] == [43, 42]
