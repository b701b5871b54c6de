"""Regressions from review: the ways a message could have been lost, cut, left
unanswered, answered twice or miscounted — each pinned by what a user would notice."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.base import DeliveryError
from agent.tools import Tool, ToolContext
from gateway.app import Gateway
from gateway.store import NewMessage, SessionOrigin, SQLiteStore
from tests import db
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.harness import (
    HeldAnswers,
    RecordingAdapter,
    is_summary_request,
    make_config,
    running_gateway,
    summarizing,
    turns_done,
)
from tests.waiting import CEILING

SMALL = {"context_length": 16_000, "max_output_tokens": 1_000}


async def test_messages_queued_during_a_turn_survive_the_compaction_that_absorbs_them(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    blocking = HeldAnswers(matching=lambda request: "BLOCK" in request.last_user_text)
    fake_llm.responder = summarizing(blocking.respond)
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm, model=SMALL), adapter) as gateway:
        for i in range(6):
            await adapter.say(f"fact: early {i}\n" + "e" * 3_000)
            await adapter.wait_sent(i + 1)
        await adapter.say("BLOCK please")
        await blocking.wait_held()
        for i in range(12):  # these wait in the inbox; hygiene will summarize them
            await adapter.say(f"fact: queued {i}\n" + "q" * 3_000 + f" MARKER{i:02d}")
        blocking.release()
        await adapter.wait_sent(8)
        await turns_done(gateway)
    assert any(is_summary_request(r) for r in fake_llm.requests)
    for i in range(12):  # every one kept in full, in the archive if not in the context
        assert (
            db.value(
                tmp_path, "SELECT count(*) FROM messages WHERE content LIKE ?", f"%q MARKER{i:02d}"
            )
            >= 1
        )


async def test_a_huge_paste_is_stored_whole_and_answered_with_room_to_reply(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.context_window = 16_000
    fake_llm.responder = summarizing()
    paste = "please read this log:\n" + "log line 123\n" * 8_000
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm, model=SMALL), adapter):
        for i in range(3):
            await adapter.say(f"hello {i}")
            await adapter.wait_sent(i + 1)
        await adapter.say(paste)
        await adapter.wait_sent(4)
    assert db.value(
        tmp_path, "SELECT max(length(content)) FROM messages WHERE role = 'user'"
    ) == len(paste)
    answer = [r for r in fake_llm.requests if not is_summary_request(r)][-1]
    assert answer.max_tokens >= 256  # a truncated copy leaves room for a real answer
    assert answer.prompt_tokens + answer.max_tokens <= 16_000


async def test_a_stop_right_after_compaction_still_answers_after_restart(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    started = asyncio.Event()

    def answer(request: Recorded) -> Reply:
        if "LAST" in request.last_user_text and not started.is_set():
            started.set()
            return Reply(hang=True)
        return Reply("answered")

    fake_llm.responder = summarizing(answer)
    config = make_config(tmp_path, fake_llm, model=SMALL)
    adapter = RecordingAdapter()
    gateway = Gateway(config, [adapter])
    await gateway.start()
    for i in range(12):
        await adapter.say(f"fact: early {i}\n" + "e" * 3_000)
        await adapter.wait_sent(i + 1)
    await adapter.say("LAST question " + "z" * 16_000)  # hygiene compresses, then the call hangs
    await asyncio.wait_for(started.wait(), CEILING)
    await gateway.stop(drain_seconds=0.2)

    restarted = RecordingAdapter()
    async with running_gateway(config, restarted):
        assert await restarted.wait_sent(1) == ["answered"]
    last = fake_llm.requests[-1]
    lasts = [m for m in last.messages if "LAST question" in str(m.get("content"))]
    assert len(lasts) == 1  # answered once, and its message is in the context once
    assert db.value(tmp_path, "SELECT count(*) FROM inbox") == 0


async def test_new_during_a_turn_takes_effect_after_the_reply(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    slow = HeldAnswers(matching=lambda request: "slow" in request.last_user_text)
    fake_llm.responder = slow.respond
    adapter = RecordingAdapter()
    config = make_config(tmp_path, fake_llm, compression={"in_place": False})
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("fact: before the reset")
        await adapter.wait_sent(1)
        await adapter.say("slow one")
        await slow.wait_held()
        await adapter.say("/new")
        slow.release()
        await adapter.wait_sent(3)
        assert adapter.texts()[1:] == [
            "ok",
            "Started a new conversation. The previous one is archived, not deleted.",
        ]
        await adapter.say("what do you remember?")
        await adapter.wait_sent(4)
        await turns_done(gateway)
    assert "fact: before the reset" not in fake_llm.requests[-1].all_text
    assert db.session_ends(tmp_path) == ["reset", None]


async def test_a_cancel_while_a_write_begins_does_not_jam_the_store(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "state.db") as store:
        origin = SessionOrigin("console:t", "console", "t")
        session = await store.conversation.start_session(
            origin, "m", NewMessage({"role": "system", "content": "s"}, 1)
        )
        for _ in range(20):  # cancel at every early point a write can be at
            task = asyncio.create_task(
                store.conversation.commit_turn(
                    session.id, [NewMessage({"role": "user", "content": "x"}, 1)]
                )
            )
            await asyncio.sleep(0)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await store.conversation.commit_turn(
            session.id, [NewMessage({"role": "user", "content": "after"}, 1)]
        )
        contents = [m.message["content"] for m in await store.conversation.load_active(session.id)]
    assert contents[-1] == "after"


class Flaky(RecordingAdapter):
    failing = False

    async def send(self, message):  # type: ignore[no-untyped-def]
        if self.failing:
            raise DeliveryError("outage", platform=self.platform, chat_id=message.chat_id)
        return await super().send(message)


async def test_a_redelivered_reply_threads_to_its_own_question(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = Flaky("telegram")
    config = make_config(tmp_path, fake_llm, platforms={"telegram": {"allowed_users": ["u1"]}})
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("first", platform_message_id="100")
        await adapter.wait_sent(1)
        adapter.failing = True
        await adapter.say("second", platform_message_id="200")
        await turns_done(gateway)
        adapter.failing = False
        await gateway.runner.redeliver_pending("telegram:t")
    assert [(m.text, m.reply_to_message_id) for m in adapter.sent] == [
        ("echo: first", "100"),
        ("echo: second", "200"),
    ]


async def test_status_after_a_failed_call_does_not_claim_a_stale_provider_count(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async def fetch_log(arguments: dict, context: ToolContext) -> str:
        return "x" * 8_000  # ~2,000 tokens the first request did not carry

    tool = Tool("fetch_log", "the log", {"type": "object", "properties": {}}, fetch_log)
    fake_llm.script(Reply(tool_calls=[("fetch_log", {})]), Reply(status=429))
    adapter = RecordingAdapter()
    config = make_config(tmp_path, fake_llm)
    async with running_gateway(config, adapter, extra_tools=(tool,)):
        await adapter.say("get the log")
        await adapter.wait_sent(1)
        await adapter.say("/status")
        status = (await adapter.wait_sent(2))[-1]
    tokens = int(status.split("Context: ")[1].split(" ")[0].replace(",", ""))
    assert tokens > fake_llm.requests[0].prompt_tokens + 1_500


async def test_stored_counts_belong_to_their_own_rows(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm, model=SMALL), adapter):
        for i in range(30):
            await adapter.say(f"fact: {i}\n" + "w" * 1_500)
            await adapter.wait_sent(i + 1)
    rows = db.rows(tmp_path, "SELECT content, token_count FROM messages WHERE role = 'assistant'")
    for content, tokens in rows:  # every count is its own row's, not a recycled one
        assert tokens <= len(content) // 2 + 10, (content[:30], tokens)
