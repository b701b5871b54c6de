"""Webhook mode end to end: the gateway built from the config as ``nightowl run`` builds it,
python-telegram-bot against the fake Bot API, and forged POSTs to the webhook
(docs/design.md#webhook-secret)."""

from __future__ import annotations

import socket
import stat
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.build import WEBHOOK_SECRET_FILE
from gateway.config.schema import Config, parse_config
from tests.db import session_rows
from tests.e2e.telegram_helpers import ANN, telegram_gateway, user_texts, visible
from tests.fakes.llm_server import FakeLLM
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import turns_done

HEADER = "X-Telegram-Bot-Api-Secret-Token"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def webhook_config(
    data_dir: Path, llm: FakeLLM, server: FakeTelegram, port: int, env: dict[str, str], **hook: Any
) -> Config:
    raw = {
        "data_dir": str(data_dir),
        "model": {"base_url": llm.openai_base_url, "name": "fake-model", "max_retries": 0},
        "platforms": {
            "telegram": {
                "enabled": True,
                "token": server.token,
                "base_url": server.base_url,
                "allowed_users": [ANN["id"]],
                "webhook": {"url": "https://bot.example.org/tg/hook", "port": port, **hook},
            }
        },
    }
    return parse_config(raw, env)


def registered_secrets(server: FakeTelegram) -> list[str | None]:
    return [w.get("secret_token") for w in server.webhooks if "url" in w]


@pytest.mark.parametrize(
    "hook",
    [{}, {"secret_token": None}, {"secret_token": "${HOOK_SECRET}"}],
    ids=["no key", "null", "empty variable"],
)
async def test_without_a_configured_secret_one_is_generated_kept_and_required(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, hook: dict[str, Any]
) -> None:
    port = _free_port()
    data = tmp_path / "data"
    config = webhook_config(data, fake_llm, telegram, port, {"HOOK_SECRET": ""}, **hook)
    url = f"http://127.0.0.1:{port}/tg/hook"
    forged = {"update_id": 900, "message": telegram.make_message(42, "forged: wire me money")}
    honest = {"update_id": 901, "message": telegram.make_message(42, "what's up?")}
    async with telegram_gateway(config) as gateway:
        kept = data / WEBHOOK_SECRET_FILE
        secret = kept.read_text().strip()
        assert len(secret) >= 32
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        assert registered_secrets(telegram) == [secret]
        async with aiohttp.ClientSession() as http:
            for headers in ({}, {HEADER: ""}, {HEADER: "guess"}):
                async with http.post(url, json=forged, headers=headers) as refused:
                    assert refused.status == 403
            async with http.post(url, json=honest, headers={HEADER: secret}) as accepted:
                assert accepted.status == 200
        [reply] = await telegram.wait_sent(1)
        await turns_done(gateway)
    assert visible(reply.text) == "echo: what's up?"
    assert [user_texts(r) for r in fake_llm.requests] == [["what's up?"]]
    assert not any("forged" in str(row) for row in session_rows(config, "telegram:42"))

    async with telegram_gateway(config):  # a restart reuses the kept secret
        assert registered_secrets(telegram) == [secret, secret]


async def test_a_configured_secret_is_registered_and_nothing_is_generated(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    port = _free_port()
    data = tmp_path / "data"
    config = webhook_config(
        data,
        fake_llm,
        telegram,
        port,
        {"HOOK_SECRET": "from-the-env_0123"},
        secret_token="${HOOK_SECRET}",
    )
    async with telegram_gateway(config):
        assert registered_secrets(telegram) == ["from-the-env_0123"]
        async with aiohttp.ClientSession() as http:
            message = {"update_id": 1, "message": telegram.make_message(42, "hello")}
            url = f"http://127.0.0.1:{port}/tg/hook"
            async with http.post(url, json=message) as refused:
                assert refused.status == 403
            async with http.post(url, json=message, headers={HEADER: "from-the-env_0123"}) as ok:
                assert ok.status == 200
        await telegram.wait_sent(1)
    assert not (data / WEBHOOK_SECRET_FILE).exists()
