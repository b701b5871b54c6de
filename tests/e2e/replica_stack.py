"""Gateway replicas as a user runs them: ``python -m gateway run`` child processes with
one config each (own data dir, own webhook port) on one PostgreSQL database, Telegram in
webhook mode against the fake Bot API, and the test in the place of Telegram and the
load balancer in front of the replicas (docs/design.md#replicas).

Used by tests/e2e/test_replicas.py and bench/replicas.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from tests.child_process import Chat, clean_env
from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.waiting import CEILING

SECRET = "replicas-share-this-secret"
HEADER = "X-Telegram-Bot-Api-Secret-Token"
#: Users 1000.. each talk to the bot in their private chat (chat id = user id).
FIRST_USER = 1000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def replica_config(
    directory: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    *,
    dsn: str | None,
    port: int,
    users: int,
    sweep_seconds: float = 1.0,
) -> Path:
    """``directory``/config.yaml for one replica (``dsn`` None: SQLite, one process)."""
    directory.mkdir(parents=True, exist_ok=True)
    raw: dict[str, Any] = {
        "data_dir": str(directory / "data"),
        "model": {"base_url": llm.openai_base_url, "name": "fake-model", "max_retries": 0},
        "platforms": {
            "telegram": {
                "enabled": True,
                "token": telegram.token,
                "base_url": telegram.base_url,
                "allowed_users": [str(FIRST_USER + i) for i in range(users)],
                "webhook": {
                    "url": "https://bot.example.org/tg/hook",
                    "port": port,
                    "secret_token": SECRET,
                },
            }
        },
        "compression": {"idle_after_minutes": None},
    }
    if dsn is not None:
        raw["store"] = {"backend": "postgres", "dsn": dsn, "sweep_seconds": sweep_seconds}
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@dataclass
class Replica:
    name: str
    port: int
    chat: Chat

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/tg/hook"

    @property
    def alive(self) -> bool:
        return self.chat.process.returncode is None


async def start_replica(
    name: str, config: Path, port: int, cwd: Path, start: Callable[..., Awaitable[Chat]]
) -> Replica:
    """``nightowl run`` with ``config``, started by ``start`` (a test's ``spawn`` fixture,
    which kills it at teardown) and ready once its webhook listens."""
    chat = await start("run", "-c", str(config), cwd=cwd, env=clean_env())
    await chat.err.expect("Telegram webhook listening", within=2 * CEILING)
    return Replica(name, port, chat)


@dataclass
class Balancer:
    """Telegram and a load balancer in one: every update is POSTed to a replica (in
    turn), and to another when one cannot take it, until one answers 200 — so an update
    is acknowledged only by a replica that stored it."""

    telegram: FakeTelegram
    replicas: list[Replica]
    acknowledged: dict[int, str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _turn: itertools.count[int] = field(default_factory=itertools.count)
    _session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Balancer:
        self._session = aiohttp.ClientSession(headers={HEADER: SECRET})
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    async def say(self, user: int, text: str) -> int:
        """Deliver ``text`` from ``user`` in their private chat; the update's id."""
        update_id = next(self._ids)
        message = self.telegram.make_message(
            user, text, user={"id": user, "is_bot": False, "first_name": f"U{user}"}
        )
        update = {"update_id": update_id, "message": message}
        assert self._session is not None
        async with asyncio.timeout(2 * CEILING):
            while True:
                replica = self.replicas[next(self._turn) % len(self.replicas)]
                if not replica.alive:
                    continue
                with contextlib.suppress(aiohttp.ClientError):
                    async with self._session.post(replica.url, json=update) as response:
                        if response.status == 200:
                            self.acknowledged[update_id] = replica.name
                            return update_id
                await asyncio.sleep(0)  # the next replica (a real balancer backs off too)


async def chat_traffic(
    balancer: Balancer,
    users: int,
    messages: int,
    *,
    text: Callable[[int, int], str],
    between: Callable[[int, int], Any] | None = None,
) -> dict[int, list[float]]:
    """Every user sends ``messages`` messages, one after another (each acknowledged before
    the next, as Telegram sends a chat's updates); users at once. Returns when each
    message was acknowledged, per user (monotonic)."""
    acked: dict[int, list[float]] = {}

    async def one_user(index: int) -> None:
        user = FIRST_USER + index
        acked[user] = []
        for m in range(messages):
            if between is not None:
                await between(index, m)
            await balancer.say(user, text(index, m))
            acked[user].append(time.monotonic())

    await asyncio.gather(*(one_user(i) for i in range(users)))
    return acked
