"""Discord end to end (issue 6): fake Discord -> discord.py -> adapter -> the real gateway
-> the fake model, and back. Adapter-only behaviour (mention parsing, image downloads,
429s) is covered in tests/adapters; here each test checks what a Discord user would see
when the whole product runs: replies, sessions, refusals, commands, errors.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from tests.e2e.discord_stack import (
    BOB,
    add_role,
    answers_to,
    backdate_chat,
    dispatch_from_member,
    reference_of,
    running_gateway_on,
    running_stack,
    user_texts,
    watching_all_logs,
)
from tests.fakes.discord_server import FakeDiscord, running_fake_discord
from tests.fakes.discord_world import (
    ALICE,
    BOT_ID,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    FREE_CHANNEL_ID,
    GUILD_ID,
    THREAD_ID,
)
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.harness import turns_done

ALICE_DM = f"discord:dm:{ALICE['id']}"
MENTION = f"<@{BOT_ID}>"
_FENCE_LINE = re.compile(r"^```.*$", re.MULTILINE)


async def test_dm_round_trip_replies_in_the_dm_and_continues_the_session(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.script(Reply("Hello Ada."), Reply("You are Ada."))
    async with running_stack(tmp_path, fake_llm) as stack:
        fake = stack.fake
        first = await fake.dispatch_message(DM_CHANNEL_ID, "My name is Ada.")
        await fake.wait_for_sent(1)
        second = await fake.dispatch_message(DM_CHANNEL_ID, "What is my name?")
        await fake.wait_for_sent(2)
        assert await stack.session_keys() == {ALICE_DM}

    assert [(s.channel_id, s.content) for s in fake.sent] == [
        (DM_CHANNEL_ID, "Hello Ada."),
        (DM_CHANNEL_ID, "You are Ada."),
    ]
    assert [reference_of(s.payload) for s in fake.sent] == [int(first["id"]), int(second["id"])]
    assert user_texts(fake_llm.requests[-1]) == ["My name is Ada.", "What is my name?"]


async def test_channel_chatter_is_observed_silently_and_a_mention_sees_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(
        tmp_path,
        fake_llm,
        allowed_users=[],
        allowed_channels=[str(CHANNEL_ID)],
        group_members="all",
    ) as stack:
        fake = stack.fake
        await fake.dispatch_message(CHANNEL_ID, "the build is red again")
        await stack.wait_received(1)
        assert fake.sent == [] and fake_llm.requests == []
        channel_key = f"discord:{CHANNEL_ID}"
        assert await stack.rows(channel_key) == [("user", "Alice: the build is red again")]

        question = await fake.dispatch_message(CHANNEL_ID, f"{MENTION} what did I just say?")
        [reply] = await fake.wait_for_sent(1)

    assert reply.channel_id == CHANNEL_ID
    assert reference_of(reply.payload) == int(question["id"])
    assert user_texts(fake_llm.requests[0]) == [
        "Alice: the build is red again",
        "Alice: what did I just say?",
    ]
    assert len(fake_llm.requests) == 1


async def test_a_thread_is_its_own_session_and_inherits_its_channels_allowance(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(
        tmp_path,
        fake_llm,
        allowed_users=[],
        allowed_channels=[str(CHANNEL_ID)],
        group_members="all",
    ) as stack:
        fake = stack.fake
        await fake.dispatch_message(CHANNEL_ID, f"{MENTION} channel topic: deploys")
        await fake.wait_for_sent(1)
        in_thread = await fake.dispatch_message(THREAD_ID, f"{MENTION} thread topic: lunch")
        await fake.wait_for_sent(2)
        keys = await stack.session_keys()

    assert keys == {f"discord:{CHANNEL_ID}", f"discord:{THREAD_ID}"}
    thread_reply = fake.sent[1]
    assert thread_reply.channel_id == THREAD_ID
    assert reference_of(thread_reply.payload) == int(in_thread["id"])
    # The thread's turn knows nothing of its channel's conversation.
    assert user_texts(fake_llm.requests[1]) == ["Alice: thread topic: lunch"]


async def test_a_reply_to_the_bot_and_a_free_response_channel_need_no_mention(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    channels = [str(CHANNEL_ID), str(FREE_CHANNEL_ID)]
    async with running_stack(
        tmp_path, fake_llm, allowed_channels=channels, free_response_channels=[FREE_CHANNEL_ID]
    ) as stack:
        fake = stack.fake
        await fake.dispatch_message(CHANNEL_ID, f"{MENTION} is the deploy done?")
        [answer] = await fake.wait_for_sent(1)
        follow_up = await fake.dispatch_message(
            CHANNEL_ID, "and the rollback?", referenced=answer.message_id
        )
        await fake.wait_for_sent(2)
        await fake.dispatch_message(FREE_CHANNEL_ID, "anyone awake?")
        await fake.wait_for_sent(3)

    assert reference_of(fake.sent[1].payload) == int(follow_up["id"])
    assert user_texts(fake_llm.requests[1])[-1] == (
        'Alice: (replying to you: "echo: Alice: is the deploy done?")\nAlice: and the rollback?'
    )
    assert (fake.sent[2].channel_id, fake.sent[2].content) == (
        FREE_CHANNEL_ID,
        "echo: Alice: anyone awake?",
    )


async def test_an_image_in_a_dm_reaches_a_vision_model_as_an_image_part(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    picture = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    async with running_stack(
        tmp_path, fake_llm, sections={"model": {"supports_vision": True}}
    ) as stack:
        await stack.fake.dispatch_message(
            DM_CHANNEL_ID, "what is this?", attachments=[("cat.png", "image/png", picture)]
        )
        await stack.fake.wait_for_sent(1)

    [user] = [m for m in fake_llm.requests[0].messages if m["role"] == "user"]
    text, image = user["content"]
    assert text == {"type": "text", "text": "what is this?"}
    data_url = "data:image/png;base64," + base64.b64encode(picture).decode()
    assert image == {"type": "image_url", "image_url": {"url": data_url}}


def _long_reply_with_a_code_block() -> str:
    prose = "@everyone look at this. " + " ".join(f"word{i}" for i in range(330))
    code = "\n".join(f"    print('line {i:03d}')" for i in range(90))
    return f"{prose}\n\n```python\n{code}\n```\n\nThat is all, @here <@&123456>."


async def test_a_5000_char_model_reply_is_split_balanced_and_never_pings(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    text = _long_reply_with_a_code_block()
    assert 4500 < len(text) < 6000
    fake_llm.script(Reply(text))
    async with running_stack(tmp_path, fake_llm) as stack:
        question = await stack.fake.dispatch_message(DM_CHANNEL_ID, "show me the code")
        await stack.fake.wait_for_sent(3)
        await turns_done(stack.gateway)
        stored = await stack.rows(ALICE_DM)

    parts = [s.content for s in stack.fake.sent]
    assert len(parts) == 3
    assert all(len(part) <= 2000 for part in parts)
    assert all(len(_FENCE_LINE.findall(part)) % 2 == 0 for part in parts)
    strip = lambda s: re.sub(r"\s+", "", _FENCE_LINE.sub("", s))  # noqa: E731
    assert strip("".join(parts)) == strip(text)
    assert [reference_of(s.payload) for s in stack.fake.sent] == [int(question["id"]), None, None]
    for sent in stack.fake.sent:
        allowed = sent.payload["allowed_mentions"]
        assert allowed["parse"] == []  # neither "everyone" nor "roles" nor "users"
        assert not allowed.get("roles") and not allowed.get("users")
        assert not allowed.get("replied_user")
    assert stored[-1] == ("assistant", text)  # the transcript keeps the reply whole


async def test_after_an_op7_resume_the_next_message_and_a_replay_are_answered_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(tmp_path, fake_llm) as stack:
        fake = stack.fake
        await fake.dispatch_message(DM_CHANNEL_ID, "before")
        await fake.wait_for_sent(1)
        await fake.reconnect()
        after = await fake.dispatch_message(DM_CHANNEL_ID, "after the resume")
        await fake.wait_for_sent(2)
        await fake.replay(after)  # Discord may deliver a MESSAGE_CREATE twice
        await fake.dispatch_message(DM_CHANNEL_ID, "and later")
        await fake.wait_for_sent(3)

    assert len(fake.identify_payloads) == 1 and fake.resume_count == 1
    answers = [s.content for s in fake.sent if reference_of(s.payload) == int(after["id"])]
    assert answers == ["echo: after the resume"]
    assert len(fake.sent) == 3 and len(fake_llm.requests) == 3
    assert user_texts(fake_llm.requests[-1]) == ["before", "after the resume", "and later"]


async def test_a_replay_reaching_a_restarted_gateway_is_not_answered_again(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # The adapter's memory of seen ids dies with the process; the store's does not.
    async with watching_all_logs(), running_fake_discord() as fake:
        async with running_gateway_on(fake, tmp_path, fake_llm):
            question = await fake.dispatch_message(DM_CHANNEL_ID, "only once, please")
            await fake.wait_for_sent(1)
        async with running_gateway_on(fake, tmp_path, fake_llm):
            await fake.replay(question)
            await fake.dispatch_message(DM_CHANNEL_ID, "next")
            await fake.wait_for_sent(2)

    assert [s.content for s in fake.sent] == ["echo: only once, please", "echo: next"]
    assert user_texts(fake_llm.requests[-1]) == ["only once, please", "next"]


async def test_an_unknown_user_is_refused_once_with_their_id_and_costs_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    images = [(f"cat{i}.png", "image/png", b"\x89PNG cat") for i in range(10)]
    async with running_stack(tmp_path, fake_llm, allowed_users=["42"], pairing=False) as stack:
        question = await stack.fake.dispatch_message(DM_CHANNEL_ID, "let me in", attachments=images)
        await stack.fake.dispatch_message(DM_CHANNEL_ID, "hello??", attachments=images)
        [refusal] = await stack.fake.wait_for_sent(1)
        await stack.fake.dispatch_message(DM_CHANNEL_ID, "anyone?")
        await turns_done(stack.gateway)
        keys = await stack.session_keys()

    assert ALICE["id"] in refusal.content and "allowed_users" in refusal.content
    assert reference_of(refusal.payload) == int(question["id"])
    assert len(stack.fake.sent) == 1  # one refusal an hour, however often they write
    assert stack.fake.attachment_downloads == 0  # a stranger's images are never fetched
    assert fake_llm.requests == [] and keys == set()


async def test_only_allowed_places_and_in_them_only_allowed_people_start_turns(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    night_owls = 8_000_000_000_000_777
    async with running_stack(
        tmp_path,
        fake_llm,
        allowed_users=[],
        allowed_channels=[str(CHANNEL_ID)],
        # @everyone's id is the guild's: naming it must not let every member in.
        allowed_roles=[str(night_owls), str(GUILD_ID)],
    ) as stack:
        fake = stack.fake
        await add_role(fake, night_owls, "night owls")
        carol = {**BOB, "id": "6000000000000003", "username": "carol", "global_name": "Carol"}
        # FREE_CHANNEL_ID is on no allowlist: silence, nothing stored, whoever asks —
        # Carol's allowed role included.
        await dispatch_from_member(fake, FREE_CHANNEL_ID, f"{MENTION} hello?", author=BOB, roles=[])
        await dispatch_from_member(
            fake, FREE_CHANNEL_ID, f"{MENTION} me too?", author=carol, roles=[night_owls]
        )
        # In the allowed channel Bob, a mere member, is context; Carol's role lets her in.
        await dispatch_from_member(
            fake, CHANNEL_ID, f"{MENTION} do my homework", author=BOB, roles=[]
        )
        question = await dispatch_from_member(
            fake, CHANNEL_ID, f"{MENTION} hi from a night owl", author=carol, roles=[night_owls]
        )
        [reply] = await fake.wait_for_sent(1)
        await turns_done(stack.gateway)
        elsewhere = await stack.rows(f"discord:{FREE_CHANNEL_ID}")
        rows = await stack.rows(f"discord:{CHANNEL_ID}")

    assert reference_of(reply.payload) == int(question["id"])
    assert len(fake.sent) == 1 and len(fake_llm.requests) == 1
    assert elsewhere == []  # an unknown place is not even observed
    assert [text for _, text in rows] == [
        "(untrusted) Bob: do my homework",
        "Carol: hi from a night owl",
        reply.content,
    ]


async def test_slash_status_and_new_answer_through_the_interaction(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(tmp_path, fake_llm) as stack:
        fake = stack.fake
        registered = [c["name"] for c in fake.registered_commands[None]]
        await fake.dispatch_message(DM_CHANNEL_ID, "old topic")
        await fake.wait_for_sent(1)

        status = await fake.dispatch_interaction("status", channel_id=DM_CHANNEL_ID)
        await fake.wait_for_sent(2)
        await fake.dispatch_interaction("new", channel_id=DM_CHANNEL_ID)
        await fake.wait_for_sent(3)
        await fake.dispatch_message(DM_CHANNEL_ID, "new topic")
        await fake.wait_for_sent(4)

    assert {"new", "status", "compress", "help"} <= set(registered)
    deferred = [c for c in fake.interaction_callbacks if c["type"] == 5]  # "thinking…"
    assert len(deferred) == 2 and deferred[0]["interaction_id"] == status["id"]
    status_answer, new_answer = fake.sent[1], fake.sent[2]
    assert status_answer.route == "followup" and new_answer.route == "followup"
    assert status_answer.content.startswith("Model: fake-model")
    assert "Context:" in status_answer.content and "compressions so far: 0" in status_answer.content
    assert new_answer.content.startswith("Started a new conversation")
    assert user_texts(fake_llm.requests[-1]) == ["new topic"]
    assert len(fake_llm.requests) == 2  # commands never reach the model


async def test_a_slash_command_from_an_unknown_place_gets_an_answer(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(
        tmp_path, fake_llm, allowed_users=[ALICE["id"]], allowed_channels=[str(CHANNEL_ID)]
    ) as stack:
        fake = stack.fake
        refused = await fake.dispatch_interaction("status", channel_id=FREE_CHANNEL_ID, user=BOB)
        await fake.wait_until(lambda: len(fake.interaction_callbacks) == 1)
        # Alice's command takes two round trips more than Bob's needed after his deferral.
        await fake.dispatch_interaction("help", channel_id=CHANNEL_ID)
        await fake.wait_until(lambda: any(s.channel_id == CHANNEL_ID for s in fake.sent))

    assert fake.interaction_callbacks[0]["interaction_id"] == refused["id"]
    assert fake_llm.requests == []
    # Every deferred interaction must be answered, or Discord shows "thinking…" for 15
    # minutes and then "The application did not respond".
    assert len([s for s in fake.sent if s.route == "followup"]) == 2


async def test_a_provider_error_is_explained_while_typing_was_shown(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(tmp_path, fake_llm) as stack:
        fake = stack.fake

        async def rate_limited_after_typing(request: Recorded) -> Reply:
            # The model "works" until the user sees typing; a turn without it times out.
            await fake.wait_until(lambda: DM_CHANNEL_ID in fake.typing_calls)
            return Reply(status=429, retry_after=7)

        fake_llm.responder = rate_limited_after_typing
        question = await fake.dispatch_message(DM_CHANNEL_ID, "are you there?")
        [notice] = await fake.wait_for_sent(1)

    assert (
        notice.content == "The model provider is rate-limiting us. Please try again in about 8 s."
    )
    assert reference_of(notice.payload) == int(question["id"])


# ---- catching up on what Discord never delivered (issue 10, defect 9) ------------------


def replied_to(fake: FakeDiscord, channel_id: int) -> list[int | None]:
    """The message each bot post in ``channel_id`` answers, in posting order."""
    return [reference_of(s.payload) for s in fake.sent if s.channel_id == channel_id]


async def test_messages_sent_during_an_invalidated_session_are_fetched_and_answered(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(tmp_path, fake_llm, allowed_channels=[str(CHANNEL_ID)]) as stack:
        fake = stack.fake
        hello = await fake.dispatch_message(DM_CHANNEL_ID, "hello")
        topic = await fake.dispatch_message(CHANNEL_ID, f"{MENTION} topic: deploys")
        await stack.wait_received(2)
        first = fake.post_while_away(DM_CHANNEL_ID, "first while away")
        fake.post_while_away(CHANNEL_ID, "the deploy failed")
        second = fake.post_while_away(DM_CHANNEL_ID, "second while away")
        question = fake.post_while_away(CHANNEL_ID, f"{MENTION} what happened?")
        await fake.invalidate_session()  # op 9: Discord replays nothing of the gap
        await stack.wait_received(6)
        dm_rows = await stack.rows(ALICE_DM)

    # Read after the newest message stored in each chat, nothing earlier.
    assert sorted(fake.history_requests) == [
        (CHANNEL_ID, int(topic["id"])),
        (DM_CHANNEL_ID, int(hello["id"])),
    ]
    assert [text for role, text in dm_rows if role == "user"] == [
        "hello",
        "first while away",
        "second while away",
    ]
    # A burst is answered like a live one: in order, the newest always, nothing twice.
    dm_answers = replied_to(fake, DM_CHANNEL_ID)
    assert dm_answers[0] == int(hello["id"]) and dm_answers[-1] == int(second["id"])
    assert dm_answers == sorted(set(dm_answers))
    assert len(answers_to(fake, first)) <= 1
    assert answers_to(fake, question) == ["echo: Alice: what happened?"]
    asked = [r for r in fake_llm.requests if user_texts(r)[-1] == "Alice: what happened?"]
    assert user_texts(asked[0]) == [
        "Alice: topic: deploys",
        "Alice: the deploy failed",  # observed while away: context, not answered
        "Alice: what happened?",
    ]


async def test_messages_sent_while_the_gateway_was_stopped_are_answered_once_after_start(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with watching_all_logs(), running_fake_discord() as fake:
        async with running_gateway_on(fake, tmp_path, fake_llm) as first_run:
            before = await fake.dispatch_message(DM_CHANNEL_ID, "before the restart")
            await first_run.wait_received(1)
        away = fake.post_while_away(DM_CHANNEL_ID, "while you were stopped")
        async with running_gateway_on(fake, tmp_path, fake_llm) as second_run:
            await second_run.wait_received(1)
            after = await fake.dispatch_message(DM_CHANNEL_ID, "after the restart")
            await second_run.wait_received(2)

    assert replied_to(fake, DM_CHANNEL_ID) == [int(before["id"]), int(away["id"]), int(after["id"])]
    assert [s.content for s in fake.sent] == [
        "echo: before the restart",
        "echo: while you were stopped",
        "echo: after the restart",
    ]
    assert user_texts(fake_llm.requests[-1]) == [
        "before the restart",
        "while you were stopped",
        "after the restart",
    ]


async def test_a_message_both_delivered_live_and_fetched_is_answered_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_stack(tmp_path, fake_llm) as stack:
        fake = stack.fake
        await fake.dispatch_message(DM_CHANNEL_ID, "before")
        await stack.wait_received(1)
        missed = fake.post_while_away(DM_CHANNEL_ID, "missed")
        fake.hold_history()
        await fake.invalidate_session()
        await fake.wait_until(lambda: bool(fake.history_requests))
        # While the history is read: a new message (in the history too by the time it is
        # answered) and the missed one, delivered as an event after all.
        live = await fake.dispatch_message(DM_CHANNEL_ID, "live meanwhile")
        await fake.replay(missed)
        fake.release_history()
        await stack.wait_received(3)
        await fake.dispatch_message(DM_CHANNEL_ID, "later")
        await stack.wait_received(4)

    assert len(stack.received.items) == 4  # each message stored once
    assert user_texts(fake_llm.requests[-1]) == ["before", "missed", "live meanwhile", "later"]
    assert len(answers_to(fake, missed)) <= 1
    assert answers_to(fake, live) == ["echo: live meanwhile"]
    answered = replied_to(fake, DM_CHANNEL_ID)
    assert answered == sorted(set(answered)) and len(answered) == len(fake_llm.requests)


async def test_quiet_chats_and_chats_not_allowed_are_not_fetched(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    allowed = {"allowed_channels": [str(CHANNEL_ID)]}
    async with watching_all_logs(), running_fake_discord() as fake:
        async with running_gateway_on(fake, tmp_path, fake_llm, **allowed) as first_run:
            await fake.dispatch_message(DM_CHANNEL_ID, "hello")
            await fake.dispatch_message(CHANNEL_ID, f"{MENTION} in the channel")
            await fake.dispatch_message(THREAD_ID, f"{MENTION} in its thread")
            # Alice is allowed, but not in a place that is not: silence there.
            await fake.dispatch_message(FREE_CHANNEL_ID, f"{MENTION} elsewhere")
            await first_run.wait_received(3)
        # Two days later the DM has been quiet all along.
        backdate_chat(first_run.gateway.config.database_path, ALICE_DM, hours=48)
        in_dm = fake.post_while_away(DM_CHANNEL_ID, "in a DM quiet for two days")
        elsewhere = fake.post_while_away(FREE_CHANNEL_ID, f"{MENTION} in a place not allowed")
        fake.post_while_away(CHANNEL_ID, f"{MENTION} missed in the channel")
        in_thread = fake.post_while_away(THREAD_ID, f"{MENTION} missed in the thread")
        async with running_gateway_on(fake, tmp_path, fake_llm, **allowed) as second_run:
            # Live messages wait for the catch-up: once this one is in, it is over.
            live = await fake.dispatch_message(CHANNEL_ID, f"{MENTION} live")
            await second_run.wait_received(3)

    assert {channel for channel, _ in fake.history_requests} == {CHANNEL_ID, THREAD_ID}
    assert answers_to(fake, in_dm) == [] and answers_to(fake, elsewhere) == []
    assert answers_to(fake, in_thread) == ["echo: Alice: missed in the thread"]
    assert answers_to(fake, live) == ["echo: Alice: live"]
    asked = [r for r in fake_llm.requests if user_texts(r)[-1] == "Alice: live"]
    assert user_texts(asked[0])[-2:] == ["Alice: missed in the channel", "Alice: live"]
