"""Turns end to end through the gateway: ordering, concurrency, restarts, failures."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests import db
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.harness import HeldAnswers, RecordingAdapter, make_config, running_gateway, turns_done
from tests.waiting import CEILING


def user_texts(request: Recorded) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user"]


async def test_a_conversation_keeps_its_history(tmp_path: Path, fake_llm: FakeLLM) -> None:
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter) as gateway:
        fake_llm.script(Reply("Nice to meet you, Ada."), Reply("You are Ada."))
        await adapter.say("My name is Ada.")
        await adapter.wait_sent(1)
        await adapter.say("What is my name?")
        assert await adapter.wait_sent(2) == ["Nice to meet you, Ada.", "You are Ada."]
        await turns_done(gateway)
    second = fake_llm.requests[-1]
    assert user_texts(second) == ["My name is Ada.", "What is my name?"]
    # The system prompt, the memory block (docs/design.md#memory-block), the conversation.
    assert [m["role"] for m in second.messages] == ["system", "system", "user", "assistant", "user"]
    assert adapter.typing_spans == [("start", "t"), ("stop", "t")] * 2


async def test_a_restart_continues_the_same_conversation(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = make_config(tmp_path, fake_llm)
    first = RecordingAdapter()
    async with running_gateway(config, first):
        await first.say("Remember the number 4711.")
        await first.wait_sent(1)
    second = RecordingAdapter()
    async with running_gateway(config, second):
        await second.say("Which number?")
        await second.wait_sent(1)
    assert user_texts(fake_llm.requests[-1]) == ["Remember the number 4711.", "Which number?"]


async def test_a_message_sent_during_a_turn_is_answered_after_it_in_order(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    first = HeldAnswers(
        lambda request: Reply(f"answer to: {' + '.join(user_texts(request)[-2:])}"),
        matching=lambda request: len(fake_llm.requests) == 1,
    )
    fake_llm.responder = first.respond
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter) as gateway:
        await adapter.say("first")
        await fake_llm.wait_for_requests(1)
        await adapter.say("second")  # arrives while the first turn is running
        await adapter.say("third")
        assert gateway.lanes.busy("console:t")
        assert adapter.sent == []
        first.release()
        texts = await adapter.wait_sent(2)
        await turns_done(gateway)
    assert texts[0] == "answer to: first"
    # The two queued messages became one turn, in arrival order, after the first reply.
    assert texts[1] == "answer to: second + third"
    assert len(fake_llm.requests) == 2


async def test_sessions_run_concurrently(tmp_path: Path, fake_llm: FakeLLM) -> None:
    both_waiting = asyncio.Event()
    waiting: set[str] = set()

    async def rendezvous(request: Recorded) -> Reply:
        waiting.add(user_texts(request)[-1])
        if len(waiting) == 2:
            both_waiting.set()
        await asyncio.wait_for(both_waiting.wait(), CEILING)  # only if both run at once
        return Reply("done " + user_texts(request)[-1])

    fake_llm.responder = rendezvous
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await adapter.say("alpha", chat_id="a")
        await adapter.say("beta", chat_id="b")
        await adapter.wait_sent(2)
    assert sorted(adapter.texts()) == ["done alpha", "done beta"]
    assert {m.chat_id for m in adapter.sent} == {"a", "b"}


async def test_open_runtimes_are_bounded_and_a_closed_one_reopens_with_its_history(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = lambda request: Reply("heard " + user_texts(request)[-1])
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter) as gateway:
        gateway.sessions.limit = 2  # docs/design.md#memory-footprint
        for number, chat in enumerate("abc", start=1):
            await adapter.say(f"I am {chat}", chat_id=chat)
            await adapter.wait_sent(number)
        await turns_done(gateway)
        assert gateway.sessions.cached("console:a") is None  # the least recent went
        assert gateway.sessions.cached("console:c") is not None
        await adapter.say("who am I?", chat_id="a")
        await adapter.wait_sent(4)
        await turns_done(gateway)
        assert gateway.sessions.cached("console:b") is None
    assert user_texts(fake_llm.requests[-1]) == ["I am a", "who am I?"]


async def test_a_turn_killed_midway_is_answered_after_restart(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, fake_llm)
    fake_llm.script(Reply(hang=True))
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("are you there?")
        await fake_llm.wait_for_requests(1)
        await gateway.lanes.cancel_all()  # what a crash does to the turn in flight
    restarted = RecordingAdapter()
    fake_llm.script(Reply("yes, here"))
    async with running_gateway(config, restarted):
        assert await restarted.wait_sent(1) == ["yes, here"]
    assert user_texts(fake_llm.requests[-1]) == ["are you there?"]
    assert db.value(config, "SELECT count(*) FROM messages WHERE role = 'user'") == 1


async def test_provider_errors_are_explained_and_the_next_turn_works(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        fake_llm.script(Reply(status=429, retry_after=7))
        await adapter.say("hello?")
        (notice,) = await adapter.wait_sent(1)
        assert "rate-limiting" in notice and "8 s" in notice
        fake_llm.script(Reply(status=401))
        await adapter.say("and now?")
        await adapter.wait_sent(2)
        assert "credentials" in adapter.texts()[1] and "sk-" not in adapter.texts()[1]
        fake_llm.script(Reply("all good"))
        await adapter.say("third time")
        await adapter.wait_sent(3)
    assert adapter.texts()[2] == "all good"
    # Nothing the user said was lost: all three messages are in the last request.
    assert user_texts(fake_llm.requests[-1]) == ["hello?", "and now?", "third time"]


async def test_a_megabyte_message_gets_an_answer(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.context_window = 32_768
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter) as gateway:
        await adapter.say("log line\n" * 110_000)
        (reply,) = await adapter.wait_sent(1)
        await turns_done(gateway)
    assert reply.startswith("echo: log line")  # an answer, not "cannot compress"
    sent = fake_llm.requests[-1]
    assert sent.prompt_tokens + sent.max_tokens <= 32_768
    assert "too long to show whole in the context window" in user_texts(sent)[-1]
    stored = db.value(tmp_path, "SELECT length(content) FROM messages WHERE role = 'user'")
    assert stored == len("log line\n" * 110_000)  # the stored row keeps every character


async def test_commands_answer_at_once_even_during_a_turn(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    turn = HeldAnswers(lambda request: Reply("finally"))
    fake_llm.responder = turn.respond
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await adapter.say("think hard")
        await fake_llm.wait_for_requests(1)
        await adapter.say("/status")
        (status,) = await adapter.wait_sent(1)
        assert "Model: fake-model" in status and "being written" in status
        await adapter.say("/help")
        await adapter.wait_sent(2)
        turn.release()
        await adapter.wait_sent(3)
    assert adapter.texts()[2] == "finally"


async def test_status_before_the_first_message_names_the_model_and_its_window(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await adapter.say("/status")
        (status,) = await adapter.wait_sent(1)
    # A server of one's own is named by its address, not by the protocol it speaks.
    at = f"fake-model at 127.0.0.1:{fake_llm.port}, "
    assert status.startswith(f"No conversation yet. Say something!\nModel: {at}")
    # The fake does not say its window: the guess says so, and what to set.
    assert status.endswith(" tokens (a cautious guess: set model.context_length)")


async def test_new_starts_fresh_and_keeps_the_old_rows(tmp_path: Path, fake_llm: FakeLLM) -> None:
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await adapter.say("old topic")
        await adapter.wait_sent(1)
        await adapter.say("/new")
        await adapter.wait_sent(2)
        await adapter.say("new topic")
        await adapter.wait_sent(3)
    assert user_texts(fake_llm.requests[-1]) == ["new topic"]
    assert db.session_ends(tmp_path) == ["reset", None]
    assert db.value(tmp_path, "SELECT count(*) FROM messages WHERE content = 'old topic'") == 1


async def test_unknown_private_users_are_refused_with_their_id(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter("telegram")
    telegram = {"allowed_users": [42], "pairing": False}  # with pairing: a code instead
    config = make_config(tmp_path, fake_llm, platforms={"telegram": telegram})
    async with running_gateway(config, adapter):
        await adapter.say("hi", user_id="99", chat_id="99")
        (refusal,) = await adapter.wait_sent(1)
        await adapter.say("hi", user_id="5", chat_id="-100", chat_type="group")  # unknown group
        await adapter.say("hello", user_id="42", chat_id="42")
        await adapter.wait_sent(2)
    assert "99" in refusal and "allowed_users" in refusal
    assert adapter.texts()[1] == "echo: hello" and len(fake_llm.requests) == 1


async def test_redelivered_messages_are_answered_once(tmp_path: Path, fake_llm: FakeLLM) -> None:
    adapter = RecordingAdapter("telegram")
    config = make_config(tmp_path, fake_llm, platforms={"telegram": {"allowed_users": [1]}})
    async with running_gateway(config, adapter) as gateway:
        for _ in range(3):
            await adapter.say("once", user_id="1", chat_id="1", dedupe_key="telegram:77")
        await adapter.wait_sent(1)
        await turns_done(gateway)
    assert len(adapter.sent) == 1 and len(fake_llm.requests) == 1


async def test_group_chatter_is_stored_one_row_per_message(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter("telegram")
    config = make_config(
        tmp_path,
        fake_llm,
        platforms={"telegram": {"allowed_chats": ["-5"], "allowed_users": ["u1"]}},
    )
    async with running_gateway(config, adapter) as gateway:
        for i, name in enumerate(["Ann", "Bob", "Ann"]):
            await adapter.say(
                f"chatter {i}", chat_id="-5", chat_type="group", user_name=name, addressed=False
            )
        await turns_done(gateway)
        assert fake_llm.requests == []  # observed only: no turn, no reply
        await adapter.say("what did Bob say?", chat_id="-5", chat_type="group", user_name="Cy")
        await adapter.wait_sent(1)
    assert user_texts(fake_llm.requests[0]) == [
        "Ann: chatter 0",
        "Bob: chatter 1",
        "Ann: chatter 2",
        "Cy: what did Bob say?",
    ]


async def test_attachments_the_model_cannot_read_are_mentioned(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    from adapters.base import Attachment

    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await adapter.say(
            "see attached",
            attachments=(
                Attachment("file", "application/pdf", name="report.pdf"),
                Attachment("image", "image/png", data=b"png"),
            ),
        )
        await adapter.wait_sent(1)
    (text,) = user_texts(fake_llm.requests[-1])
    assert "report.pdf (application/pdf)" in text and "cannot see images" in text


async def test_turns_at_once_are_bounded_and_every_lane_still_runs() -> None:
    from gateway.conversation.lanes import Lanes

    running: set[str] = set()
    most = 0
    done: list[str] = []

    async def turn(key: str) -> None:
        nonlocal most
        running.add(key)
        most = max(most, len(running))
        await asyncio.sleep(0.01)
        running.discard(key)
        done.append(key)

    lanes = Lanes(turn, turns_at_once=3)  # docs/design.md#memory-footprint
    keys = [f"console:{n}" for n in range(10)]
    for key in keys:
        lanes.notify(key)
    assert await lanes.wait_idle(CEILING)
    assert most == 3
    assert sorted(done) == sorted(keys)
