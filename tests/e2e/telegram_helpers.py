"""Helpers for Telegram end-to-end tests: the real gateway and the real Telegram adapter,
built from the config the way ``nightowl run`` builds them, against the fake Bot API
server and the fake LLM."""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.telegram import TelegramAdapter
from gateway.app import Gateway
from gateway.build import telegram_adapter
from gateway.config.schema import Config
from tests.fakes.llm_server import FakeLLM, Recorded
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import make_config, running_gateway

BOT_USERNAME = "NightowlBot"  # FakeTelegram's default bot
ANN = {"id": 42, "is_bot": False, "first_name": "Ann"}
BOB = {"id": 43, "is_bot": False, "first_name": "Bob"}

#: Test-speed timings; everything else comes from the config through gateway.platforms.
FAST = {
    "poll_timeout": 1.0,
    "retry_backoff": 0.01,
    "typing_delay": 0.0,
    "typing_interval": 0.05,
    "stream_edit_interval": 0.1,
    "stop_timeout": 2.0,
}


def telegram_config(
    data_dir: Path,
    llm: FakeLLM,
    server: FakeTelegram,
    *,
    users: tuple[int, ...] = (ANN["id"],),
    chats: tuple[int, ...] = (),
    sections: dict[str, Any] | None = None,
    **telegram: Any,
) -> Config:
    """A config with Telegram enabled against ``server`` and the model on ``llm``;
    ``telegram`` adds keys to platforms.telegram, ``sections`` to the top level."""
    platform = {
        "enabled": True,
        "token": server.token,
        "base_url": server.base_url,
        "allowed_users": list(users),
        "allowed_chats": list(chats),
        **telegram,
    }
    return make_config(data_dir, llm, platforms={"telegram": platform}, **(sections or {}))


def adapter_for(config: Config, **overrides: Any) -> TelegramAdapter:
    """The adapter ``nightowl run`` would build from ``config``, with test-speed timings."""
    mapped = telegram_adapter(config)
    assert isinstance(mapped, TelegramAdapter)
    return TelegramAdapter(replace(mapped.settings, **{**FAST, **overrides}))


@contextlib.asynccontextmanager
async def telegram_gateway(config: Config, **overrides: Any) -> AsyncIterator[Gateway]:
    """A started gateway with a fresh Telegram adapter; stopped (drained) on exit."""
    async with running_gateway(config, adapter_for(config, **overrides)) as gateway:
        yield gateway


def push_mention(server: FakeTelegram, chat_id: int, text: str, **kwargs: Any) -> dict:
    """Queue "@NightowlBot <text>" with the mention entity Telegram attaches."""
    mention = f"@{BOT_USERNAME}"
    entities = [{"type": "mention", "offset": 0, "length": len(mention)}]
    return server.push_text(chat_id, f"{mention} {text}", entities=entities, **kwargs)


def push_command(server: FakeTelegram, chat_id: int, command: str, **kwargs: Any) -> dict:
    """Queue a command ("/status@NightowlBot") with its bot_command entity."""
    name = command.split(" ", 1)[0]
    entities = [{"type": "bot_command", "offset": 0, "length": len(name)}]
    return server.push_text(chat_id, command, entities=entities, **kwargs)


def redeliver(server: FakeTelegram, update_id: int, message: dict) -> None:
    """Queue ``message`` again under its old update id, as Telegram does for an update
    whose offset it never saw confirmed."""
    server.push_update({"update_id": update_id, "message": message})


def last_update_id(server: FakeTelegram) -> int:
    return server.pending[-1]["update_id"]


def user_texts(request: Recorded) -> list[str]:
    return [str(m["content"]) for m in request.messages if m["role"] == "user"]


def visible(telegram_html: str) -> str:
    """What a Telegram user sees of an HTML message."""
    return html.unescape(re.sub(r"<[^>]*>", "", telegram_html))
