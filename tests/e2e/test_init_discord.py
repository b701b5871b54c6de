"""``nightowl init`` for Discord: the token checked by a login, the owner paired by a
direct message to the bot. In this process (discord.py is pointed at the fake Discord by
class attributes, which a child process would not have); the fakes run on a loop of their
own in a thread, init on this one as the command line runs it, its answers on stdin."""

from __future__ import annotations

import asyncio
import io
import os
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import discord
import pytest
import yaml
import yarl

from gateway.ops.cli import main
from tests.fakes.discord_server import FakeDiscord
from tests.fakes.discord_world import ALICE, DM_CHANNEL_ID
from tests.fakes.local_servers import FakeLlamaCpp
from tests.waiting import CEILING


class Fakes:
    """A loop in a thread running the fake Discord and a fake local model server."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.discord = FakeDiscord()
        self.llama = FakeLlamaCpp(served=4_096)
        self.run(self.discord.start())
        self.run(self.llama.start())

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CEILING)

    def soon(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def close(self) -> None:
        self.run(self.discord.stop())
        self.run(self.llama.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(CEILING)
        self.loop.close()


class Screen(io.StringIO):
    """stdout: what init printed; the owner answers the code as soon as it shows."""

    def __init__(self, fakes: Fakes) -> None:
        super().__init__()
        self.fakes = fakes
        self.sent_code: str | None = None

    def write(self, text: str) -> int:
        written = super().write(text)
        shown = self.getvalue()
        if "the bot token was refused" in shown:
            self.fakes.discord.reject_token = False  # the owner pastes the right one next
        marker = "code in a direct message: "
        if marker in shown and self.sent_code is None:
            self.sent_code = shown.split(marker, 1)[1].split()[0]
            dm = self.fakes.discord.dispatch_message(DM_CHANNEL_ID, self.sent_code, author=ALICE)
            self.fakes.soon(dm)
        return written


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fakes]:
    running = Fakes()
    base = f"http://127.0.0.1:{running.discord.port}"
    monkeypatch.setattr(discord.http.Route, "BASE", f"{base}/api/v10")
    gateway = yarl.URL(f"ws://127.0.0.1:{running.discord.port}/gateway")
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", gateway)
    umask = os.umask(0o022)
    os.umask(umask)
    try:
        yield running
    finally:
        os.umask(umask)  # main() makes this process's files private
        running.close()


def test_init_checks_a_discord_token_and_pairs_the_owner_by_direct_message(
    tmp_path: Path, fakes: Fakes, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "owl"
    fakes.discord.reject_token = True
    answers = f"discord\nwrong-token\nright-token\n127.0.0.1:{fakes.llama.port}\n\n"
    screen = Screen(fakes)
    monkeypatch.setattr("sys.stdin", io.StringIO(answers))
    monkeypatch.setattr("sys.stdout", screen)

    assert main(["init", "--data-dir", str(data), "--pair-timeout", str(CEILING)]) == 0
    shown = screen.getvalue()
    assert "✗ the bot token was refused" in shown
    assert "✓ bot nightowl" in shown
    assert f"✓ Paired discord user {ALICE['id']}" in shown
    config = yaml.safe_load((data / "config.yaml").read_text())
    assert config["platforms"]["discord"] == {
        "enabled": True,
        "token": "${DISCORD_BOT_TOKEN}",
        "allowed_users": [ALICE["id"]],
    }
    assert "DISCORD_BOT_TOKEN=right-token" in (data / ".env").read_text().splitlines()
    welcome = [m for m in fakes.discord.sent if m.channel_id == DM_CHANNEL_ID]
    assert len(welcome) == 1 and "owner" in welcome[0].content
