"""Session hygiene before every turn (SPEC H1–H8), seen from the chat: /status, replies,
notices, and what the database keeps."""

from __future__ import annotations

from pathlib import Path

from tests import db
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.harness import (
    RecordingAdapter,
    is_summary_request,
    make_config,
    running_gateway,
    summarizing,
    turns_done,
)

GROUP = {"chat_id": "-7", "chat_type": "group", "user_name": "Ann"}


def config_for(tmp_path: Path, llm: FakeLLM, window: int = 8_192, **compression):
    return make_config(
        tmp_path,
        llm,
        model={"context_length": window, "max_output_tokens": 512},
        platforms={"telegram": {"allowed_chats": ["-7"], "allowed_users": ["u1"]}},
        compression=compression,
    )


async def status(adapter: RecordingAdapter) -> str:
    count = len(adapter.sent)
    await adapter.say("/status", **GROUP)
    return (await adapter.wait_sent(count + 1))[-1]


async def test_the_token_source_follows_what_is_known(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = config_for(tmp_path, fake_llm)
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("hello", **GROUP)
        await adapter.wait_sent(1)
        assert "%), by the server's last count" in await status(adapter)  # nothing since
        await adapter.say("overnight chatter", addressed=False, **GROUP)
        await turns_done(gateway)
        # The server's count of the last request, and an estimate of the rows since.
        assert "%), by the server's last count" in await status(adapter)
    restarted = RecordingAdapter("telegram")
    async with running_gateway(config, restarted):
        # After a restart only the persisted anchor is left.
        assert "%), by the server's last count" in await status(restarted)
    # The transcript is rewritten elsewhere (by hand, or another tool).
    db.execute(tmp_path, "UPDATE messages SET active = 0, compacted = 1 WHERE role = 'assistant'")
    again = RecordingAdapter("telegram")
    async with running_gateway(config, again):
        assert "%), estimated" in await status(again)  # the anchor's row is gone


async def test_a_night_of_chatter_is_compressed_before_the_agent_runs(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.context_window = 8_192
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config_for(tmp_path, fake_llm), adapter) as gateway:
        await adapter.say("good evening", **GROUP)
        await adapter.wait_sent(1)
        for i in range(70):  # ~7,000 tokens arrive while nobody talks to the bot
            await adapter.say(f"note {i} " + "n" * 400, addressed=False, **GROUP)
        await turns_done(gateway)
        await adapter.say("good morning, what happened?", **GROUP)
        await adapter.wait_sent(2)
    summaries = [r for r in fake_llm.requests if is_summary_request(r)]
    answer = [r for r in fake_llm.requests if not is_summary_request(r)][-1]
    assert summaries, "hygiene should have summarized the night"
    assert answer.prompt_tokens + answer.max_tokens <= 8_192
    assert any(
        m["content"].startswith("[CONTEXT COMPACTION]")
        for m in answer.messages
        if isinstance(m["content"], str)
    )
    notes = [row for row in db.stored_messages(tmp_path) if row[0].startswith("Ann: note")]
    assert len(notes) == len({row[0] for row in notes}) == 70  # every one kept, once
    assert all(row[1:] in ((1, 0), (0, 1)) for row in notes)


async def test_the_message_valve_compresses_regardless_of_tokens(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    config = config_for(tmp_path, fake_llm, window=1_000_000, hygiene_hard_message_limit=30)
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config, adapter) as gateway:
        for i in range(29):
            await adapter.say(f"small {i} " + "s" * 200, addressed=False, **GROUP)
        await turns_done(gateway)
        await adapter.say("now?", **GROUP)  # 1 system + 29 + this one = 31 >= 30
        await adapter.wait_sent(1)
    assert any(is_summary_request(r) for r in fake_llm.requests)
    rows = db.stored_messages(tmp_path)
    assert sum(1 for row in rows if row[1] == 0) >= 5  # archived...
    smalls = [row[0] for row in rows if "small " in row[0]]
    assert len(smalls) == len(set(smalls)) == 29  # ...and every message there once


async def test_short_sessions_are_never_touched(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config_for(tmp_path, fake_llm, window=4_096), adapter):
        await adapter.say("x" * 16_000, **GROUP)  # 3 rows, far past 85% of the window
        await adapter.wait_sent(1)
    assert not any(is_summary_request(r) for r in fake_llm.requests)
    assert all(row[1] == 1 for row in db.stored_messages(tmp_path))


async def test_a_failing_summary_changes_nothing_tells_once_and_compress_retries(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    failing = {"on": True}

    def respond(request: Recorded) -> Reply:
        if is_summary_request(request) and failing["on"]:
            return Reply("cut off", finish_reason="length")
        return Reply("## Goal\nok") if is_summary_request(request) else Reply("answer")

    fake_llm.responder = respond
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config_for(tmp_path, fake_llm, window=16_384), adapter) as gateway:
        for i in range(40):
            await adapter.say(f"note {i} " + "n" * 1_500, addressed=False, **GROUP)
        await turns_done(gateway)
        before = db.stored_messages(tmp_path)
        await adapter.say("morning!", **GROUP)
        await adapter.wait_sent(2)
        notice, answer = adapter.texts()[-2:]
        assert "/compress" in notice and "/new" in notice and answer == "answer"
        assert all(row[1] == 1 for row in db.stored_messages(tmp_path)[: len(before)])  # unchanged
        assert "left (after summary_length)" in await status(adapter)

        await adapter.say("still there?", **GROUP)
        await adapter.wait_sent(4)
        assert adapter.texts()[-1] == "answer"  # no second notice while the cooldown holds

        failing["on"] = False
        await adapter.say("/compress", **GROUP)
        await adapter.wait_sent(5)
        assert adapter.texts()[-1].startswith("Compressed: ")  # the cooldown did not block it
        assert "Cooldown: none" in await status(adapter)
        await turns_done(gateway)
