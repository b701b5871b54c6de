"""A replayed night for the dashboard's browser tests and the README's screenshot.

A busy group's night goes through ``nightowl replay``'s own engine (the real router,
lanes, hygiene, agent loop and compressor, the instant scripted model, an 8,000-token
window), and two more chats — a Telegram group and a Discord channel — go through the
same gateway parts, so the dashboard has sessions on three platforms with compressions
to chart and archived rows to find.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from agent.scripted import ScriptedProvider
from gateway.app import Gateway
from gateway.build import Providers
from gateway.config.schema import Config, parse_config
from gateway.ops.replay.run import ReplayLine, replay, replay_config
from tests.harness import RecordingAdapter

WINDOW = 8000
#: Said once, early: archived by morning, found by search.
SECRET_LINE = "the wifi password for the cabin is owlcapybara"
SECRET_WORD = "owlcapybara"
WORDS = (
    "deploy server coffee meeting bug release budget weekend tickets dinner plan"
    " train museum invoice backup garden concert lunch report"
).split()
PEOPLE = {"Alice": "101", "Bob": "102", "Chen": "103"}
TELEGRAM_GROUP = "-1001"
DISCORD_CHANNEL = "9001"


def night_lines(count: int, *, seed: int, every: int = 4) -> list[ReplayLine]:
    """A group talking all night: every ``every``-th message is addressed to the bot."""
    rnd = random.Random(seed)
    lines = []
    for i in range(count):
        text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(8, 60)))
        if i == 2:
            text = SECRET_LINE
        lines.append(
            ReplayLine(
                text=f"message {i}: {text}",
                sender=rnd.choice(sorted(PEOPLE)),
                addressed=i % every == 0,
                chat="group",
            )
        )
    return lines


def night_config(data_dir: Path, **sections: Any) -> Config:
    """The config of the night's gateway: its chats allowed, the replay's window."""
    raw: dict[str, Any] = {
        "data_dir": str(data_dir),
        "model": {"name": "scripted-model", "context_length": WINDOW},
        "platforms": {
            "telegram": {"allowed_users": list(PEOPLE.values()), "allowed_chats": [TELEGRAM_GROUP]},
            "discord": {
                "allowed_users": list(PEOPLE.values()),
                "allowed_channels": [DISCORD_CHANNEL],
            },
        },
        **sections,
    }
    return parse_config(raw, {})


def night_gateway(config: Config) -> Gateway:
    """A gateway over the night's data: the scripted model, Telegram and Discord stand-ins."""
    adapters = [RecordingAdapter("telegram"), RecordingAdapter("discord")]
    return Gateway(config, list(adapters), providers=Providers(ScriptedProvider("scripted-model")))


async def replay_night(data_dir: Path) -> None:
    """Fill ``data_dir`` with the night (a minute or so of work for the scripted model)."""
    config = night_config(data_dir)
    await replay(replay_config(config, data_dir, WINDOW), night_lines(480, seed=7), scripted=True)
    gateway = night_gateway(config)
    await gateway.start()
    try:
        chats = (("telegram", TELEGRAM_GROUP, 200, 11), ("discord", DISCORD_CHANNEL, 120, 13))
        for platform, chat, count, seed in chats:
            adapter = gateway.adapters[platform]
            assert isinstance(adapter, RecordingAdapter)
            for number, line in enumerate(night_lines(count, seed=seed), 1):
                await adapter.say(
                    line.text,
                    chat_id=chat,
                    chat_type="group",
                    user_id=PEOPLE[line.sender],
                    user_name=line.sender,
                    addressed=line.addressed,
                    platform_message_id=str(number),
                )
                await gateway.lanes.wait_idle()
    finally:
        await gateway.stop()
