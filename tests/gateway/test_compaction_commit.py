"""How a compression lands: in place (one session, archived rows) or by rotation, and
what /compress, /context and /usage tell the user about it."""

from __future__ import annotations

from pathlib import Path

from adapters.base import Attachment
from tests import db
from tests.fakes.llm_server import FakeLLM
from tests.harness import (
    RecordingAdapter,
    conversation_of,
    is_summary_request,
    make_config,
    running_gateway,
    summarizing,
)


async def chat_a_while(adapter: RecordingAdapter, turns: int, *, first: int = 1) -> None:
    for i in range(turns):
        await adapter.say(f"fact: item {i} is important.\n" + "w" * 1_500)
        await adapter.wait_sent(i + first)


async def test_compress_in_place_keeps_one_session_and_archives(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter()
    payloads: list[dict] = []
    async with running_gateway(make_config(tmp_path, fake_llm), adapter) as gateway:
        gateway.events.subscribe(["session:compress"], lambda e, p: payloads.append(p))
        await chat_a_while(adapter, 30)
        await adapter.say("/compress item 3")
        (done,) = (await adapter.wait_sent(31))[-1:]
        assert done.startswith("Compressed: 61 → ")
        await adapter.say("what was item 3?")
        await adapter.wait_sent(32)
        await gateway.events.drain()
    (payload,) = payloads
    assert payload["in_place"] is True and payload["old_session_id"] == ""
    assert payload["trigger_source"] == "manual" and payload["method"] == "llm_summary"
    assert payload["messages_after"] < payload["messages_before"]
    assert db.value(tmp_path, "SELECT count(*) FROM sessions") == 1
    [(archived, active_count, total)] = db.rows(
        tmp_path,
        "SELECT sum(active = 0 AND compacted = 1), sum(active = 1), count(*) FROM messages",
    )
    # The rows that left the context are archived; the rest stay as they are. The only
    # new rows are the summary, the system prompt with its one-time compression note, and
    # the turn after: nothing is copied.
    assert archived == payload["messages_before"] - (payload["messages_after"] - 2)
    assert active_count == payload["messages_after"] + 2
    assert total == payload["messages_before"] + 2 + 2
    summary_call = next(r for r in fake_llm.requests if is_summary_request(r))
    assert "item 3" in summary_call.all_text.split("preserve as much detail as possible about:")[1]
    # The next turn starts from exactly what was committed.
    active = [
        content
        for (content,) in db.rows(
            tmp_path, "SELECT content FROM messages WHERE active = 1 ORDER BY seq"
        )
    ]
    sent = [m["content"] for m in conversation_of(fake_llm.requests[-1])]
    assert sent == active[: len(sent)]
    assert sum(str(content).startswith("[CONTEXT COMPACTION]") for content in sent) == 1
    assert "fact: item 3 is important" in "\n".join(map(str, sent))


async def test_rotation_opens_a_child_session_that_carries_on(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter()
    payloads: list[dict] = []
    config = make_config(tmp_path, fake_llm, compression={"in_place": False})
    async with running_gateway(config, adapter) as gateway:
        gateway.events.subscribe(["session:compress"], lambda e, p: payloads.append(p))
        await chat_a_while(adapter, 30)
        old_id = db.value(tmp_path, "SELECT id FROM sessions")
        await adapter.say("/compress")
        await adapter.wait_sent(31)
        await adapter.say("and now?")
        await adapter.wait_sent(32)
        await gateway.events.drain()
    (payload,) = payloads
    assert payload["in_place"] is False and payload["old_session_id"] == old_id
    sessions = db.rows(
        tmp_path, "SELECT id, parent_session_id, end_reason FROM sessions ORDER BY created_at"
    )
    assert sessions[0] == (old_id, None, "compression")
    assert (
        sessions[1][1] == old_id
        and sessions[1][2] is None
        and sessions[1][0] == payload["session_id"]
    )
    # The old session's rows are untouched; the conversation goes on in the child.
    old_active = "SELECT count(*) FROM messages WHERE session_id = ? AND active = 1"
    assert db.value(tmp_path, old_active, old_id) == 61
    last = fake_llm.requests[-1]
    assert [m["content"] for m in last.messages][-1] == "and now?"
    assert any(str(m["content"]).startswith("[CONTEXT COMPACTION]") for m in last.messages)


async def test_context_and_usage_describe_the_session(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await adapter.say("/compress")
        assert "Nothing to compress yet" in (await adapter.wait_sent(1))[-1]
        adapter.sent.clear()
        await chat_a_while(adapter, 30)
        await adapter.say("/context")
        context = (await adapter.wait_sent(31))[-1]
        assert "conversation" in context and "no summary" not in context
        await adapter.say("/compress")
        await adapter.wait_sent(32)
        await adapter.say("/context summary")
        summary = (await adapter.wait_sent(33))[-1]
        assert (
            "summary " in summary
            and "## Critical Context" in summary
            and "fact: item 1 is" in summary
        )
        await adapter.say("/usage")
        usage = (await adapter.wait_sent(34))[-1]
    assert usage.startswith("This conversation's replies: 30 model calls")


async def test_images_leave_the_database_with_their_rows_and_the_summary_names_them(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter()
    config = make_config(tmp_path, fake_llm, model={"supports_vision": True})
    photo = Attachment("image", "image/png", data=b"\x89PNG a photo of the whiteboard")
    async with running_gateway(config, adapter):
        await chat_a_while(adapter, 2)  # the first exchange stays in the head
        await adapter.say("here is the whiteboard", attachments=(photo,))
        await adapter.wait_sent(3)
        await chat_a_while(adapter, 28, first=4)
        await adapter.say("/compress")
        await adapter.wait_sent(32)
    summary_call = next(r for r in fake_llm.requests if is_summary_request(r))
    assert "here is the whiteboard [1 image(s) attached]" in summary_call.all_text
    [(content, parts)] = db.rows(
        tmp_path, "SELECT content, parts FROM messages WHERE content LIKE 'here is the whiteboard%'"
    )
    assert parts is None  # the image bytes are gone with the row's place in the context
    assert content.endswith(
        "[1 image(s) not kept once this part of the conversation was summarized]"
    )
