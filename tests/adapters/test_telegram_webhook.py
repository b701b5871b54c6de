"""Telegram webhook mode fails closed: python-telegram-bot's Bot against the fake Bot API,
and forged POSTs to the adapter's own webhook server (docs/design.md#webhook-secret)."""

from __future__ import annotations

import logging
import socket

import aiohttp
import pytest

from adapters.telegram import TelegramAdapter, TelegramStartError, WebhookSettings
from tests.adapters.conftest import fast_settings
from tests.fakes.sink import RecordingSink
from tests.fakes.telegram_server import FakeTelegram

SECRET = "s3cret-Token_from-config"
HEADER = "X-Telegram-Bot-Api-Secret-Token"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
async def hook(start_telegram) -> str:
    """A running adapter in webhook mode; returns the URL its local server answers on."""
    port = _free_port()
    webhook = WebhookSettings(url="https://bot.example.org/tg/hook", port=port, secret=SECRET)
    await start_telegram(webhook=webhook)
    return f"http://127.0.0.1:{port}/tg/hook"


def _update(server: FakeTelegram, update_id: int, text: str) -> dict:
    # From an allowed user's id: a forger needs nothing more than the URL.
    return {"update_id": update_id, "message": server.make_message(42, text)}


@pytest.mark.parametrize(
    "headers",
    [{}, {HEADER: ""}, {HEADER: "guessed"}, {HEADER: SECRET + "x"}, {HEADER: SECRET[:-1]}],
    ids=["no header", "empty", "wrong", "longer", "shorter"],
)
async def test_a_post_without_the_secret_is_refused_and_never_reaches_the_sink(
    telegram_server: FakeTelegram, sink: RecordingSink, hook: str, headers: dict
) -> None:
    async with aiohttp.ClientSession() as http:
        forged = _update(telegram_server, 900, "I am Ann, do as I say")
        async with http.post(hook, json=forged, headers=headers) as refused:
            assert refused.status == 403
        async with http.post(
            hook, json=_update(telegram_server, 901, "hi"), headers={HEADER: SECRET}
        ) as ok:
            assert ok.status == 200
    assert [m.text for m in sink.received] == ["hi"]  # the forged one never arrived
    assert sink.calls == 1


@pytest.mark.parametrize(
    "body",
    ["null", "1", '"an update"', "[]", '[{"update_id": 5}]', "true", "{not json", "\xff"],
)
async def test_a_body_that_is_not_an_update_object_gets_400(
    telegram_server: FakeTelegram, sink: RecordingSink, hook: str, body: str
) -> None:
    headers = {HEADER: SECRET, "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http:
        data = body.encode("latin-1")
        async with http.post(hook, data=data, headers=headers) as response:
            assert response.status == 400
        async with http.post(hook, json={"update_id": 7, "message": 5}, headers=headers) as bad:
            assert bad.status == 400  # an object PTB cannot read: the sender's fault too
    assert sink.calls == 0


async def test_webhook_settings_without_a_secret_cannot_be_made(
    telegram_server: FakeTelegram,
) -> None:
    with pytest.raises(ValueError, match="needs a secret"):
        WebhookSettings(url="https://bot.example.org/hook", secret="")
    with pytest.raises(TypeError):
        WebhookSettings(url="https://bot.example.org/hook")  # type: ignore[call-arg]
    # The secret never shows in the settings' repr (they get logged in tracebacks).
    adapter = TelegramAdapter(
        fast_settings(telegram_server, webhook=WebhookSettings(url="https://h/x", secret=SECRET))
    )
    assert SECRET not in repr(adapter.settings)


async def test_a_webhook_port_another_program_holds_is_one_sentence(
    telegram_server: FakeTelegram, start_telegram
) -> None:
    """A second gateway on the same config (or any program on that port): the start
    stops with what to do, not aiohttp's traceback."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        webhook = WebhookSettings(url="https://bot.example.org/tg/hook", port=port, secret=SECRET)
        with pytest.raises(TelegramStartError) as refused:
            await start_telegram(webhook=webhook)
    assert str(refused.value) == (
        f"Telegram webhook cannot listen on 127.0.0.1:{port}: Address already in use (is"
        " another gateway running? choose another platforms.telegram.webhook.port)"
    )


def _nested_update(depth: int) -> str:
    """An update whose message is ``depth`` objects deep: too deep for any parser stack."""
    return '{"update_id": 8, "message": ' + '{"a": ' * depth + "1" + "}" * depth + "}"


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000 + "]" * 100_000,
        _nested_update(100_000),
        "{not json",
        '{"update_id": 10, "message": {"message_id": 1,',
        "[]",
        '{"update_id": 10, "message": 5}',
    ],
    ids=["100k nested arrays", "100k nested objects", "malformed", "cut short", "array", "shape"],
)
async def test_a_malformed_or_pathologically_nested_body_gets_400_and_one_log_line(
    telegram_server: FakeTelegram,
    sink: RecordingSink,
    hook: str,
    body: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    headers = {HEADER: SECRET, "Content-Type": "application/json"}
    caplog.set_level(logging.INFO)
    async with aiohttp.ClientSession() as http:
        async with http.post(hook, data=body.encode(), headers=headers) as response:
            assert response.status == 400
        refused = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(refused) == 1, [r.getMessage() for r in refused]
        (line,) = refused
        assert line.name == "adapters.telegram.webhook"
        assert line.exc_info is None and "\n" not in line.getMessage()
        assert "not one update" in line.getMessage()
        # The webhook still answers the next update Telegram sends.
        ok = _update(telegram_server, 11, "still here")
        async with http.post(hook, json=ok, headers={HEADER: SECRET}) as response:
            assert response.status == 200
    assert [m.text for m in sink.received] == ["still here"]  # nothing of the bad body stored
