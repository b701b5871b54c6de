"""The store keeps every row: archive in place, search the archive, survive crashes."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.store import (
    KEEP,
    AnchorRecord,
    CompressionCommit,
    InboxEntry,
    NewMessage,
    SessionOrigin,
    SQLiteStore,
    StoreError,
    UsageTotals,
)
from gateway.store.schema import MIGRATIONS, SCHEMA_VERSION

ORIGIN = SessionOrigin("console:t", "console", "t")


def row(role: str, content: str, tokens: int = 5) -> NewMessage:
    return NewMessage({"role": role, "content": content}, tokens)


def entry(
    text: str, *, key: str = "console:t", dedupe: str | None = None, addressed: bool = True
) -> InboxEntry:
    return InboxEntry(
        session_key=key,
        platform="console",
        chat_id="t",
        message={"role": "user", "content": text},
        token_count=len(text) // 4,
        addressed=addressed,
        dedupe_key=dedupe,
    )


async def other_writer(store: Any, statement: str) -> None:
    """Change the database behind the store's views, as another process would."""
    async with store.connection.transaction() as db:
        await db.execute(statement)


@pytest.fixture
async def store(backend_store: Any) -> Any:
    """Each test below runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_store


async def test_new_session_starts_with_its_system_row(store: SQLiteStore) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "be kind"))
    assert [m.message for m in await store.conversation.load_active(session.id)] == [
        {"role": "system", "content": "be kind"}
    ]
    assert (await store.conversation.current_session("console:t")).id == session.id


async def test_archive_and_compact_flips_flags_and_copies_nothing(store: SQLiteStore) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(
        session.id, [row("user", f"message {i}") for i in range(10)], anchor=KEEP
    )
    before = await store.conversation.load_active(session.id)
    system, last = before[0], before[-1]
    summary = row("user", "[CONTEXT COMPACTION] all ten")
    await store.conversation.archive_and_compress(
        session.id, CompressionCommit([system.id, summary, last.id])
    )

    active = await store.conversation.load_active(session.id)
    assert [m.message["content"] for m in active] == [
        "sys",
        "[CONTEXT COMPACTION] all ten",
        "message 9",
    ]
    # The rows that stay are the same rows: same id, same time. Nothing was copied.
    assert [(m.id, m.created_at) for m in (active[0], active[2])] == [
        (system.id, system.created_at),
        (last.id, last.created_at),
    ]
    everything = await store.operator.export_rows("console:t")
    assert len(everything) == len(before) + 1
    archived = [m for _, m in everything if not m.active]
    assert {m.id for m in archived} == {m.id for m in before[1:-1]}
    assert all(m.compacted for m in archived)
    assert (await store.conversation.current_session("console:t")).compression_count == 1


async def test_new_rows_of_a_compaction_take_their_place_between_kept_ones(
    store: SQLiteStore,
) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(session.id, [row("user", f"m{i}") for i in range(6)])
    rows = await store.conversation.load_active(session.id)
    note = row("system", "sys + note")
    first = CompressionCommit(
        [note, row("user", "[CONTEXT COMPACTION] one"), rows[-2].id, rows[-1].id]
    )
    ids = await store.conversation.archive_and_compress(session.id, first)
    (after,) = await store.conversation.commit_turn(session.id, [row("user", "after")])
    second = CompressionCommit(
        [ids[0], row("user", "[CONTEXT COMPACTION] two"), rows[-1].id, after]
    )
    await store.conversation.archive_and_compress(session.id, second)
    await store.conversation.commit_turn(session.id, [row("user", "later")])
    active = [m.message["content"] for m in await store.conversation.load_active(session.id)]
    assert active == ["sys + note", "[CONTEXT COMPACTION] two", "m5", "after", "later"]


async def test_search_finds_archived_rows_but_not_taken_back_ones(
    store: SQLiteStore, tmp_path: Path
) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(
        session.id, [row("user", "my cat is called Tom"), row("assistant", "Hi Tom's human")]
    )
    system = (await store.conversation.load_active(session.id))[0]
    await store.conversation.archive_and_compress(
        session.id, CompressionCommit([system.id, row("user", "[CONTEXT COMPACTION] pets")])
    )
    hits = await store.conversation.search(session.id, "what's my cat called?")
    assert hits and hits[0].archived and "cat" in hits[0].snippet
    # A row a user took back (active=0, compacted=0) is hidden from search.
    await other_writer(store, "UPDATE messages SET compacted = 0 WHERE content LIKE '%cat%'")
    assert await store.conversation.search(session.id, "cat") == []


async def test_search_survives_fts_syntax_in_user_text(store: SQLiteStore) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(session.id, [row("user", 'the "quoted" AND NOT (thing)*')])
    assert await store.conversation.search(session.id, 'AND NOT "quoted (thing*') != []
    assert await store.conversation.search(session.id, "!!! ???") == []


async def test_rotation_links_child_to_parent_and_search_spans_both(store: SQLiteStore) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(
        session.id, [row("user", "the password hint is aubergine")]
    )
    child, _ = await store.conversation.rotate(
        session.id, [row("system", "sys"), row("user", "[CONTEXT COMPACTION] x")]
    )
    old = await store.conversation.get_session(session.id)
    assert child.parent_session_id == session.id
    assert old.end_reason == "compression" and old.ended_at is not None
    assert (await store.conversation.current_session("console:t")).id == child.id
    assert (await store.conversation.search(child.id, "aubergine"))[0].role == "user"


async def test_reset_ends_the_session_and_keeps_its_rows(store: SQLiteStore) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(session.id, [row("user", "hello")])
    await store.conversation.end_session(session.id, "reset")
    assert await store.conversation.current_session("console:t") is None
    assert len(await store.operator.export_rows("console:t")) == 2
    fresh = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    assert fresh.id != session.id


async def test_messages_stored_at_once_share_a_commit_and_each_learns_if_it_was_new(
    store: SQLiteStore,
) -> None:
    """Group commit (docs/design.md#group-commit): one transaction for what arrives
    together, each message still deduplicated on its own, each chat's kept in order."""
    assert await store.conversation.enqueue(entry("seen before", dedupe="u0"))
    arriving = [
        entry("a1", dedupe="u1"),
        entry("b1", key="console:b", dedupe="u2"),
        entry("a1 again", dedupe="u1"),  # redelivered within the same moment
        entry("redelivered", dedupe="u0"),
        entry("a2"),  # no dedupe key: always new
        entry("b2", key="console:b", dedupe="u3"),
    ]
    results = await asyncio.gather(*(store.conversation.enqueue(e) for e in arriving))
    assert results == [True, True, False, False, True, True]
    chat_a = await store.conversation.inbox("console:t")
    chat_b = await store.conversation.inbox("console:b")
    assert [e.message["content"] for e in chat_a] == ["seen before", "a1", "a2"]
    assert [e.message["content"] for e in chat_b] == ["b1", "b2"]
    together = {e.created_at for e in chat_a[1:] + chat_b}
    assert len(together) == 1, "the four new messages were stored in one transaction"


async def test_a_message_that_cannot_be_stored_fails_alone(store: SQLiteStore) -> None:
    bad = InboxEntry("console:t", "console", "t", {"role": "user", "content": {1}}, 1, True)
    results = await asyncio.gather(
        store.conversation.enqueue(entry("before")),
        store.conversation.enqueue(bad),  # a set: not JSON
        store.conversation.enqueue(entry("after", dedupe="u9")),
        return_exceptions=True,
    )
    assert results[0] is True and results[2] is True
    assert isinstance(results[1], TypeError)
    waiting = await store.conversation.inbox("console:t")
    assert [e.message["content"] for e in waiting] == ["before", "after"]
    assert await store.conversation.enqueue(entry("later"))


async def test_inbox_dedupes_and_is_consumed_with_the_turn(store: SQLiteStore) -> None:
    assert await store.conversation.enqueue(entry("one", dedupe="u1"))
    assert not await store.conversation.enqueue(entry("one again", dedupe="u1"))
    assert await store.conversation.enqueue(entry("two"))
    waiting = await store.conversation.inbox("console:t")
    assert [e.message["content"] for e in waiting] == ["one", "two"]
    assert await store.conversation.session_keys_with_inbox() == ["console:t"]
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(
        session.id,
        [NewMessage(e.message, e.token_count) for e in waiting] + [row("assistant", "hi")],
        consumed_inbox=[e.id for e in waiting],
    )
    assert await store.conversation.inbox("console:t") == []
    assert [m.message["content"] for m in await store.conversation.load_active(session.id)][
        -1
    ] == "hi"


async def test_anchor_points_at_the_row_it_covers_and_compaction_clears_it(
    store: SQLiteStore,
) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    ids = await store.conversation.commit_turn(
        session.id,
        [row("user", "q"), row("assistant", "a")],
        anchor=AnchorRecord(100, 7, -1, "fp", "openai:x"),
        usage=UsageTotals(100, 7, 0, 0, 1),
    )
    record = await store.conversation.current_session("console:t")
    assert record.anchor == AnchorRecord(100, 7, ids[-1], "fp", "openai:x")
    assert record.usage.prompt_tokens == 100 and record.usage.requests == 1
    await store.conversation.archive_and_compress(
        session.id, CompressionCommit([row("system", "sys")])
    )
    assert (await store.conversation.current_session("console:t")).anchor is None


async def test_the_anchor_keeps_the_calibration_and_what_travelled_beside_the_messages(
    store: SQLiteStore,
) -> None:
    """Migration 11 (docs/design.md#calibration): a restart keeps how the server counts."""
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    anchor = AnchorRecord(100, 7, -1, "fp", "openai:x", ratio=1.6, overhead=700)
    ids = await store.conversation.commit_turn(
        session.id,
        [row("user", "q"), row("assistant", "a")],
        anchor=anchor,
        usage=UsageTotals(100, 7, 0, 0, 1),
    )
    record = await store.conversation.current_session("console:t")
    assert record.anchor == AnchorRecord(100, 7, ids[-1], "fp", "openai:x", 1.6, 700)


async def test_pending_delivery_until_marked(store: SQLiteStore) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    ids = await store.conversation.commit_turn(
        session.id,
        [NewMessage({"role": "assistant", "content": "reply"}, 1, pending_delivery=True)],
    )
    pending = await store.conversation.pending_deliveries()
    assert [(p.message_id, p.text, p.chat_id) for p in pending] == [(ids[0], "reply", "t")]
    await store.conversation.mark_delivered(ids)
    assert await store.conversation.pending_deliveries() == []


async def test_a_lane_reads_what_waits_for_it_in_one_go(store: SQLiteStore) -> None:
    conversation = store.conversation
    empty = await conversation.waiting("console:t")
    assert (empty.replies, empty.inbox, empty.session, empty.history) == ([], [], None, None)
    session = await conversation.start_session(ORIGIN, "m", row("system", "sys"))
    ids = await conversation.commit_turn(
        session.id,
        [NewMessage({"role": "assistant", "content": "owed"}, 1, pending_delivery=True)],
    )
    owed = await conversation.waiting("console:t")
    assert [p.message_id for p in owed.replies] == ids
    assert owed.session is None and owed.history is None  # nothing to answer: not read
    await conversation.enqueue(entry("next"))
    found = await conversation.waiting("console:t")
    assert [e.message["content"] for e in found.inbox] == ["next"]
    assert found.session is not None and found.session.id == session.id
    assert [m.message["content"] for m in found.history or []] == ["sys", "owed"]
    await conversation.end_session(session.id, "reset")
    assert (await conversation.waiting("console:t")).session is None  # ended: none current


async def test_forget_erases_only_that_conversation(store: SQLiteStore) -> None:
    mine = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    other = await store.conversation.start_session(
        SessionOrigin("console:o", "console", "o"), "m", row("system", "sys")
    )
    await store.conversation.commit_turn(mine.id, [row("user", "secret")])
    await store.conversation.commit_turn(other.id, [row("user", "keep me")])
    assert await store.operator.forget("console:t") == 2
    assert await store.operator.export_rows("console:t") == []
    assert len(await store.operator.export_rows("console:o")) == 2
    assert await store.conversation.search(other.id, "keep") != []


async def test_opening_an_older_schema_upgrades_it_and_keeps_rows(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:  # a database written by the first release
        db.executescript(MIGRATIONS[0][1] + "\nPRAGMA user_version=1;")
        db.execute(
            "INSERT INTO sessions(id, session_key, platform, created_at, updated_at)"
            " VALUES ('s1', 'console:t', 'console', 0, 0)"
        )
        db.execute(
            "INSERT INTO messages(session_id, role, content, created_at) VALUES ('s1', 'user', 'old words', 0)"
        )
    async with SQLiteStore(path) as store:
        assert await store.schema_version() == SCHEMA_VERSION
        assert [m.message["content"] for m in await store.conversation.load_active("s1")] == [
            "old words"
        ]
        assert (await store.conversation.search("s1", "words"))[0].role == "user"
        assert await store.conversation.enqueue(entry("new"))  # tables of the later migration exist


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer nightowl"):
        await SQLiteStore(path).open()


async def test_active_history_is_read_through_the_index(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "state.db"):
        pass
    with sqlite3.connect(tmp_path / "state.db") as db:
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM messages WHERE session_id = 's' AND active = 1"
            " ORDER BY seq"
        ).fetchall()
    assert "messages_active" in " ".join(str(step) for step in plan)


CRASHER = textwrap.dedent(
    """
    import asyncio, sys
    from gateway.store import CompressionCommit, NewMessage, SQLiteStore

    async def main(path, session_id):
        async with SQLiteStore(path) as store:
            rows = [NewMessage({"role": "user", "content": "compacted " + str(i) * 50}, 1)
                    for i in range(20000)]
            print("compacting", flush=True)
            await store.conversation.archive_and_compress(session_id, CompressionCommit(rows))
            print("done", flush=True)

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.4])
async def test_a_kill_during_compaction_never_leaves_half_of_it(
    tmp_path: Path, delay: float
) -> None:
    path = tmp_path / "state.db"
    async with SQLiteStore(path) as store:
        session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
        await store.conversation.commit_turn(
            session.id, [row("user", f"original {i}") for i in range(200)]
        )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHER, str(path), session.id, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    assert await asyncio.wait_for(process.stdout.readline(), 30) == b"compacting\n"
    if delay:
        try:
            await asyncio.wait_for(process.wait(), delay)
        except TimeoutError:
            pass
    process.kill()
    await process.wait()

    async with SQLiteStore(path) as store:
        rows = await store.operator.export_rows("console:t")
        originals = [m for _, m in rows if m.message["content"].startswith(("original", "sys"))]
        new = [m for _, m in rows if m.message["content"].startswith("compacted")]
        assert len(originals) == 201  # never deleted, whatever happened
        if new:  # the transaction committed: all of it
            assert len(new) == 20000 and all(m.active for m in new)
            assert not any(m.active for m in originals)
        else:  # it did not: nothing of it
            assert all(m.active for m in originals)


async def test_active_rows_are_reread_when_another_writer_changed_them(
    store: SQLiteStore, tmp_path: Path
) -> None:
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(session.id, [row("user", "a"), row("user", "b")])
    assert len(await store.conversation.load_active(session.id)) == 3
    # e.g. `nightowl sessions` in a shell, or another replica
    await other_writer(store, "UPDATE messages SET active = 0, compacted = 1 WHERE content = 'a'")
    assert [m.message["content"] for m in await store.conversation.load_active(session.id)] == [
        "sys",
        "b",
    ]
    await store.conversation.commit_turn(session.id, [row("user", "c")])
    assert [m.message["content"] for m in await store.conversation.load_active(session.id)] == [
        "sys",
        "b",
        "c",
    ]


async def test_old_dedupe_keys_are_forgotten_while_the_gateway_runs(store: SQLiteStore) -> None:
    assert await store.conversation.remember_inbound("telegram:1")
    assert not await store.conversation.remember_inbound("telegram:1")
    assert await store.conversation.forget_seen(time.time() + 1) == 1
    assert await store.conversation.remember_inbound("telegram:1")  # forgotten: new again


async def test_a_nul_character_is_stored_on_both_backends(store: SQLiteStore) -> None:
    """PostgreSQL's text refuses NUL, which a tool's output can hold: it becomes U+FFFD
    there instead of failing the turn."""
    session = await store.conversation.start_session(ORIGIN, "m", row("system", "sys"))
    await store.conversation.commit_turn(session.id, [row("tool", "bytes: a\x00b")])
    [_, stored] = await store.conversation.load_active(session.id)
    assert stored.message["content"] in ("bytes: a\x00b", "bytes: a\ufffdb")
