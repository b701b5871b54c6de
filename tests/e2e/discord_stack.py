"""The whole Discord path for end-to-end tests: fake Discord -> discord.py -> the Discord
adapter -> the real gateway (router, store, lanes, turn runner, agent) -> the fake model.

:func:`running_stack` builds the adapter from the config the way the CLI does
(:func:`gateway.build.discord_adapter`), only with a short ``guild_ready_timeout`` so
READY comes at once (and no 5 s wait before identifying again after op 9); the gateway
lets it catch up from its store (:func:`gateway.build.catch_up_from_store`). The test
fails when discord.py, the adapter, the gateway or the agent logged an error, or when the
bot token shows up in any log record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.discord_adapter import DiscordAdapter
from gateway.app import Gateway
from gateway.build import discord_adapter
from tests import db
from tests.adapters.discord_fixtures import TOKEN, LogCapture, watching_logs
from tests.fakes import discord_world as world
from tests.fakes.discord_server import FakeDiscord, running_fake_discord
from tests.fakes.discord_world import ALICE, GUILD_ID
from tests.fakes.llm_server import FakeLLM, Recorded
from tests.harness import make_config
from tests.waiting import CEILING, Recording

#: Loggers whose errors fail a test (handler errors in discord.py are only logged).
WATCHED_LOGGERS = ("discord", "adapters", "gateway", "agent")

#: A second human in the guild, not on any allowlist unless a test puts them there.
BOB: dict[str, Any] = {
    "id": "6000000000000002",
    "username": "bob",
    "global_name": "Bob",
    "discriminator": "0",
    "avatar": None,
}

_ids = itertools.count(1 << 21)  # far from the fake's own counter: no id collisions


@dataclass
class Stack:
    """A running fake Discord + gateway, and what the gateway reported receiving."""

    fake: FakeDiscord
    gateway: Gateway
    llm: FakeLLM
    #: Payloads of the gateway's ``message:received`` event (one per stored inbox row).
    received: Recording[dict[str, Any]] = field(default_factory=Recording)

    async def on_received(self, event: str, payload: dict[str, Any]) -> None:
        await self.received.add(payload)

    async def wait_received(self, count: int, seconds: float = CEILING) -> None:
        """Wait until the gateway stored ``count`` inbound rows, then until its lanes idle."""
        await self.received.wait_for(count, seconds)
        assert await self.gateway.lanes.wait_idle(seconds), "lanes still busy"

    async def rows(self, session_key: str) -> list[tuple[str, str]]:
        """(role, text) of the conversation rows stored under ``session_key`` (archived ones
        included; the system prompt left out)."""
        rows = [
            row.message for _, row in await self.gateway.store.operator.export_rows(session_key)
        ]
        return [(m["role"], str(m.get("content") or "")) for m in rows if m["role"] != "system"]

    async def session_keys(self) -> set[str]:
        return {s.session_key for s in await self.gateway.store.operator.list_sessions()}


def discord_section(**overrides: Any) -> dict[str, Any]:
    """``platforms.discord`` of the config: enabled, Alice allowed, unless overridden."""
    section: dict[str, Any] = {"enabled": True, "token": TOKEN, "allowed_users": [ALICE["id"]]}
    section.update(overrides)
    return section


def fast_adapter(config: Any, **tuning: Any) -> DiscordAdapter:
    """The adapter the CLI would build from ``config``, with READY not held back 2 s;
    ``tuning`` overrides more of its settings (e.g. ``stream_edit_interval``)."""
    built = discord_adapter(config)
    assert isinstance(built, DiscordAdapter)
    quick = dataclasses.replace(
        built.settings,
        **{"guild_ready_timeout": 0.05, "ready_timeout": 5.0, "reidentify_delay": 0.0, **tuning},
    )
    return DiscordAdapter(quick)


def watching_all_logs() -> contextlib.AbstractAsyncContextManager[LogCapture]:
    """Watch :data:`WATCHED_LOGGERS`: fail on any error and on the token in any record."""
    return watching_logs(*WATCHED_LOGGERS)


@contextlib.asynccontextmanager
async def running_gateway_on(
    fake: FakeDiscord,
    data_dir: Path,
    llm: FakeLLM,
    *,
    sections: dict[str, Any] | None = None,
    tuning: dict[str, Any] | None = None,
    **discord: Any,
) -> AsyncIterator[Stack]:
    """A gateway with the Discord adapter, connected to an already running ``fake``.

    ``sections`` are more config sections (merged like :func:`tests.harness.make_config`);
    ``discord`` overrides keys of ``platforms.discord``.
    """
    platforms = {"discord": discord_section(**discord)}
    config = make_config(data_dir, llm, platforms=platforms, **(sections or {}))
    gateway = Gateway(config, [fast_adapter(config, **(tuning or {}))])  # catches up itself
    stack = Stack(fake, gateway, llm)
    gateway.events.subscribe(["message:received"], stack.on_received, name="e2e")
    await gateway.start()
    try:
        yield stack
    finally:
        await gateway.stop(drain_seconds=5)


@contextlib.asynccontextmanager
async def running_stack(
    data_dir: Path,
    llm: FakeLLM,
    *,
    sections: dict[str, Any] | None = None,
    tuning: dict[str, Any] | None = None,
    **discord: Any,
) -> AsyncIterator[Stack]:
    """Fake Discord + gateway (see :func:`running_gateway_on`), errors in the log failing."""
    async with (
        watching_all_logs(),
        running_fake_discord() as fake,
        running_gateway_on(
            fake, data_dir, llm, sections=sections, tuning=tuning, **discord
        ) as stack,
    ):
        yield stack


async def add_role(fake: FakeDiscord, role_id: int, name: str) -> None:
    """Create a role in the guild (GUILD_ROLE_CREATE), as a moderator would."""
    role = {"id": str(role_id), "name": name, "permissions": "0", "position": 2, "color": 0,
            "hoist": False, "managed": False, "mentionable": True, "flags": 0}  # fmt: skip
    await fake.dispatch("GUILD_ROLE_CREATE", {"guild_id": str(GUILD_ID), "role": role})


async def dispatch_from_member(
    fake: FakeDiscord, channel_id: int, content: str, *, author: dict[str, Any], roles: list[int]
) -> dict[str, Any]:
    """A guild MESSAGE_CREATE from ``author`` holding ``roles``; returns the payload."""
    data = world.message(world.snowflake(next(_ids)), channel_id, content, author=author)
    data["member"]["roles"] = [str(role) for role in roles]
    fake.messages[int(data["id"])] = data
    await fake.dispatch("MESSAGE_CREATE", data)
    return data


def user_texts(request: Recorded) -> list[str]:
    """The user rows the model was sent, in order."""
    return [str(m["content"]) for m in request.messages if m["role"] == "user"]


def reference_of(payload: dict[str, Any]) -> int | None:
    """The id of the message a bot post replies to (None when it replies to nothing)."""
    reference = payload.get("message_reference")
    return int(reference["message_id"]) if reference else None


def answers_to(fake: FakeDiscord, payload: dict[str, Any]) -> list[str]:
    """What the bot posted in reply to the message ``payload``."""
    return [s.content for s in fake.sent if reference_of(s.payload) == int(payload["id"])]


def backdate_chat(database: Path, session_key: str, hours: float) -> None:
    """Move everything stored for ``session_key`` ``hours`` into the past, as if nobody
    had written there since (the gateway must not be running)."""
    seconds = hours * 3600
    with db.connect(database) as changing:
        changing.execute(
            "UPDATE messages SET created_at = created_at - ? WHERE session_id IN"
            " (SELECT id FROM sessions WHERE session_key = ?)",
            (seconds, session_key),
        )
        changing.execute(
            "UPDATE inbox SET created_at = created_at - ? WHERE session_key = ?",
            (seconds, session_key),
        )
