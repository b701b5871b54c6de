"""What the dashboard charts is written by the conversation's own commits, on both
backends: a row per turn, a row per compression, erased by forget with the rest."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.store import (
    AnchorRecord,
    CompressionCommit,
    CompressionMark,
    NewMessage,
    SessionOrigin,
    UsageTotals,
)

ORIGIN = SessionOrigin("console:t", "console", "t")
MARK = CompressionMark("gateway_hygiene", "llm_summary", 7000, 1500, 40, 9)


def row(role: str, content: str) -> NewMessage:
    return NewMessage({"role": role, "content": content}, 5)


@pytest.fixture
async def store(backend_store: Any) -> Any:
    return backend_store


async def test_a_turn_and_a_compaction_leave_their_records(store: Any) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    anchor = AnchorRecord(1234, 56, -1, "fp", "route")
    ids = await store.conversation.commit_turn(
        session.id,
        [row("user", "the cabin code is 4711"), row("assistant", "noted")],
        anchor=anchor,
        usage=UsageTotals(2000, 56, 300, 0, 2),
    )
    await store.conversation.commit_turn(session.id, [row("user", "observed chatter")])
    [turn] = await store.dashboard.turn_history(session.id)
    assert turn.prompt_tokens == 1234 and turn.usage.prompt_tokens == 2000
    assert turn.usage.cache_read_tokens == 300 and turn.usage.requests == 2
    summary = row("user", "[CONTEXT COMPACTION] summary")
    await store.conversation.archive_and_compress(
        session.id, CompressionCommit(active=[ids[1], summary], mark=MARK)
    )
    [compression] = await store.dashboard.compressions(session.id)
    assert compression.mark == MARK and compression.at >= turn.at
    listed = await store.dashboard.messages(session.id)
    assert [(m.message["content"], m.active) for m in listed] == [
        ("sys", False),
        ("the cabin code is 4711", False),
        ("noted", True),
        ("observed chatter", False),
        ("[CONTEXT COMPACTION] summary", True),
    ]
    assert [m.id for m in await store.dashboard.messages(session.id, before=ids[1], limit=1)] == [
        ids[0]
    ]
    totals = await store.dashboard.totals(since=0)
    assert (totals.turns, totals.prompt_tokens, totals.completion_tokens) == (1, 2000, 56)
    assert totals.turns_by_platform == {"console": 1}
    assert totals.compressions_by_trigger == {"gateway_hygiene": 1}
    [overview] = await store.dashboard.sessions()
    assert (overview.active_messages, overview.archived_messages) == (2, 3)
    assert overview.anchor_tokens is None  # the compression cleared the anchor
    await store.operator.forget("console:t")
    assert await store.dashboard.turn_history(session.id) == []
    assert await store.dashboard.compressions(session.id) == []
    assert (await store.dashboard.totals(since=0)).turns == 0


async def test_a_rotation_records_its_compaction_on_the_child(store: Any) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(session.id, [row("user", "hi")], usage=UsageTotals())
    child, _ = await store.conversation.rotate(session.id, [row("system", "sys")], mark=MARK)
    assert [c.session_id for c in await store.dashboard.compressions(child.id)] == [child.id]
    assert len(await store.dashboard.turn_history(child.id)) == 1  # the parent's, in lineage
