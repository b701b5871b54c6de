"""What nightowl keeps is private from the first run: the real command line as a child
process, started with a usual umask (022), and every file's mode while it runs and after
(docs/design.md#private-files)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.child_process import Chat, Spawn, clean_env, write_config
from tests.fakes.llm_server import FakeLLM


def usual_umask() -> None:
    """Runs in the child before nightowl: files would be 0644 and dirs 0755 by default."""
    os.umask(0o022)


def modes(directory: Path) -> dict[str, int]:
    """Every entry under ``directory`` (itself as "."), with its permission bits."""
    found = {".": stat.S_IMODE(directory.stat().st_mode)}
    for path in directory.rglob("*"):
        found[str(path.relative_to(directory))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def open_to_others(found: dict[str, int]) -> dict[str, str]:
    return {name: f"{mode:04o}" for name, mode in found.items() if mode & 0o077}


async def test_a_first_run_keeps_every_file_private_from_its_first_write(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    # The server's window is smaller than the config says: the message overflows it, so
    # the context-length cache is written during this run too.
    fake_llm.context_window = 3_000
    config = write_config(tmp_path, fake_llm, context_length=8_192, max_output_tokens=512)
    data = tmp_path / "data"
    assert not data.exists()

    chat = await spawn(
        "chat", "-c", str(config), "--name", "me", cwd=tmp_path, preexec_fn=usual_umask
    )
    await chat.say("part 0: " + "lorem ipsum dolor " * 700)
    await chat.out.expect("owl › ")
    await chat.out.expect("\n")  # the whole answer (that this one message is too long)
    running = modes(data)
    assert {"state.db", "state.db-wal", "state.db-shm", "chat.log"} <= running.keys(), running
    assert "context_length_cache.yaml" in running, running
    assert running["."] == 0o700
    assert open_to_others(running) == {}

    export = await Chat.start(
        "sessions", "export", "console:me", "-o", str(tmp_path / "me.jsonl"), "-c", str(config),
        cwd=tmp_path, env=clean_env(), preexec_fn=usual_umask,
    )  # fmt: skip
    try:
        assert await export.end() == 0, export.err.text
    finally:
        export.kill()
    assert "lorem ipsum" in (tmp_path / "me.jsonl").read_text()
    assert stat.S_IMODE((tmp_path / "me.jsonl").stat().st_mode) == 0o600

    assert await chat.end() == 0, chat.err.text
    after = modes(data)
    assert after["."] == 0o700 and "state.db" in after
    assert open_to_others(after) == {}
