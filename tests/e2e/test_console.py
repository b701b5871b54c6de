"""The real command line: `nightowl chat` in a terminal-less pipe, stopped and restarted."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.store import NewMessage, SessionOrigin, SQLiteStore
from tests.child_process import (
    Spawn,
    clean_env,
    nightowl,
    without_root_privileges,
    write_config,
)
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import HeldAnswers


def users(request: Recorded) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "user"]


async def test_chat_survives_a_restart(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = write_config(tmp_path, fake_llm)
    fake_llm.script(Reply("Hello Ada!"), Reply("Your name is Ada."))
    code, out, err = await nightowl(
        "chat", "-c", str(config), stdin="My name is Ada.\n", cwd=tmp_path
    )
    assert code == 0, err
    assert "owl › Hello Ada!" in out

    code, out, err = await nightowl(
        "chat", "-c", str(config), stdin="What is my name?\n", cwd=tmp_path
    )
    assert code == 0, err
    assert "owl › Your name is Ada." in out
    assert users(fake_llm.requests[-1]) == ["My name is Ada.", "What is my name?"]
    assert (tmp_path / "data" / "state.db").stat().st_mode & 0o077 == 0  # private to its owner


async def test_run_without_an_llm_key_says_what_to_set(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(f"data_dir: {tmp_path / 'data'}\n")
    code, _, err = await nightowl("run", "-c", str(tmp_path / "config.yaml"), cwd=tmp_path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0]


async def test_run_with_a_refused_bot_token_says_so_in_one_line(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """As doctor says it, not as a traceback: the fake answers 401 to a token it does
    not know, as the Bot API does."""
    config = write_config(tmp_path, fake_llm)
    raw = yaml.safe_load(config.read_text())
    raw["platforms"] = {
        "telegram": {"enabled": True, "token": "999:WRONG", "base_url": telegram.base_url}
    }
    config.write_text(yaml.safe_dump(raw))
    code, _, err = await nightowl("run", "-c", str(config), cwd=tmp_path)
    assert code == 1
    assert "Traceback" not in err
    [line] = [line for line in err.splitlines() if line.startswith("nightowl: ")]
    assert "Telegram adapter could not start" in line and "rejected" in line
    assert "999:WRONG" not in err


async def test_an_invalid_config_is_refused_with_the_key_path(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("compression:\n  threshold: high\n")
    code, _, err = await nightowl("run", "-c", str(tmp_path / "config.yaml"), cwd=tmp_path)
    assert code == 2
    assert 'compression.threshold: expected a number between 0 and 1, got "high"' in err


# -- a chat that keeps running while the test talks to it -----------------------------------


def one_line(err: str) -> str:
    """stderr must be one sentence: no traceback, no second line."""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- defect: two processes on one data dir --------------------------------------------------


async def test_a_second_gateway_on_the_same_data_dir_is_refused_while_sessions_and_doctor_work(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    config = str(write_config(tmp_path, fake_llm))
    first = await spawn("chat", "-c", config, cwd=tmp_path)
    await first.say("remember me")
    await first.out.expect("owl › echo: remember me")
    pid = first.process.pid

    for command in ("chat", "run"):
        code, out, err = await nightowl(command, "-c", config, stdin="hello?\n", cwd=tmp_path)
        assert code != 0 and "owl ›" not in out
        assert f"data dir in use by pid {pid}" in one_line(err)

    code, out, err = await nightowl("sessions", "list", "-c", config, cwd=tmp_path)
    assert code == 0, err
    assert out.splitlines()[1].split()[:3] == ["console:local", "console", "3"]
    code, out, _ = await nightowl("doctor", "-c", config, cwd=tmp_path)
    [database] = [line for line in out.splitlines() if "database:" in line]
    assert database.startswith("✓") and f"in use by a running gateway (pid {pid})" in database

    # forget writes beside the running gateway; the chat then starts afresh.
    code, out, err = await nightowl(
        "sessions", "forget", "console:local", "--yes", "-c", config, cwd=tmp_path
    )
    assert code == 0, err
    assert "Forgot console:local" in out and f"(pid {pid})" in out
    await first.say("who am I?")
    await first.out.expect("owl › echo: who am I?")
    assert users(fake_llm.requests[-1]) == ["who am I?"]
    assert await first.end() == 0
    assert not [r for r in fake_llm.requests if "hello?" in users(r)], "refused ones never ask"


# -- defect: a store error must not kill the console ----------------------------------------


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB file system (tmpfs), for a real full disk; needs root and mount(8)."""
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a 2 MB tmpfs needs root; the RLIMIT_FSIZE test covers a full disk here")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
        timeout=10,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], timeout=10, check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk``; delete the returned file to give them back."""
    filler = disk / "filler"
    with open(filler, "wb") as file:
        with contextlib.suppress(OSError):  # ENOSPC: full
            while True:
                file.write(b"\0" * 65536)
                file.flush()
    return filler


async def test_a_full_disk_gets_one_line_per_message_which_is_stored_once_space_returns(
    tmp_path: Path, fake_llm: FakeLLM, small_tmpfs: Path, spawn: Spawn
) -> None:
    config = write_config(tmp_path, fake_llm, data_dir=small_tmpfs / "data")
    chat = await spawn("chat", "-c", str(config), cwd=tmp_path)
    await chat.say("hello")
    await chat.out.expect("owl › echo: hello")
    filler = fill(small_tmpfs)

    big = "the disk is full " * 20_000  # 340 KB: more than the WAL has room for
    # The store's sentence (docs/design.md#storage) says which disk is full.
    full = f"your message was not stored (the disk holding {small_tmpfs / 'data'} is full"
    await chat.say(big)
    await chat.err.expect(full)
    await chat.say("are you there?")
    await chat.err.expect(full)
    filler.unlink()  # space returns: the waiting messages go in on the next retry, in order
    await chat.err.expect("stored 2 messages that had been waiting")
    await chat.out.expect("owl › echo: are you there?")
    asked = users(fake_llm.requests[-1])
    assert asked[0] == "hello" and asked[1].startswith("the disk is full the disk")
    assert asked[2:] == ["are you there?"]
    await chat.say("and now?")
    await chat.out.expect("owl › echo: and now?")
    assert await chat.end() == 0
    assert chat.err.text.count("not stored") == 2, chat.err.text
    assert "Traceback" not in chat.err.text
    code, out, err = await nightowl(
        "sessions", "export", "console:local", "-c", str(config), cwd=tmp_path
    )
    assert code == 0, err
    stored = [json.loads(line) for line in out.splitlines()]
    assert [r["content"].strip() for r in stored if r["role"] == "user"] == [
        "hello",
        big.strip(),
        "are you there?",
        "and now?",
    ], "every message stored, once, in order"


async def test_a_message_that_cannot_be_stored_is_reported_and_end_of_input_exits(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    """A full disk without root: the child may not grow any file past a size limit."""
    config = str(write_config(tmp_path, fake_llm))
    code, _, err = await nightowl("chat", "-c", config, stdin="hello\n", cwd=tmp_path)
    assert code == 0, err
    limit = (tmp_path / "data" / "state.db").stat().st_size + 64 * 1024

    def full_disk() -> None:  # in the child: EFBIG past ``limit`` (SIGXFSZ is ignored)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    chat = await spawn("chat", "-c", config, cwd=tmp_path, preexec_fn=full_disk)
    unstored = f"your message was not stored (cannot use {tmp_path / 'data' / 'state.db'}: "
    await chat.say("x" * limit)  # more than any file may hold: the database's size grows
    await chat.err.expect(unstored + "disk I/O error)")  # EFBIG
    await chat.say("/status")
    await chat.err.expect(unstored + "disk I/O error)")
    assert await chat.end() == 1
    assert "2 messages could not be stored and were not sent" in chat.err.text
    assert "Traceback" not in chat.err.text
    assert len(fake_llm.requests) == 1  # nothing half-stored reached the model


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
async def test_undecodable_input_is_replaced_not_fatal(
    tmp_path: Path, fake_llm: FakeLLM, locale: str
) -> None:
    config = write_config(tmp_path, fake_llm)
    env = {k: v for k, v in clean_env().items() if k != "PYTHONUTF8"} | {"LC_ALL": locale}
    code, out, err = await nightowl(
        "chat", "-c", str(config), stdin=b"\xff\xfe ok\n", cwd=tmp_path, env=env
    )
    assert code == 0, err
    assert "owl › echo: \ufffd\ufffd ok" in out
    assert users(fake_llm.requests[-1]) == ["\ufffd\ufffd ok"]


# -- defect: an unusable state.db -----------------------------------------------------------


async def damage(data_dir: Path, how: str) -> None:
    """A state.db of random bytes, or a real one cut to a third of its size."""
    path = data_dir / "state.db"
    if how == "garbage":
        data_dir.mkdir(parents=True)  # noqa: ASYNC240 - test setup, before any child runs
        path.write_bytes(os.urandom(64 * 1024))
        return
    async with SQLiteStore(path) as store:
        origin = SessionOrigin("console:local", "console", "local")
        session = await store.conversation.start_session(
            origin, "m", NewMessage({"role": "system"}, 1)
        )
        for n in range(300):
            row = NewMessage({"role": "user", "content": f"message {n} " * 40}, 100)
            await store.conversation.commit_turn(session.id, [row])
    os.truncate(path, path.stat().st_size // 3)


COMMANDS = ("chat", "run", "sessions list")


async def each_command(config: Path | str, cwd: Path, **options: Any) -> list[tuple[int, str]]:
    """``chat``, ``run`` and ``sessions list`` one after the other (side by side, the
    first to hold the data dir's lock would refuse the others): (exit code, stderr line)."""
    results = [
        await nightowl(*command.split(), "-c", str(config), stdin="hello\n", cwd=cwd, within=20)
        for command in COMMANDS
    ]
    for command, (code, out, err) in zip(COMMANDS, results, strict=True):
        assert code != 0 and "owl ›" not in out, (command, out, err)
    return [(code, one_line(err)) for code, _, err in results]


@pytest.mark.parametrize("how", ["garbage", "truncated"])
async def test_a_damaged_database_is_one_line_and_never_a_hang(
    tmp_path: Path, fake_llm: FakeLLM, how: str
) -> None:
    config = write_config(tmp_path, fake_llm)
    await damage(tmp_path / "data", how)
    for _, line in await each_command(config, tmp_path):
        assert "state.db is damaged (PRAGMA integrity_check: " in line, line
        assert "restore a backup" in line


async def test_a_read_only_data_dir_is_a_permissions_problem_in_one_line(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    config = write_config(tmp_path, fake_llm)
    code, _, err = await nightowl("chat", "-c", str(config), stdin="hello\n", cwd=tmp_path)
    assert code == 0, err
    data = tmp_path / "data"
    (data / "state.db").chmod(0o400)
    data.chmod(0o500)
    prefix = without_root_privileges()
    results, codes = [], []
    try:
        for command in COMMANDS:  # one after the other: side by side, one would hold the lock
            child = await spawn(*command.split(), "-c", str(config), cwd=tmp_path, prefix=prefix)
            results.append(child)
            codes.append(await child.end(within=20))
    finally:
        data.chmod(0o700)
    assert all(codes), codes
    for child in results:
        line = one_line(child.err.text)
        assert line.startswith(f"nightowl: permission denied: cannot write to {data}"), line
        assert "backup" not in line


async def test_a_read_only_file_system_is_said_in_one_line(
    tmp_path: Path, fake_llm: FakeLLM, small_tmpfs: Path
) -> None:
    config = str(write_config(tmp_path, fake_llm, data_dir=small_tmpfs / "data"))
    code, _, err = await nightowl("chat", "-c", config, stdin="hello\n", cwd=tmp_path)
    assert code == 0, err
    remount = ["mount", "-o", "remount,ro", str(small_tmpfs)]
    await asyncio.to_thread(subprocess.run, remount, check=True, timeout=10)
    for _, line in await each_command(config, tmp_path):
        assert f"{small_tmpfs / 'data'} is on a read-only file system" in line, line


# -- the terminal ---------------------------------------------------------------------------


async def test_a_paste_longer_than_the_terminal_line_limit_reaches_the_model_whole(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    config = str(write_config(tmp_path, fake_llm))
    chat = await spawn("chat", "-c", config, cwd=tmp_path, terminal=True)
    await chat.out.expect("you › ")
    paste = "".join(f"{n:05d} " for n in range(2000))  # 12,000 characters on one line
    await chat.say(paste)
    await chat.out.expect("owl › echo: 00000 00001")
    assert users(fake_llm.requests[-1]) == [paste]
    await chat.out.expect("you › ")
    await chat.say("typo\x7f\x7f\x7f\x7fshort one")  # Backspace still edits the line
    await chat.out.expect("owl › echo: short one")
    assert await chat.end() == 0
    assert chat.master is not None
    mode = termios.tcgetattr(chat.master)[3]
    assert mode & termios.ICANON and mode & termios.ECHO, "the terminal is given back"
    assert users(fake_llm.requests[-1])[-1] == "short one"


async def test_a_multi_line_paste_is_one_message_and_one_model_call(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    """The terminal brackets a paste (it was asked to): its lines stay one message, sent
    by the Enter typed after it, not one turn (and one paid call) per line."""
    config = str(write_config(tmp_path, fake_llm))
    chat = await spawn("chat", "-c", config, cwd=tmp_path, terminal=True)
    await chat.out.expect("you › ")
    assert "\x1b[?2004h" in chat.out.text  # bracketed paste asked of the terminal
    # A terminal sends a pasted line break as Enter does (CR); the driver makes it LF.
    pasted = "".join(f"line {n}: some log output\r" for n in range(60))
    await chat.type(f"look at this:\x1b[200~{pasted}\x1b[201~what went wrong?\r")
    await chat.out.expect("owl › echo: look at this:line 0: some log output")
    [text] = users(fake_llm.requests[-1])
    assert text == "look at this:" + pasted.replace("\r", "\n") + "what went wrong?"
    assert len(fake_llm.requests) == 1
    await chat.out.expect("you › ")
    assert await chat.end() == 0
    assert "\x1b[?2004l" in chat.out.text  # and its end asked at exit


async def test_a_slow_model_shows_waiting_once(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    config = str(write_config(tmp_path, fake_llm))
    slow = HeldAnswers(
        lambda request: Reply("at last" if "slow" in request.last_user_text else "quick"),
        matching=lambda request: "slow" in request.last_user_text,
    )
    fake_llm.responder = slow.respond
    chat = await spawn("chat", "-c", config, cwd=tmp_path, terminal=True)
    await chat.out.expect("you › ")
    await chat.say("are you slow?")
    await chat.out.expect("(waiting for the model…)")  # the answer is held until it shows
    slow.release()
    await chat.out.expect("owl › at last")
    await chat.say("and now?")
    await chat.out.expect("owl › quick")
    assert await chat.end() == 0
    # Only the slow reply had it: a quick one (well under the 2 s notice delay) has not.
    assert chat.out.text.count("waiting for the model") == 1


async def test_model_output_cannot_drive_the_terminal(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = write_config(tmp_path, fake_llm)
    fake_llm.script(
        Reply("\x1b]0;pwned\x07red \x1b[31mtext\x1b[0m\x1b[2J\rover\x08\x07 done\ttab\nnext\x9b2J")
    )
    code, out, err = await nightowl("chat", "-c", str(config), stdin="hi\n", cwd=tmp_path)
    assert code == 0, err
    assert out == "owl › red textover done\ttab\nnext\n"


async def test_chat_keeps_log_lines_out_of_the_conversation(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = write_config(tmp_path, fake_llm, max_retries=1)
    fake_llm.script(Reply(status=500), Reply("fine after a retry"))
    code, out, err = await nightowl("chat", "-c", str(config), stdin="hi\n", cwd=tmp_path)
    assert code == 0, err
    assert out == "owl › fine after a retry\n"
    assert err == "", "no INFO telemetry or SDK retry lines between chat lines"
    log = (tmp_path / "data" / "chat.log").read_text()
    assert "Retrying request" in log and "model fake-model at 127.0.0.1:" in log


async def test_run_with_only_the_console_in_a_terminal_logs_to_chat_log(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    """`nightowl run` with no platform is the same conversation as `nightowl chat`: its
    INFO lines go to chat.log, not between the prompts."""
    config = str(write_config(tmp_path, fake_llm))
    fake_llm.script(Reply("hello there"))
    chat = await spawn("run", "-c", config, cwd=tmp_path, terminal=True)
    await chat.out.expect("you › ")
    await chat.say("hi")
    await chat.out.expect("owl › hello there")
    assert await chat.end() == 0
    assert "INFO" not in chat.err.text and "INFO" not in chat.out.text
    assert "model fake-model at 127.0.0.1:" in (tmp_path / "data" / "chat.log").read_text()


def test_doctor_read_by_head_ends_without_a_traceback(tmp_path: Path) -> None:
    """`nightowl doctor | head -1`: the reader leaves after one line."""
    (tmp_path / "config.yaml").write_text(f"data_dir: {tmp_path / 'data'}\n")
    command = f"{sys.executable} -m gateway doctor -c {tmp_path / 'config.yaml'} | head -1"
    done = subprocess.run(
        command, shell=True, capture_output=True, text=True, env=clean_env(), timeout=120
    )
    assert done.stdout.startswith("✓ config: ")
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
