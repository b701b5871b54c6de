"""Log lines name their session and never carry a secret, in text and in JSON."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.base import OutboundMessage
from adapters.telegram import TelegramAdapter
from gateway.build import WEBHOOK_SECRET_FILE, telegram_adapter
from gateway.config.schema import parse_config
from gateway.conversation.lanes import Lanes
from gateway.logs import SESSION_KEY, setup_logging
from tests.adapters.conftest import fast_settings
from tests.fakes.sink import RecordingSink
from tests.fakes.telegram_server import FakeTelegram

OPENAI_KEY = "sk-live-abcdefghijklmnopqrstuvwxyz012345"
TELEGRAM_TOKEN = "7012345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
log = logging.getLogger("nightowl.test")


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """A buffer to set up logging into as `nightowl run` does (tests/conftest.py
    restores logging afterwards)."""
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    yield io.StringIO()


def configure(fmt: str, buffer: io.StringIO) -> None:
    config = parse_config(
        {
            "model": {"api_key": OPENAI_KEY},
            "platforms": {"telegram": {"enabled": True, "token": TELEGRAM_TOKEN}},
        },
        {},
    )
    setup_logging(config, fmt=fmt)
    (handler,) = logging.getLogger().handlers
    handler.setStream(buffer)  # type: ignore[attr-defined]  # stderr, captured here


def json_lines(buffer: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


async def test_lines_logged_in_a_sessions_lane_carry_its_key(logged: io.StringIO) -> None:
    configure("json", logged)

    async def turn(key: str) -> None:
        log.info("turn started")
        await asyncio.sleep(0)
        log.warning("still at %d tokens", 9000)

    lanes = Lanes(turn)  # the gateway's own lanes run each session's work
    lanes.notify("telegram:42")
    assert await lanes.wait_idle(5)
    log.info("not about a session")
    lines = json_lines(logged)
    assert [(e["msg"], e.get("session_key")) for e in lines] == [
        ("turn started", "telegram:42"),
        ("still at 9000 tokens", "telegram:42"),
        ("not about a session", None),
    ]


async def test_the_context_variable_and_explicit_keys_name_the_session(
    logged: io.StringIO,
) -> None:
    configure("text", logged)

    async def hook() -> None:
        log.info("hook ran")

    async def work() -> None:
        SESSION_KEY.set("discord:dm:7")
        await asyncio.create_task(hook())  # tasks started from a session's work inherit it

    await asyncio.create_task(work())
    log.info("compressed", extra={"session_key": "console:local"})
    lines = logged.getvalue().splitlines()
    assert lines[0].endswith("INFO    nightowl.test [discord:dm:7]: hook ran")
    assert lines[1].endswith("INFO    nightowl.test [console:local]: compressed")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_secrets_are_redacted_in_messages_and_tracebacks(logged: io.StringIO, fmt: str) -> None:
    configure(fmt, logged)
    log.error("provider said: invalid key %s", OPENAI_KEY)
    try:
        raise RuntimeError(f"https://api.telegram.org/bot{TELEGRAM_TOKEN}/getMe failed")
    except RuntimeError:
        log.exception("polling failed")
    log.warning("an unknown key shaped like one: sk-proj-ZZZZZZZZZZZZZZZZZZZZZZZZ")
    text = logged.getvalue()
    assert OPENAI_KEY not in text and TELEGRAM_TOKEN not in text
    assert "sk-proj-ZZZZ" not in text
    assert text.count("[redacted]") == 3
    assert "polling failed" in text and "RuntimeError" in text  # the traceback is kept


def test_under_journald_text_lines_have_no_timestamp(
    logged: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "8:12345")  # set by systemd for journal output
    configure("text", logged)
    log.warning("hello")
    assert logged.getvalue() == "WARNING nightowl.test: hello\n"


def test_in_chat_mode_only_warnings_reach_stderr_as_one_line_each(
    logged: io.StringIO, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = parse_config({"data_dir": str(tmp_path), "model": {"api_key": OPENAI_KEY}}, {})
    setup_logging(config, chat=True)
    log.info("model %s, window %d", "gpt", 128000)  # telemetry: not between chat lines
    try:
        raise OSError(28, f"No space left on device (key {OPENAI_KEY})")
    except OSError:
        log.exception("turn failed")
    for handler in logging.getLogger().handlers:
        handler.flush()
    err = capsys.readouterr().err
    assert err == (
        "nightowl: turn failed (OSError: [Errno 28] No space left on device (key [redacted]))\n"
    )
    chat_log = (tmp_path / "chat.log").read_text()
    assert "INFO    nightowl.test: model gpt, window 128000" in chat_log
    assert "Traceback (most recent call last)" in chat_log and OPENAI_KEY not in chat_log
    assert (tmp_path / "chat.log").stat().st_mode & 0o777 == 0o600


# -- DEBUG logs and the telegram library (docs/design.md#private-files) ---------------------


async def test_at_debug_the_telegram_library_logs_no_updates_or_replies(
    logged: io.StringIO, tmp_path: Path
) -> None:
    server = FakeTelegram()
    await server.start()
    try:
        config = parse_config(
            {
                "data_dir": str(tmp_path),
                "model": {"api_key": OPENAI_KEY},
                "logging": {"level": "DEBUG"},
                "platforms": {"telegram": {"enabled": True, "token": server.token}},
            },
            {},
        )
        setup_logging(config, fmt="text")
        (handler,) = logging.getLogger().handlers
        handler.setStream(logged)  # type: ignore[attr-defined]
        sink = RecordingSink()
        adapter = TelegramAdapter(fast_settings(server))
        await adapter.start(sink)
        try:
            server.push_text(5, "my diary: the vault code is 4711")
            await sink.wait_for(1)
            await adapter.send(OutboundMessage("telegram", "5", "noted: the code is 4711"))
        finally:
            await adapter.stop()
    finally:
        await server.stop()
    log.debug("nightowl's own debug line")
    text = logged.getvalue()
    assert "DEBUG   nightowl.test: nightowl's own debug line" in text
    assert "4711" not in text, [line for line in text.splitlines() if "4711" in line]
    assert not re.search(r"DEBUG\s+telegram", text)


def test_a_configured_webhook_secret_is_redacted(logged: io.StringIO, tmp_path: Path) -> None:
    secret = "hook-secret-from-config_0123"
    config = parse_config(
        {
            "data_dir": str(tmp_path),
            "model": {"api_key": OPENAI_KEY},
            "platforms": {
                "telegram": {
                    "enabled": True,
                    "token": TELEGRAM_TOKEN,
                    "webhook": {"url": "https://h.example/hook", "secret_token": secret},
                }
            },
        },
        {},
    )
    setup_logging(config, fmt="text")
    (handler,) = logging.getLogger().handlers
    handler.setStream(logged)  # type: ignore[attr-defined]
    log.warning("setWebhook parameters: secret_token=%s", secret)
    assert secret not in logged.getvalue() and "[redacted]" in logged.getvalue()


def test_a_generated_webhook_secret_is_redacted_from_when_it_exists(
    logged: io.StringIO, tmp_path: Path
) -> None:
    config = parse_config(
        {
            "data_dir": str(tmp_path / "data"),
            "model": {"api_key": OPENAI_KEY},
            "platforms": {
                "telegram": {
                    "enabled": True,
                    "token": TELEGRAM_TOKEN,
                    "webhook": {"url": "https://h.example/hook"},
                }
            },
        },
        {},
    )
    setup_logging(config, fmt="json")  # before the secret exists, as `nightowl run` does
    (handler,) = logging.getLogger().handlers
    handler.setStream(logged)  # type: ignore[attr-defined]
    telegram_adapter(config)  # generates and keeps the secret
    secret = (tmp_path / "data" / WEBHOOK_SECRET_FILE).read_text().strip()
    log.warning("setWebhook parameters: secret_token=%s", secret)
    [entry] = json_lines(logged)
    assert entry["msg"] == "setWebhook parameters: secret_token=[redacted]"


def test_the_database_password_is_redacted(logged: io.StringIO, tmp_path: Path) -> None:
    dsn = "postgresql://nightowl:db-pass-0123456789@db.internal:5432/nightowl"
    config = parse_config(
        {"data_dir": str(tmp_path), "store": {"backend": "postgres", "dsn": dsn}}, {}
    )
    setup_logging(config, fmt="text")
    (handler,) = logging.getLogger().handlers
    handler.setStream(logged)  # type: ignore[attr-defined]
    log.warning("cannot connect to %s", dsn)
    log.warning('password authentication failed: "db-pass-0123456789"')
    assert "db-pass-0123456789" not in logged.getvalue()
