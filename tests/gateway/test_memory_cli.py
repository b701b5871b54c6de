"""`nightowl memory list | export | forget`, and `nightowl sessions forget` taking a chat's
memory with it (docs/design.md#memory-operator). Run through the real command line."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from gateway.ops.cli import main
from gateway.store import MemoryOwner, NewMemory, NewMessage, SessionOrigin, SQLiteStore, Store
from gateway.store.postgres import PostgresStore

ANN = MemoryOwner("user", "telegram:42")
GROUP = MemoryOwner("chat", "telegram:-100")


async def fill(database: Path) -> None:
    async with SQLiteStore(database) as store:
        await fill_store(store)


async def fill_store(store: Store) -> None:
    session = await store.conversation.start_session(
        SessionOrigin("telegram:-100", "telegram", "-100"),
        "m",
        NewMessage({"role": "system", "content": "be kind"}, 3),
    )
    await store.conversation.commit_turn(
        session.id, [NewMessage({"role": "user", "content": "hello group"}, 3)]
    )
    old, _ = await store.memory.remember(NewMemory(GROUP, "standup at quarter past nine"))
    await store.memory.remember(NewMemory(GROUP, "standup at half past nine"), replaces=old.id)
    await store.memory.remember(NewMemory(ANN, "Ann's passport expires in May", "s", "77"))


async def fill_postgres(dsn: str) -> None:
    async with PostgresStore(dsn) as store:
        await fill_store(store)


@pytest.fixture
def postgres_config(tmp_path: Path, postgres_dsn: str) -> Path:
    """A data dir with no state.db, and a config naming the PostgreSQL database the
    notes are in."""
    path = tmp_path / "config.yaml"
    path.write_text(
        f"data_dir: {tmp_path / 'data'}\nstore:\n  backend: postgres\n  dsn: {postgres_dsn}\n"
    )
    asyncio.run(fill_postgres(postgres_dsn))
    return path


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\n")
    asyncio.run(fill(tmp_path / "data" / "state.db"))
    return path


def nightowl(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> tuple[int, str, str]:
    code = main([*args, "-c", str(config)])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_each_scope(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = nightowl(capsys, config, "memory", "list")
    assert code == 0
    assert "chat telegram:-100" in out and "standup at half past nine" in out
    assert "user telegram:42" in out and "passport" in out
    assert "quarter past" not in out  # replaced: only with --archived
    _, out, _ = nightowl(capsys, config, "memory", "list", "--chat", "telegram:-100", "--archived")
    assert "passport" not in out and "quarter past nine" in out and "(replaced by #2)" in out


def test_export_is_every_note_with_where_it_came_from(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "memory.jsonl"
    code, _, err = nightowl(
        capsys, config, "memory", "export", "--user", "telegram:42", "-o", str(target)
    )
    assert code == 0 and "exported 1 memory notes" in err
    [note] = [json.loads(line) for line in target.read_text().splitlines()]
    assert note["scope"] == "user" and note["owner"] == "telegram:42"
    assert (note["session_id"], note["platform_message_id"], note["learned_by"]) == (
        "s",
        "77",
        "tool",
    )
    assert os.stat(target).st_mode & 0o077 == 0  # as private as the database
    _, out, _ = nightowl(capsys, config, "memory", "export")
    assert len(out.splitlines()) == 3  # archived versions included


def test_forget_a_person_erases_their_notes_from_the_file(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = nightowl(capsys, config, "memory", "forget", "--user", "telegram:42", "--yes")
    assert code == 0 and "Forgot 1 memory note(s)." in out
    _, out, _ = nightowl(capsys, config, "memory", "list")
    assert "passport" not in out and "standup at half past nine" in out
    data = b"".join(path.read_bytes() for path in (tmp_path / "data").iterdir())
    assert b"passport" not in data  # not in free pages or the WAL either


def test_forget_one_note_takes_its_older_versions(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = nightowl(capsys, config, "memory", "forget", "2", "--yes")
    assert code == 0 and "Forgot 2 memory note(s)." in out
    _, out, _ = nightowl(capsys, config, "memory", "list", "--archived")
    assert "standup" not in out
    code, _, err = nightowl(capsys, config, "memory", "forget", "--yes")
    assert code == 1 and "give a note's id, or --user / --chat" in err


def test_sessions_forget_takes_the_chats_memory_but_not_its_people(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = nightowl(capsys, config, "sessions", "forget", "telegram:-100", "--yes")
    assert code == 0 and "2 memory notes erased" in out
    _, out, _ = nightowl(capsys, config, "memory", "list", "--archived")
    assert "standup" not in out and "passport" in out


def test_list_and_forget_reach_the_notes_on_postgresql(
    postgres_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = nightowl(capsys, postgres_config, "memory", "list")
    assert (code, err) == (0, "")
    assert "standup at half past nine" in out and "passport" in out
    code, out, _ = nightowl(
        capsys, postgres_config, "memory", "forget", "--user", "telegram:42", "--yes"
    )
    assert code == 0 and "Forgot 1 memory note(s)." in out
    code, out, _ = nightowl(capsys, postgres_config, "memory", "forget", "2", "--yes")
    assert code == 0 and "Forgot 2 memory note(s)." in out
    _, out, _ = nightowl(capsys, postgres_config, "memory", "list", "--archived")
    assert out == "No memory notes yet.\n"
    assert not (tmp_path / "data" / "state.db").exists()  # never looked for, nor made


def test_sessions_and_pairing_reach_the_same_postgresql_store(
    postgres_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = nightowl(capsys, postgres_config, "sessions", "list")
    assert code == 0 and "telegram:-100" in out
    code, out, _ = nightowl(capsys, postgres_config, "sessions", "forget", "telegram:-100", "--yes")
    assert code == 0 and "2 memory notes erased" in out
    _, out, _ = nightowl(capsys, postgres_config, "memory", "list")
    assert "standup" not in out and "passport" in out
    code, out, _ = nightowl(capsys, postgres_config, "pairing", "list")
    assert code == 0 and "No pairing requests are waiting." in out


def test_listings_before_any_gateway_ran_say_there_is_nothing_yet(
    tmp_path: Path, postgres_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new SQLite data dir and a new, empty PostgreSQL database read the same: nothing
    to list yet, exit 0 (not "older than this nightowl": the database is empty, not old)."""
    sqlite = tmp_path / "sqlite.yaml"
    sqlite.write_text(f"data_dir: {tmp_path / 'fresh'}\n")
    postgres = tmp_path / "postgres.yaml"
    postgres.write_text(
        f"data_dir: {tmp_path / 'data'}\nstore:\n  backend: postgres\n  dsn: {postgres_dsn}\n"
    )
    for config in (sqlite, postgres):
        for command, nothing in (
            ("memory", "No memory notes yet"),
            ("sessions", "No sessions yet"),
            ("pairing", "No pairing requests yet"),
        ):
            code, out, err = nightowl(capsys, config, command, "list")
            assert (code, err) == (0, ""), (config.name, command, err)
            assert out.startswith(nothing), (config.name, command, out)
    code, _, err = nightowl(capsys, postgres, "memory", "forget", "1", "--yes")
    assert code == 1 and "holds no nightowl tables yet: start the gateway once" in err
