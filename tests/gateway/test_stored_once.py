"""Every message is stored once, with its own time, however many compressions pass over
it; databases written by versions that copied rows are cleaned on upgrade."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from gateway.store import SQLiteStore
from gateway.store.schema import MIGRATIONS
from tests import db
from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, make_config, running_gateway, summarizing


async def test_forty_turns_of_compactions_store_each_message_once(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter()
    config = make_config(
        tmp_path, fake_llm, model={"context_length": 4_096, "max_output_tokens": 512}
    )
    async with running_gateway(config, adapter) as gateway:
        for i in range(40):
            await adapter.say(f"marker{i:02d} pelican " + "p" * 700)
            await adapter.wait_sent(i + 1)
        session_id = (await gateway.store.conversation.current_session("console:t")).id
        hits = await gateway.store.conversation.search(session_id, "pelican", 10)
        compressions = (
            await gateway.store.conversation.current_session("console:t")
        ).compression_count

    assert compressions >= 3
    user_rows = db.rows(
        tmp_path,
        "SELECT substr(content, 1, 8), created_at FROM messages WHERE role = 'user'"
        " AND content NOT LIKE '[CONTEXT COMPACTION]%' ORDER BY id",
    )
    counts = Counter(marker for marker, _ in user_rows)
    assert counts == {f"marker{i:02d}": 1 for i in range(40)}  # each inbound message once
    times = [created for _, created in user_rows]
    assert times == sorted(times)  # with the time it arrived, not a compression's
    assert len(hits) == 10
    assert len({h.message_id for h in hits}) == len({h.snippet for h in hits}) == 10
    assert not any("CONTEXT COMPACTION" in h.snippet for h in hits)


def old_database(path: Path) -> None:
    """A schema-4 database as versions before 5 wrote it: two compressions, each
    re-inserting the head and the tail it kept as new rows with its own timestamp."""
    with db.connect(path, create=True) as old:
        for version, script in MIGRATIONS[:4]:
            old.executescript(f"BEGIN;\n{script}\nPRAGMA user_version={version};\nCOMMIT;")
        old.execute(
            "INSERT INTO sessions(id, session_key, platform, created_at, updated_at,"
            " anchor_message_id) VALUES ('s', 'console:t', 'console', 0, 0, 12)"
        )

        def insert(role: str, content: str, at: float, active: int = 1) -> None:
            old.execute(
                "INSERT INTO messages(session_id, role, content, created_at, active, compacted)"
                " VALUES ('s', ?, ?, ?, ?, ?)",
                (role, content, at, active, 1 - active),
            )

        insert("system", "sys", 1)
        for i in range(6):
            insert("user" if i % 2 == 0 else "assistant", f"m{i}", 10 + i)
        # Compression 1 at t=100: everything archived; head (system + note, m0, m1),
        # summary, tail m4 m5 re-inserted.
        old.execute("UPDATE messages SET active = 0, compacted = 1")
        insert("system", "sys\n\n[note]", 100)
        insert("user", "m0", 100)
        insert("assistant", "m1", 100)
        insert("user", "[CONTEXT COMPACTION] first", 100)
        insert("user", "m4", 100)
        insert("assistant", "m5", 100)  # id 13
        insert("user", "m6", 110)
        insert("assistant", "m7", 111)
        # Compression 2 at t=200: head is only the system prompt now; tail m5 m6 m7.
        old.execute("UPDATE messages SET active = 0, compacted = 1")
        insert("system", "sys\n\n[note]", 200)
        insert("assistant", "[CONTEXT COMPACTION] second", 200)
        insert("assistant", "m5", 200)
        insert("user", "m6", 200)
        insert("assistant", "m7", 200)


async def test_upgrading_removes_the_copies_older_versions_wrote(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    old_database(path)
    async with SQLiteStore(path) as store:
        active = [m.message["content"] for m in await store.conversation.load_active("s")]
        hits = await store.conversation.search("s", "m5 m6", 10)
    assert active == ["sys\n\n[note]", "[CONTEXT COMPACTION] second", "m5", "m6", "m7"]
    stored = db.rows(path, "SELECT content, created_at FROM messages ORDER BY id")
    originals = Counter(content for content, _ in stored if content.startswith("m"))
    assert originals == {f"m{i}": 1 for i in range(8)}  # every message once...
    assert dict(stored)["m5"] == 15 and dict(stored)["m6"] == 110  # ...the earliest
    assert len(hits) == 2  # distinct messages, no copies, no summaries
