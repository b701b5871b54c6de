"""`nightowl backup` beside a gateway that keeps answering, then `nightowl restore` into a
new data dir that answers the operator's commands as the original did
(docs/operations.md#backups). The gateway runs in this process (tests/harness.py); the
commands are the real command line as child processes."""

from __future__ import annotations

import asyncio
import json
import stat
import tarfile
import time
from pathlib import Path
from typing import Any

import yaml

from gateway.config.schema import load_config
from gateway.store import Reminder, open_store
from tests.child_process import nightowl
from tests.fakes.llm_server import FakeLLM
from tests.fakes.memory_model import MemoryModel
from tests.harness import RecordingAdapter, running_gateway, turns_done

PRIVATE: dict[str, Any] = {"chat_id": "u1", "chat_type": "private", "user_name": "Ann"}
GROUP: dict[str, Any] = {
    "chat_id": "-7",
    "chat_type": "group",
    "user_name": "Ann",
    "addressed": True,
}


def write_config(tmp_path: Path, llm: FakeLLM) -> Path:
    """A window small enough that /compress has something to archive."""
    path = tmp_path / "config.yaml"
    raw = {
        "data_dir": str(tmp_path / "data"),
        "model": {
            "base_url": llm.openai_base_url,
            "name": "fake-model",
            "max_retries": 0,
            "context_length": 8_192,
            "max_output_tokens": 512,
        },
        "platforms": {"telegram": {"allowed_chats": ["-7"], "allowed_users": ["u1"]}},
    }
    path.write_text(yaml.safe_dump(raw))
    return path


async def ask(adapter: RecordingAdapter, text: str, **where: Any) -> str:
    count = len(adapter.sent)
    await adapter.say(text, **where)
    return (await adapter.wait_sent(count + 1))[-1]


async def run(cwd: Path, *args: str) -> str:
    code, out, err = await nightowl(*args, cwd=cwd)
    assert code == 0, f"nightowl {' '.join(args)}: {err}"
    return out


async def views(cwd: Path, config: Path) -> dict[str, str]:
    """What an operator sees of a data dir: sessions (every row, archived ones too) and
    memory."""
    c = ("-c", str(config))
    commands = {
        "list": ("sessions", "list", *c),
        "show u1": ("sessions", "show", "telegram:u1", *c),
        "show -7": ("sessions", "show", "telegram:-7", *c),
        "export u1": ("sessions", "export", "telegram:u1", *c),
        "export -7": ("sessions", "export", "telegram:-7", *c),
        "memory": ("memory", "list", "--archived", *c),
    }
    outputs = await asyncio.gather(*(run(cwd, *argv) for argv in commands.values()))
    return dict(zip(commands, outputs, strict=True))


async def rows(cwd: Path, config: Path) -> dict[int, str]:
    """The group chat's rows (archived ones too): id → role and text."""
    out = await run(cwd, "sessions", "export", "telegram:-7", "-c", str(config))
    exported = [json.loads(line) for line in out.splitlines()]
    return {row["id"]: f"{row['role']}: {row['content']}" for row in exported}


def backed_up_to(out: str) -> Path:
    first = out.splitlines()[0]
    assert first.startswith("Backed up to "), out
    return Path(first.removeprefix("Backed up to ").split(" (mode")[0])


def modes(directory: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(directory.stat().st_mode)}
    for path in directory.rglob("*"):
        found[str(path.relative_to(directory))] = stat.S_IMODE(path.lstat().st_mode)
    return found


