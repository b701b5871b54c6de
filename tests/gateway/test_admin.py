"""`nightowl sessions`: list, show, export (archived rows included), forget (only that one)."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import pytest

from gateway.ops.admin import export_session
from gateway.ops.cli import main
from gateway.store import CompressionCommit, InboxEntry, NewMessage, SessionOrigin, SQLiteStore

SUMMARY = "[CONTEXT COMPACTION] Earlier turns were compacted.\n## Goal\nPlan the trip to Oslo."


def row(role: str, content: str) -> NewMessage:
    return NewMessage({"role": role, "content": content}, len(content) // 4 + 1)


async def fill(database: Path) -> None:
    """Two chats: Ada's (compacted once: archived rows + a summary) and Bob's (short)."""
    async with SQLiteStore(database) as store:
        ada = await store.conversation.start_session(
            SessionOrigin("telegram:100", "telegram", "100"), "m", row("system", "be kind")
        )
        await store.conversation.commit_turn(
            ada.id,
            [
                row("user", "my passport number is X1234567"),
                row("assistant", "noted"),
                row("user", "we fly to Oslo on May 2"),
                row("assistant", "have a good trip"),
            ],
        )
        kept = await store.conversation.load_active(ada.id)
        await store.conversation.archive_and_compress(
            ada.id, CompressionCommit([kept[0].id, row("user", SUMMARY), row("assistant", "ok")])
        )
        bob = await store.conversation.start_session(
            SessionOrigin("discord:200", "discord", "200"), "m", row("system", "be kind")
        )
        await store.conversation.commit_turn(
            bob.id, [row("user", "bob's own note"), row("assistant", "ok")]
        )
        await store.conversation.enqueue(
            InboxEntry(
                session_key="telegram:100",
                platform="telegram",
                chat_id="100",
                message={"role": "user", "content": "a message still waiting"},
                token_count=5,
                addressed=True,
            )
        )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\n")
    asyncio.run(fill(tmp_path / "data" / "state.db"))
    return path


def sessions(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> tuple[int, str, str]:
    code = main(["sessions", *args, "-c", str(config)])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_every_session_with_its_counts(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = sessions(capsys, config, "list")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["KEY", "PLATFORM", "ACTIVE", "ARCHIVED", "TOKENS", "LAST", "ACTIVITY"]
    by_key = {line.split()[0]: line.split()[1:5] for line in rows}
    assert by_key["telegram:100"][:3] == ["telegram", "3", "4"]
    assert by_key["discord:200"][:3] == ["discord", "3", "0"]


def test_show_prints_the_current_summary_and_the_active_context(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = sessions(capsys, config, "show", "telegram:100")
    assert code == 0
    summary_part, context_part = out.split("── active context ──")
    assert "── current summary ──\n" + SUMMARY in summary_part
    assert "3 messages" in summary_part and "4 archived" in summary_part
    context = context_part.strip().splitlines()
    assert [line.split()[1] for line in context] == ["system", "user", "assistant"]
    assert "passport" not in out  # archived rows are not part of the active context


def test_export_includes_archived_rows(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = sessions(capsys, config, "export", "telegram:100")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["role"], r["active"], r["compacted"]) for r in rows] == [
        ("system", True, False),  # kept through the compression: the same row
        ("user", False, True),
        ("assistant", False, True),
        ("user", False, True),
        ("assistant", False, True),
        ("user", True, False),
        ("assistant", True, False),
    ]
    assert rows[1]["content"] == "my passport number is X1234567"
    assert len({r["session_id"] for r in rows}) == 1 and all(r["id"] for r in rows)
    assert "exported 7 rows (4 archived)" in err


def test_export_after_new_says_the_old_conversation_is_no_longer_sent(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def new_for_bob() -> None:
        async with SQLiteStore(tmp_path / "data" / "state.db") as store:
            bob = await store.conversation.current_session("discord:200")
            await store.conversation.end_session(bob.id, "new")

    asyncio.run(new_for_bob())
    code, out, err = sessions(capsys, config, "export", "discord:200")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["role"], r["active"], r["compacted"]) for r in rows] == [
        ("system", False, False),
        ("user", False, False),
        ("assistant", False, False),
    ]
    assert "exported 3 rows (3 archived)" in err


def test_export_to_a_file_is_private(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "ada.jsonl"
    code, out, _ = sessions(capsys, config, "export", "telegram:100", "--output", str(target))
    assert code == 0 and out == ""
    assert len(target.read_text().splitlines()) == 7
    assert target.stat().st_mode & 0o777 == 0o600


def test_export_refuses_to_overwrite_a_file_without_force(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "ada.jsonl"
    target.write_text("my notes\n")
    code, _, err = sessions(capsys, config, "export", "telegram:100", "-o", str(target))
    assert code == 1 and target.read_text() == "my notes\n"
    assert err == f"nightowl: {target} exists; pass --force to overwrite it\n"
    code, _, err = sessions(capsys, config, "export", "telegram:100", "-o", str(target), "--force")
    assert code == 0, err
    assert target.read_text() == sessions(capsys, config, "export", "telegram:100")[1]
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ada")] == []


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("{tmp}", "{tmp} is a directory: give a file name"),
        ("{tmp}/no/such/dir/ada.jsonl", "the directory {tmp}/no/such/dir does not exist"),
        ("/dev/full", "could not write /dev/full: no space left on device"),
    ],
)
def test_export_to_a_place_it_cannot_go_is_one_line(
    config: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    target: str,
    says: str,
) -> None:
    target, says = target.format(tmp=tmp_path), says.format(tmp=tmp_path)
    code, out, err = sessions(capsys, config, "export", "telegram:100", "-o", target)
    assert code == 1 and out == ""
    assert len(err.splitlines()) == 1 and says in err, err


def test_forget_removes_only_that_session_and_scrubs_the_file(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = sessions(capsys, config, "forget", "telegram:100", "--yes")
    assert code == 0
    assert "Forgot telegram:100: 7 messages erased." in out
    code, out, _ = sessions(capsys, config, "list")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["discord:200"]
    assert sessions(capsys, config, "export", "telegram:100")[0] == 1
    code, out, _ = sessions(capsys, config, "export", "discord:200")
    assert [json.loads(line)["content"] for line in out.splitlines()][1] == "bob's own note"
    data = b"".join(path.read_bytes() for path in (tmp_path / "data").iterdir())
    for erased in (b"X1234567", b"x1234567", b"Oslo", b"oslo", b"passport", b"still waiting"):
        assert erased not in data  # not in free pages, the WAL or the search index
    assert b"bob's own note" in data


async def test_forget_asks_first_and_keeps_everything_without_the_key(tmp_path: Path) -> None:
    from argparse import Namespace
    from io import StringIO

    from gateway.config.schema import load_config
    from gateway.ops.admin import run_sessions_command

    (tmp_path / "config.yaml").write_text(f"data_dir: {tmp_path / 'data'}\n")
    await fill(tmp_path / "data" / "state.db")
    config = load_config(tmp_path / "config.yaml")
    asked: list[str] = []

    def answer(text: str):
        def confirm(prompt: str) -> str:
            asked.append(prompt)
            return text

        return confirm

    args = Namespace(action="forget", key="telegram:100", yes=False)
    out = StringIO()
    assert await run_sessions_command(config, args, out=out, confirm=answer("y")) == 1
    assert "Nothing erased." in out.getvalue()
    assert asked == ["Type telegram:100 to confirm: "]
    async with SQLiteStore(config.database_path) as store:
        assert len(await store.operator.export_rows("telegram:100")) == 7
    assert await run_sessions_command(config, args, out=out, confirm=answer("telegram:100")) == 0
    async with SQLiteStore(config.database_path) as store:
        assert await store.operator.export_rows("telegram:100") == []


def test_unknown_keys_and_no_database_are_explained(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = sessions(capsys, config, "show", "telegram:999")
    assert code == 1 and "no current session 'telegram:999'" in err
    code, _, err = sessions(capsys, config, "forget", "telegram:999", "--yes")
    assert code == 1 and "nothing stored under 'telegram:999'" in err
    empty = tmp_path / "empty.yaml"
    empty.write_text(f"data_dir: {tmp_path / 'nothing'}\n")
    code, out, _ = sessions(capsys, empty, "list")
    assert code == 0 and "No sessions yet" in out
    assert not (tmp_path / "nothing").exists()


async def test_a_session_forgotten_while_the_gateway_runs_starts_fresh(tmp_path, fake_llm) -> None:
    from gateway.store import SQLiteStore
    from tests.harness import RecordingAdapter, make_config, running_gateway, turns_done

    adapter = RecordingAdapter()
    config = make_config(tmp_path, fake_llm)
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("remember me")
        await adapter.wait_sent(1)
        await turns_done(gateway)
        other = await SQLiteStore(config.database_path).open("shared")  # `sessions forget`
        try:
            assert await other.operator.forget("console:t") > 0
        finally:
            await other.close()
        await adapter.say("hello again")
        assert (await adapter.wait_sent(2))[-1] == "echo: hello again"
    users = [m["content"] for m in fake_llm.requests[-1].messages if m["role"] == "user"]
    assert users == ["hello again"]


def test_show_prints_control_characters_visibly_and_export_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a model (or a pasted log) may write: a colour, a title change, an OSC 52
    # clipboard write, an 8-bit CSI, a carriage return hiding what precedes it, a bell.
    hostile = (
        "\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x1b]52;c;cm0gLXJmIH4=\x07 \x9b2J"
        " fine\rhidden\x07\tindented\nnext line"
    )

    async def store_it() -> None:
        async with SQLiteStore(tmp_path / "data" / "state.db") as store:
            record = await store.conversation.start_session(
                SessionOrigin("console:x", "console", "x"), "m", row("system", "be kind")
            )
            await store.conversation.commit_turn(record.id, [row("assistant", hostile)])

    asyncio.run(store_it())
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\n")
    for args in (("show", "console:x"), ("show", "console:x", "--full"), ("list",)):
        code, out, _ = sessions(capsys, config, *args)
        assert code == 0
        assert not [c for c in out if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0]
    code, out, _ = sessions(capsys, config, "show", "console:x", "--full")
    assert (
        "\\x1b[31mred\\x1b[0m \\x1b]0;pwned\\x07 \\x1b]52;c;cm0gLXJmIH4=\\x07 \\x9b2J"
        " fine\\x0dhidden\\x07\tindented\nnext line"
    ) in out
    code, out, _ = sessions(capsys, config, "export", "console:x")
    assert json.loads(out.splitlines()[-1])["content"] == hostile  # the export is exact


def test_after_new_the_ended_sessions_are_named_with_how_to_export_them(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def end_both() -> None:
        async with SQLiteStore(tmp_path / "data" / "state.db") as store:
            for key in ("telegram:100", "discord:200"):
                record = await store.conversation.current_session(key)
                assert record is not None
                await store.conversation.end_session(record.id, "new")

    asyncio.run(end_both())
    code, out, _ = sessions(capsys, config, "list")
    assert code == 0 and out.startswith("No current sessions; 2 ended by /new")
    assert "nightowl sessions export KEY" in out
    code, _, err = sessions(capsys, config, "show", "telegram:100")
    assert code == 1 and "no current session 'telegram:100' (1 ended by /new" in err
    code, out, _ = sessions(capsys, config, "export", "telegram:100")
    assert code == 0 and "X1234567" in out  # still there to export


def test_a_refused_message_is_not_counted_as_archived(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refuse_one() -> None:
        async with SQLiteStore(tmp_path / "data" / "state.db") as store:
            record = await store.conversation.current_session("discord:200")
            assert record is not None
            await store.costs.keep_refused(record.id, [row("user", "over budget")], [])

    asyncio.run(refuse_one())
    code, out, _ = sessions(capsys, config, "list")
    assert code == 0
    by_key = {line.split()[0]: line.split()[1:5] for line in out.splitlines()[1:]}
    assert by_key["discord:200"][:3] == ["discord", "3", "0"]  # kept, not archived
    code, out, _ = sessions(capsys, config, "show", "discord:200")
    assert code == 0 and "over budget" not in out  # not in the context it shows
    assert (
        "1 message(s) a budget refused, kept out of the context"
        " (nightowl sessions export discord:200 has them)"
    ) in out


async def test_export_marks_summary_and_refused_rows_alike_on_both_backends(
    backend_store: Any,
) -> None:
    chats = backend_store.conversation
    session = await chats.start_session(
        SessionOrigin("telegram:100", "telegram", "100"), "m", row("system", "be kind")
    )
    await chats.commit_turn(session.id, [row("user", "hello"), row("assistant", "hi")])
    kept = await chats.load_active(session.id)
    await chats.archive_and_compress(
        session.id, CompressionCommit([kept[0].id, row("user", SUMMARY), row("assistant", "ok")])
    )
    await backend_store.costs.keep_refused(session.id, [row("user", "a very long paste")], [])
    out, err = io.StringIO(), io.StringIO()

    assert await export_session(backend_store.operator, "telegram:100", None, out, err) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    marked = [(r["content"], r.get("summary"), r.get("refused")) for r in rows]
    assert marked == [
        ("be kind", None, None),
        ("hello", None, None),  # archived by the compression: not refused
        ("hi", None, None),
        (SUMMARY, True, None),
        ("ok", None, None),
        ("a very long paste", None, True),
    ]
    assert "exported 6 rows (2 archived)" in err.getvalue()
