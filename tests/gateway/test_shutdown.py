"""Graceful shutdown of the real `nightowl run` process (SPEC F7), with systemd's notify socket.

Each test starts the command line as a child process (console adapter on pipes) against
the fake LLM, sends a message, and signals the process while the model is answering.
Synchronisation is on what the process says: notify datagrams, log lines, stdout; every
wait is bounded by tests/waiting.py's CEILING, and no assertion measures time.
"""

from __future__ import annotations

import asyncio
import secrets
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests import db
from tests.child_process import Spawn, clean_env, write_config
from tests.fakes.llm_server import FakeLLM, Reply
from tests.harness import HeldAnswers
from tests.waiting import CEILING

#: A shutdown bound far beyond any wait of these tests: an exit within one wait shows
#: that the process did not wait the bound out.
BOUND_NEVER_REACHED = ("--shutdown-timeout", str(4 * CEILING))


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
        async with asyncio.timeout(CEILING):
            while not any(assignment in message.splitlines() for message in self.received):
                self.received.append((await loop.sock_recv(self.sock, 4096)).decode())
        return self.received

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
async def notify_socket() -> AsyncIterator[NotifySocket]:
    sock = NotifySocket()
    yield sock
    sock.close()


def stored(config: Path) -> tuple[list[tuple[str, str, int]], int]:
    """(role, content, pending_delivery) of every message row, and the inbox size."""
    data = config.parent / "data"
    messages = db.rows(data, "SELECT role, content, pending_delivery FROM messages ORDER BY id")
    return messages, db.value(data, "SELECT count(*) FROM inbox")


async def test_sigterm_during_a_turn_finishes_the_reply_and_exits_0(
    tmp_path: Path, fake_llm: FakeLLM, notify_socket: NotifySocket, spawn: Spawn
) -> None:
    turn = HeldAnswers(lambda request: Reply(f"answer to: {request.last_user_text}"))
    fake_llm.responder = turn.respond
    config = write_config(tmp_path, fake_llm)
    env = clean_env(NOTIFY_SOCKET=notify_socket.name, WATCHDOG_USEC="200000")
    owl = await spawn("run", "-c", str(config), *BOUND_NEVER_REACHED, cwd=tmp_path, env=env)
    await notify_socket.wait_for("READY=1")
    await notify_socket.wait_for("WATCHDOG=1")
    await owl.say("are you there?")
    await fake_llm.wait_for_requests(1)  # the turn is in flight

    owl.signal(signal.SIGTERM)
    await owl.err.expect("shutting down")
    await notify_socket.wait_for("STOPPING=1")
    turn.release()

    assert "owl ›" not in await owl.out.expect("owl › answer to: are you there?\n")
    # The exit follows the reply, not the shutdown bound (far beyond this wait).
    assert await owl.wait() == 0
    rows, inbox = stored(config)
    assert rows[-2:] == [
        ("user", "are you there?", 0),
        ("assistant", "answer to: are you there?", 0),
    ]
    assert inbox == 0


async def test_a_turn_longer_than_the_bound_is_stopped_and_kept_for_the_next_start(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    fake_llm.script(Reply(hang=True))
    config = write_config(tmp_path, fake_llm)
    owl = await spawn("run", "-c", str(config), "--shutdown-timeout", "0.5", cwd=tmp_path)
    await owl.say("a question the model never answers")
    await fake_llm.wait_for_requests(1)

    owl.signal(signal.SIGTERM)
    await owl.err.expect("shutting down")
    assert await owl.wait() == 0  # the model never answers: only the bound ends the turn
    await owl.err.expect("turns still running after")
    rows, inbox = stored(config)
    assert [role for role, _, _ in rows] == ["system"]  # nothing half-written
    assert inbox == 1  # the message waits for its turn at the next start


async def test_a_second_signal_exits_at_once(
    tmp_path: Path, fake_llm: FakeLLM, spawn: Spawn
) -> None:
    fake_llm.script(Reply(hang=True))
    config = write_config(tmp_path, fake_llm)
    owl = await spawn("run", "-c", str(config), *BOUND_NEVER_REACHED, cwd=tmp_path)
    await owl.say("hello")
    await fake_llm.wait_for_requests(1)

    owl.signal(signal.SIGTERM)
    await owl.err.expect("shutting down")
    owl.signal(signal.SIGTERM)
    assert await owl.wait() == 128 + signal.SIGTERM  # long before the shutdown bound
    await owl.err.expect("second signal")
    _, inbox = stored(config)
    assert inbox == 1