async def test_a_backup_while_messages_flow_restores_sessions_memory_and_reminders(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = MemoryModel()
    path = write_config(tmp_path, fake_llm)
    config = load_config(path)
    (tmp_path / "data" / "hooks").mkdir(parents=True)
    (tmp_path / "data" / "hooks" / "audit.py").write_text("def on_event(event): pass\n")
    due = time.time() + 365 * 86400
    async with open_store(config) as store:
        await store.scheduling.add_reminder(
            Reminder("telegram:u1", "telegram", "u1", "water the plants", due)
        )
    adapter = RecordingAdapter("telegram")
    async with running_gateway(config, adapter) as gateway:
        assert await ask(adapter, "remember me: I take my tea without sugar", **PRIVATE) == "Noted."
        for i in range(4):
            await ask(adapter, f"note {i} " + "w" * 1_500, **PRIVATE)
        assert (await ask(adapter, "/compress", **PRIVATE)).startswith("Compressed:")

        stop = asyncio.Event()

        async def flow() -> int:
            sent = 0
            while not stop.is_set():
                await ask(adapter, f"flowing {sent}", **GROUP)
                sent += 1
            return sent

        flowing = asyncio.create_task(flow())
        await adapter.wait_sent(len(adapter.sent) + 3)
        before = len(adapter.sent)
        during = await run(tmp_path, "backup", "-c", str(path))
        answered_during_backup = len(adapter.sent) - before
        stop.set()
        await flowing
        await turns_done(gateway)
        assert answered_during_backup > 0  # the gateway kept answering, never blocked

        # The one taken while messages flowed is one moment: every row it holds is the
        # live chat's, in order, and its counts hold after restoring.
        first = backed_up_to(during)
        code, out, err = await nightowl(
            "restore", str(first), "--data-dir", str(tmp_path / "r1"), cwd=tmp_path
        )
        assert code == 0, err
        assert "✓ database   state.db" in out
        r1 = tmp_path / "r1" / "config.yaml"
        restored = await rows(tmp_path, r1)
        live = await rows(tmp_path, path)
        # Every row up to the last the copy holds, none after: one moment (a compression
        # since then may have archived rows, never changed their ids or text).
        assert len(restored) >= 6
        assert restored == {i: text for i, text in live.items() if i <= max(restored)}

        # A quiet moment's backup, restored: the operator sees the very same data dir.
        out = await run(tmp_path, "backup", "-c", str(path))
        archive = backed_up_to(out)
        assert stat.S_IMODE(archive.stat().st_mode) == 0o600
        assert archive.parent == tmp_path / "data" / "backups"
        code, restored_out, err = await nightowl(
            "restore", str(archive), "--data-dir", str(tmp_path / "r2"), cwd=tmp_path
        )
        assert code == 0, err
        original = await views(tmp_path, path)
    r2 = tmp_path / "r2" / "config.yaml"
    copy = await views(tmp_path, r2)
    assert copy == original
    assert "archived" in original["show u1"] or "compress" in original["show u1"].lower()
    exported = [json.loads(line) for line in original["export u1"].splitlines()]
    assert any(row["active"] == 0 for row in exported)  # archived rows came back too
    assert "tea without sugar" in copy["memory"]

    lines = restored_out.splitlines()
    assert lines[0].startswith(f"Restored {archive}") and lines[0].endswith(
        f"into {tmp_path / 'r2'}:"
    )
    [database] = [line for line in lines if line.startswith("✓ database")]
    assert "sessions 2" in database and "memories 1" in database and "reminders 1" in database
    assert f"✓ config.yaml (its data_dir now says {tmp_path / 'r2'})" in lines
    assert any(line.startswith("✓ hooks/") and "1 file" in line for line in lines)
    assert (tmp_path / "r2" / "hooks" / "audit.py").read_text() == "def on_event(event): pass\n"

    async with open_store(load_config(path)) as live_store:
        live_reminders = await live_store.scheduling.pending_reminders()
    async with open_store(load_config(r2)) as restored_store:
        restored_reminders = await restored_store.scheduling.pending_reminders()
    assert [r.text for r in restored_reminders] == ["water the plants"]
    assert restored_reminders == live_reminders

    found = modes(tmp_path / "r2")
    assert found["."] == 0o700 and found["hooks"] == 0o700
    wrong = {
        name: f"{mode:o}"
        for name, mode in found.items()
        if name != "." and mode not in (0o600, 0o700)
    }
    assert wrong == {}
    assert all(found[name] == 0o600 for name in ("state.db", "config.yaml", "hooks/audit.py"))
    with tarfile.open(archive) as opened:
        names = opened.getnames()
    assert names[0] == "manifest.json" and "database/state.db" in names
    assert "config/.env" not in names
