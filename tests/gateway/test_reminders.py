"""Reminders (docs/design.md#tools): set through a real turn, delivered to the same chat,
exactly once, across restarts and while their platform is away.

The reminders' clock is shifted instead of waiting: a gateway whose clock runs two hours
ahead finds a one-hour reminder overdue at start; one whose clock runs a few seconds
behind sees "in 2 seconds" as the future while apscheduler (real time) fires it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sqlite3
import time
from argparse import Namespace
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from adapters.base import DeliveryError, OutboundMessage
from gateway.app import Gateway
from gateway.config.schema import Config
from gateway.ops.admin import run_sessions_command
from gateway.scheduling.reminders import REMINDER_PREFIX
from gateway.store import Reminder, SQLiteStore
from gateway.store.schema import MIGRATIONS, SCHEMA_VERSION
from tests.fakes.llm_server import FakeLLM, Reply
from tests.harness import RecordingAdapter, make_config

HOUR = 3600.0


@contextlib.asynccontextmanager
async def gateway_at(
    config: Config, *adapters: RecordingAdapter, clock: Callable[[], float] = time.time
) -> AsyncIterator[Gateway]:
    """A running gateway whose reminders read ``clock`` from the start."""
    gateway = Gateway(config, list(adapters))
    gateway.scheduler.reminders.clock = clock
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop(drain_seconds=5)


def shifted(seconds: float) -> Callable[[], float]:
    return lambda: time.time() + seconds


def tool_results(llm: FakeLLM) -> list[str]:
    """What the tools answered, as the model saw them in the latest request."""
    return [m["content"] for m in llm.requests[-1].messages if m["role"] == "tool"]


def schedule(when: str, text: str, **extra: Any) -> Reply:
    return Reply(tool_calls=[("schedule_message", {"when": when, "text": text, **extra})])


async def test_a_reminder_set_in_a_turn_arrives_in_the_same_chat_and_thread(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter("telegram")
    allowed = {"allowed_users": ["u1"], "allowed_chats": ["-100"]}
    config = make_config(tmp_path, fake_llm, platforms={"telegram": allowed})
    async with gateway_at(config, adapter, clock=shifted(-5)) as gateway:
        fake_llm.script(schedule("in 2 seconds", "stretch your legs"), Reply("Will do."))
        await adapter.say(
            "remind me in 2 seconds to stretch",
            chat_id="-100",
            thread_id="7",
            chat_type="group",
        )
        assert await adapter.wait_sent(2) == ["Will do.", REMINDER_PREFIX + "stretch your legs"]
        await gateway.lanes.wait_idle(5)
        reminder = adapter.sent[1]
        assert (reminder.platform, reminder.chat_id, reminder.thread_id) == (
            "telegram",
            "-100",
            "7",
        )
        assert "Reminder #1 set for" in tool_results(fake_llm)[0]
        assert await gateway.store.scheduling.pending_reminders() == []

        # The model sees that it reminded: the reminder is an assistant row of the chat.
        fake_llm.script(Reply("You're welcome."))
        await adapter.say("thanks!", chat_id="-100", thread_id="7", chat_type="group")
        await adapter.wait_sent(3)
    last_request = fake_llm.requests[-1].messages
    assert {"role": "assistant", "content": REMINDER_PREFIX + "stretch your legs"} in last_request


async def test_a_reminder_survives_a_restart_and_is_delivered_exactly_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, fake_llm)
    first = RecordingAdapter()
    async with gateway_at(config, first):
        fake_llm.script(schedule("in 1 hour", "call mum"), Reply("Reminder set."))
        await first.say("remind me in an hour to call mum")
        assert await first.wait_sent(1) == ["Reminder set."]
    assert "in 1 hour" in tool_results(fake_llm)[0]

    # Two hours later the gateway comes back: the reminder is overdue and goes out at once.
    second = RecordingAdapter()
    async with gateway_at(config, second, clock=shifted(2 * HOUR)) as gateway:
        [text] = await second.wait_sent(1)
        await gateway.lanes.wait_idle(5)
        assert await gateway.store.scheduling.pending_reminders() == []
    assert text.startswith(REMINDER_PREFIX + "call mum")
    assert "I was offline then" in text

    # And never again: a third start delivers nothing before answering a new message.
    third = RecordingAdapter()
    async with gateway_at(config, third, clock=shifted(3 * HOUR)):
        fake_llm.script(Reply("Hello again."))
        await third.say("hi")
        await third.wait_sent(1)
    assert third.texts() == ["Hello again."]


async def test_a_reminder_for_a_platform_that_is_not_running_waits_for_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, fake_llm, platforms={"telegram": {"allowed_users": ["u1"]}})
    telegram = RecordingAdapter("telegram")
    async with gateway_at(config, telegram):
        fake_llm.script(schedule("in 1 hour", "water the plants"), Reply("OK."))
        await telegram.say("remind me", chat_id="55")
        await telegram.wait_sent(1)

    console = RecordingAdapter()  # telegram is down while the reminder is due
    async with gateway_at(config, console, clock=shifted(2 * HOUR)) as gateway:
        await gateway.lanes.wait_idle(5)  # the overdue reminder had its attempt
        [pending] = await gateway.store.scheduling.pending_reminders()
    assert pending.text == "water the plants"
    assert console.sent == []

    telegram_again = RecordingAdapter("telegram")
    async with gateway_at(config, telegram_again, clock=shifted(2 * HOUR)):
        [text] = await telegram_again.wait_sent(1)
    assert text.startswith(REMINDER_PREFIX + "water the plants")
    assert telegram_again.sent[0].chat_id == "55"


class RefusesFirstReminder(RecordingAdapter):
    """A platform that fails the first reminder it is asked to send (after its retries)."""

    refused = 0

    async def send(self, message: OutboundMessage) -> list[str]:
        if message.text.startswith(REMINDER_PREFIX) and not self.refused:
            self.refused += 1
            raise DeliveryError("502 from the platform", platform=self.platform)
        return await super().send(message)


async def test_a_refused_delivery_is_retried_and_arrives_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RefusesFirstReminder()
    async with gateway_at(make_config(tmp_path, fake_llm), adapter, clock=shifted(-5)) as gateway:
        gateway.scheduler.reminders.retry_seconds = 0.01
        fake_llm.script(schedule("in 1 second", "drink water"), Reply("Sure."))
        await adapter.say("remind me to drink water")
        assert await adapter.wait_sent(2) == ["Sure.", REMINDER_PREFIX + "drink water"]
        await gateway.lanes.wait_idle(5)
        assert await gateway.store.scheduling.pending_reminders() == []
    assert adapter.refused == 1


async def test_unusable_times_are_refused_to_the_model_and_nothing_is_stored(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter()
    async with gateway_at(make_config(tmp_path, fake_llm), adapter) as gateway:
        fake_llm.script(
            schedule("2001-01-01T07:00", "too late"),
            schedule("whenever", "vague"),
            schedule("07:00", "bad zone", timezone="Mars/Olympus"),
            schedule("in 2 years", "too far"),
            schedule("in 5 minutes", ""),
            Reply("Sorry, I could not set that."),
        )
        await adapter.say("remind me sometime")
        await adapter.wait_sent(1)
        assert await gateway.store.scheduling.pending_reminders() == []
    refusals = tool_results(fake_llm)
    assert len(refusals) == 5
    assert all(r.startswith("Error: ") for r in refusals)
    assert "not in the future" in refusals[0]
    assert "could not read" in refusals[1]
    assert "unknown time zone" in refusals[2]
    assert "too far ahead" in refusals[3]
    assert "'text' is required" in refusals[4]


async def test_the_confirmation_names_the_time_in_the_zone_asked_for(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter()
    async with gateway_at(make_config(tmp_path, fake_llm), adapter) as gateway:
        fake_llm.script(schedule("07:00", "stand-up", timezone="America/New_York"), Reply("Set."))
        await adapter.say("remind me at 7 New York time")
        await adapter.wait_sent(1)
        [reminder] = await gateway.store.scheduling.pending_reminders()
    [confirmation] = tool_results(fake_llm)
    assert "07:00 (America/New_York)" in confirmation
    assert 0 < reminder.due_at - time.time() <= 24 * HOUR


async def test_opening_a_version_2_database_adds_the_reminders(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:  # written by the release before reminders
        db.executescript(MIGRATIONS[0][1] + MIGRATIONS[1][1] + "\nPRAGMA user_version=2;")
        db.execute(
            "INSERT INTO sessions(id, session_key, platform, created_at, updated_at)"
            " VALUES ('s1', 'console:t', 'console', 0, 0)"
        )
        db.execute(
            "INSERT INTO messages(session_id, role, content, created_at, token_count)"
            " VALUES ('s1', 'user', 'old words', 0, 40)"
        )
    async with SQLiteStore(path) as store:
        assert await store.schema_version() == SCHEMA_VERSION
        assert [m.message["content"] for m in await store.conversation.load_active("s1")] == [
            "old words"
        ]
        [idle] = await store.scheduling.idle_sessions(idle_since=10, min_tokens=40)
        assert (idle.session_key, idle.active_tokens) == ("console:t", 40)
        stored = await store.scheduling.add_reminder(
            Reminder("console:t", "console", "t", "hi", 99.0)
        )
        assert await store.scheduling.pending_reminders() == [stored]
        assert await store.scheduling.mark_reminder_sent(stored.id)
        assert not await store.scheduling.mark_reminder_sent(stored.id)  # at most once
        assert await store.scheduling.pending_reminders() == []


# -- `nightowl sessions forget` takes the chat's reminders with it ---------------------------


async def forget(config: Config, key: str) -> str:
    """`nightowl sessions forget KEY --yes`, as the command line runs it; what it printed."""
    out, err = io.StringIO(), io.StringIO()
    args = Namespace(action="forget", key=key, yes=True)
    assert await run_sessions_command(config, args, out=out, err=err) == 0, err.getvalue()
    assert err.getvalue() == ""  # the scrub reached the WAL too
    return out.getvalue()


def file_bytes(config: Config) -> bytes:
    """Everything on disk: the database, its WAL and shared-memory index."""
    return b"".join(path.read_bytes() for path in config.data_dir.iterdir() if path.is_file())


async def test_a_pending_reminder_forgotten_beside_a_running_gateway_never_fires(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, fake_llm)
    adapter = RecordingAdapter()
    async with gateway_at(config, adapter, clock=shifted(-5)) as gateway:
        await adapter.say("hello")
        await adapter.wait_sent(1)
        await gateway.lanes.wait_idle(5)
        # The chat is busy (a turn in progress) when its reminder comes due: the reminder
        # is armed, fires and waits in the chat's lane while the operator forgets the chat.
        turn_in_progress = asyncio.Event()
        gateway.lanes.submit("console:t", turn_in_progress.wait)
        reminders = gateway.scheduler.reminders
        secret = "the vault code is 4711"
        await reminders.add(Reminder("console:t", "console", "t", secret, time.time() - 1))

        said = await forget(config, "console:t")
        assert "Forgot console:t: 3 messages erased, 1 pending reminder cancelled." in said
        assert b"4711" not in file_bytes(config)

        # A reminder set after the forget, due after the forgotten one, comes through the
        # same lane behind it: once it is sent, the forgotten one had its turn.
        await reminders.add(Reminder("console:t", "console", "t", "stand up", time.time()))
        turn_in_progress.set()
        assert await adapter.wait_sent(2) == ["echo: hello", REMINDER_PREFIX + "stand up"]
        await gateway.lanes.wait_idle(5)
        assert await gateway.store.scheduling.pending_reminders() == []
    assert b"4711" not in file_bytes(config)

    again = RecordingAdapter()  # and not after a restart either
    async with gateway_at(config, again, clock=shifted(2 * HOUR)):
        await again.say("hi")
        assert await again.wait_sent(1) == ["echo: hi"]


async def test_a_reminder_of_a_forgotten_chat_is_not_sent_at_the_next_start(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, fake_llm)
    first = RecordingAdapter()
    async with gateway_at(config, first):
        fake_llm.script(schedule("in 1 hour", "call the bank about card 5555"), Reply("Set."))
        await first.say("remind me in an hour to call the bank")
        await first.wait_sent(1)

    said = await forget(config, "console:t")  # the gateway is down
    assert "1 pending reminder cancelled" in said
    assert b"5555" not in file_bytes(config)

    # Two hours later: the reminder would be overdue, and used to go out at once into a
    # fresh conversation.
    second = RecordingAdapter()
    async with gateway_at(config, second, clock=shifted(2 * HOUR)):
        await second.say("hi")
        assert await second.wait_sent(1) == ["echo: hi"]
    assert "5555" not in fake_llm.requests[-1].all_text
    assert b"5555" not in file_bytes(config)


async def test_a_chat_with_only_a_reminder_left_can_still_be_forgotten(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # A database where an older nightowl forgot the chat's messages but not its reminder.
    config = make_config(tmp_path, fake_llm)
    async with SQLiteStore(config.database_path) as store:
        await store.scheduling.add_reminder(
            Reminder("console:t", "console", "t", "pick up 5555", time.time() + HOUR)
        )
    assert "0 messages erased, 1 pending reminder cancelled" in await forget(config, "console:t")
    assert b"5555" not in file_bytes(config)
