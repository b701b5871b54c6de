"""Graceful shutdown of the real `nightowl run` process (SPEC F7), with systemd's notify socket.

Each test starts the command line as a child process (console adapter on pipes) against
the fake LLM, sends a message, and signals the process while the model is answering.
Synchronisation is on what the process says: notify datagrams, log lines, stdout.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.fakes.llm_server import FakeLLM, Recorded, Reply

WITHIN = 10.0  # generous ceiling for one wait; the tests finish far sooner


def write_config(tmp_path: Path, llm: FakeLLM) -> Path:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"data_dir: {tmp_path / 'data'}\n"
        "model:\n"
        f"  base_url: {llm.openai_base_url}\n"
        "  name: fake-model\n"
        "  max_retries: 0\n"
    )
    return config


class NotifySocket:
    """What systemd listens on for sd_notify: an abstract unix datagram socket."""

    def __init__(self) -> None:
        self.name = f"@nightowl-test-{secrets.token_hex(6)}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + self.name[1:])
        self.sock.setblocking(False)
        self.received: list[str] = []

    async def wait_for(self, assignment: str) -> list[str]:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(WITHIN):
            while not any(assignment in message.splitlines() for message in self.received):
                self.received.append((await loop.sock_recv(self.sock, 4096)).decode())
        return self.received

    def close(self) -> None:
        self.sock.close()


class Nightowl:
    """A running `nightowl run` child process and the lines it printed."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stdout: list[str] = []
        self.stderr: list[str] = []

    async def say(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{text}\n".encode())
        await self.process.stdin.drain()

    async def line(self, stream: str, contains: str) -> str:
        """Wait for a line containing ``contains`` on stdout or stderr."""
        reader = self.process.stdout if stream == "stdout" else self.process.stderr
        seen = self.stdout if stream == "stdout" else self.stderr
        assert reader is not None
        async with asyncio.timeout(WITHIN):
            while True:
                raw = await reader.readline()
                if not raw:
                    raise AssertionError(f"{stream} ended without {contains!r}: {seen}")
                seen.append(raw.decode().rstrip("\n"))
                if contains in seen[-1]:
                    return seen[-1]

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def exit_code(self, within: float = WITHIN) -> int:
        async with asyncio.timeout(within):
            return await self.process.wait()


@pytest.fixture
async def notify_socket() -> AsyncIterator[NotifySocket]:
    sock = NotifySocket()
    yield sock
    sock.close()


async def start_nightowl(config: Path, *args: str, env: dict[str, str] | None = None) -> Nightowl:
    environ = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    environ.update(env or {})
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "run",
        "-c",
        str(config),
        *args,
        cwd=config.parent,
        env=environ,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return Nightowl(process)


def gated(llm: FakeLLM) -> asyncio.Event:
    """The model answers only once the returned event is set."""
    release = asyncio.Event()

    async def respond(request: Recorded) -> Reply:
        await release.wait()
        return Reply(f"answer to: {request.last_user_text}")

    llm.responder = respond
    return release


def stored(config_dir: Path) -> tuple[list[tuple[str, str, int]], int]:
    """(role, content, pending_delivery) of every message row, and the inbox size."""
    with sqlite3.connect(config_dir / "data" / "state.db") as db:
        rows = db.execute("SELECT role, content, pending_delivery FROM messages ORDER BY id")
        inbox = db.execute("SELECT COUNT(*) FROM inbox").fetchone()[0]
        return list(rows), inbox


async def test_sigterm_during_a_turn_finishes_the_reply_and_exits_0(
    tmp_path: Path, fake_llm: FakeLLM, notify_socket: NotifySocket
) -> None:
    release = gated(fake_llm)
    owl = await start_nightowl(
        write_config(tmp_path, fake_llm),
        "--shutdown-timeout",
        "5",
        env={"NOTIFY_SOCKET": notify_socket.name, "WATCHDOG_USEC": "200000"},
    )
    await notify_socket.wait_for("READY=1")
    await notify_socket.wait_for("WATCHDOG=1")
    await owl.say("are you there?")
    await fake_llm.wait_for_requests(1)  # the turn is in flight

    owl.signal(signal.SIGTERM)
    await owl.line("stderr", "shutting down")
    await notify_socket.wait_for("STOPPING=1")
    signalled = time.monotonic()
    release.set()

    assert await owl.line("stdout", "owl ›") == "owl › answer to: are you there?"
    assert await owl.exit_code() == 0
    assert time.monotonic() - signalled < 5
    rows, inbox = stored(tmp_path)
    assert rows[-2:] == [
        ("user", "are you there?", 0),
        ("assistant", "answer to: are you there?", 0),
    ]
    assert inbox == 0


async def test_a_turn_longer_than_the_bound_is_stopped_and_kept_for_the_next_start(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.script(Reply(hang=True))
    config = write_config(tmp_path, fake_llm)
    owl = await start_nightowl(config, "--shutdown-timeout", "0.5")
    await owl.say("a question the model never answers")
    await fake_llm.wait_for_requests(1)

    owl.signal(signal.SIGTERM)
    await owl.line("stderr", "shutting down")
    signalled = time.monotonic()
    assert await owl.exit_code() == 0
    assert time.monotonic() - signalled < 3
    await owl.line("stderr", "turns still running after")
    rows, inbox = stored(tmp_path)
    assert [role for role, _, _ in rows] == ["system"]  # nothing half-written
    assert inbox == 1  # the message waits for its turn at the next start


async def test_a_second_signal_exits_at_once(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.script(Reply(hang=True))
    owl = await start_nightowl(write_config(tmp_path, fake_llm), "--shutdown-timeout", "60")
    await owl.say("hello")
    await fake_llm.wait_for_requests(1)

    owl.signal(signal.SIGTERM)
    await owl.line("stderr", "shutting down")
    owl.signal(signal.SIGTERM)
    assert await owl.exit_code(within=3) == 128 + signal.SIGTERM
    await owl.line("stderr", "second signal")
    _, inbox = stored(tmp_path)
    assert inbox == 1
