"""Memory notes in the store (docs/design.md#memory), and search across a chat's sessions
(docs/design.md#search-across-sessions), on every backend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.store import (
    InboxEntry,
    MemoryOwner,
    NewMemory,
    NewMessage,
    SessionOrigin,
    SQLiteStore,
)

ANN = MemoryOwner("user", "telegram:42")
GROUP = MemoryOwner("chat", "telegram:-100")
OTHER = MemoryOwner("chat", "telegram:-200")


@pytest.fixture
async def store(backend_store: Any) -> Any:
    """Each test below runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_store


def row(role: str, content: str) -> NewMessage:
    return NewMessage({"role": role, "content": content}, 5)


async def test_a_note_is_kept_once_and_used_again(store: Any) -> None:
    first, new = await store.memory.remember(NewMemory(ANN, "Allergic to peanuts", "s1", "77"))
    again, repeated = await store.memory.remember(NewMemory(ANN, "allergic to PEANUTS"))
    elsewhere, other = await store.memory.remember(NewMemory(GROUP, "Allergic to peanuts"))
    assert new and not repeated and other
    assert again.id == first.id and again.last_used_at >= first.last_used_at
    assert (first.session_id, first.platform_message_id, first.learned_by) == ("s1", "77", "tool")
    assert elsewhere.id != first.id


async def test_a_replaced_note_is_archived_and_still_found(store: Any) -> None:
    old, _ = await store.memory.remember(NewMemory(GROUP, "staging runs on db-2"))
    new, _ = await store.memory.remember(NewMemory(GROUP, "staging runs on db-3"), replaces=old.id)
    assert [e.id for e in await store.memory.memories([GROUP])] == [new.id]
    archived = await store.memory.get_memory(old.id)
    assert archived.archived_at is not None and archived.replaced_by == new.id
    found = await store.memory.search_memories([GROUP], "staging db", limit=5)
    assert [e.id for e in found] == [new.id, old.id]  # the current one first
    assert await store.memory.search_memories([OTHER, ANN], "staging", limit=5) == []


async def test_a_note_of_another_owner_is_never_replaced(store: Any) -> None:
    theirs, _ = await store.memory.remember(NewMemory(ANN, "likes tea"))
    await store.memory.remember(NewMemory(GROUP, "likes coffee"), replaces=theirs.id)
    assert (await store.memory.get_memory(theirs.id)).archived_at is None


async def test_the_most_recently_used_come_first(store: Any) -> None:
    a, _ = await store.memory.remember(NewMemory(GROUP, "a"))
    b, _ = await store.memory.remember(NewMemory(GROUP, "b"))
    await store.memory.remember(NewMemory(GROUP, "A"))  # a is used again
    assert [e.text for e in await store.memory.memories([GROUP])] == ["a", "b"]
    assert {e.id for e in await store.memory.memories()} == {a.id, b.id}


async def test_forgetting_a_note_takes_its_older_versions_too(store: Any) -> None:
    one, _ = await store.memory.remember(NewMemory(GROUP, "v1"))
    two, _ = await store.memory.remember(NewMemory(GROUP, "v2"), replaces=one.id)
    three, _ = await store.memory.remember(NewMemory(GROUP, "v3"), replaces=two.id)
    kept, _ = await store.memory.remember(NewMemory(GROUP, "unrelated"))
    assert await store.memory.forget_memory(three.id) == 3
    assert [e.id for e in await store.memory.memories([GROUP], archived=True)] == [kept.id]


async def test_forgetting_an_owner_takes_only_theirs(store: Any) -> None:
    for owner in (ANN, GROUP, OTHER):
        old, _ = await store.memory.remember(NewMemory(owner, f"{owner.owner} old"))
        await store.memory.remember(NewMemory(owner, f"{owner.owner} new"), replaces=old.id)
    assert await store.memory.forget_memories(GROUP) == 2
    left = await store.memory.memories(archived=True)
    assert {e.owner for e in left} == {ANN, OTHER} and len(left) == 4


async def test_forgetting_a_chat_takes_its_notes_but_not_its_people(store: Any) -> None:
    origin = SessionOrigin("telegram:-100", "telegram", "-100")
    session = await store.conversation.start_session(origin, "m", row("system", "sys"))
    await store.conversation.commit_turn(session.id, [row("user", "hi")])
    await store.memory.remember(NewMemory(GROUP, "the deploy is on Fridays"))
    await store.memory.remember(NewMemory(ANN, "Ann's own note"))
    await store.memory.remember(NewMemory(OTHER, "another chat's note"))
    await store.operator.forget("telegram:-100")
    left = await store.memory.memories(archived=True)
    assert {e.owner for e in left} == {ANN, OTHER}


async def test_the_inbox_keeps_the_kind_of_chat(store: Any) -> None:
    entry = InboxEntry(
        session_key="telegram:42",
        platform="telegram",
        chat_id="42",
        message={"role": "user", "content": "hi"},
        token_count=1,
        addressed=True,
        user_id="42",
        chat_type="private",
    )
    await store.conversation.enqueue(entry)
    [stored] = await store.conversation.inbox("telegram:42")
    assert stored.chat_type == "private"


async def test_search_spans_the_chats_earlier_sessions_but_no_other_chat(store: Any) -> None:
    here = SessionOrigin("console:a", "console", "a")
    before = await store.conversation.start_session(here, "m", row("system", "sys"))
    await store.conversation.commit_turn(before.id, [row("user", "the boat is called Minnow")])
    await store.conversation.end_session(before.id, "reset")  # /new
    now = await store.conversation.start_session(here, "m", row("system", "sys"))
    await store.conversation.commit_turn(now.id, [row("user", "and the dinghy is Guppy")])
    elsewhere = await store.conversation.start_session(
        SessionOrigin("console:b", "console", "b"), "m", row("system", "sys")
    )

    [found] = await store.conversation.search(now.id, "Minnow")
    assert found.archived and "Minnow" in found.snippet  # not in this context any more
    [current] = await store.conversation.search(now.id, "Guppy")
    assert not current.archived
    assert await store.conversation.search(elsewhere.id, "Minnow") == []


async def test_a_chat_that_moves_keeps_its_notes(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "state.db") as store:
        await store.memory.remember(NewMemory(GROUP, "the deploy is on Fridays"))
        await store.memory.remember(NewMemory(MemoryOwner("chat", "telegram:-100:7"), "topic"))
        await store.memory.remember(NewMemory(MemoryOwner("chat", "telegram:-1000"), "not it"))
        assert await store.chats.move_chat("telegram", "-100", "-100999")
        owners = {e.text: e.owner.owner for e in await store.memory.memories()}
    assert owners == {
        "the deploy is on Fridays": "telegram:-100999",
        "topic": "telegram:-100999:7",
        "not it": "telegram:-1000",
    }
