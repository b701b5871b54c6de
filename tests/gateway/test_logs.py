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
from gateway.config.schema import load_config, parse_config
from gateway.config.secrets import configured_secrets
from gateway.conversation.lanes import Lanes
from gateway.logs import SESSION_KEY, setup_logging
from nightowl_errors import redact
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


# -- every configured secret (docs/design.md#private) --------------------------------------

#: One of each kind of secret a config can hold, none shaped like a key the patterns know.
CONFIGURED = {
    "model.api_key": "main-model-key-0001",
    "auxiliary.compression.api_key": "summary-key-0002",
    "models.big.api_key": "big-model-key-0003",
    "media.transcription.api_key": "whisper-key-0004",
    "an MCP server's env": "mcp-env-value-0005",
    "an MCP server's header": "token mcp-header-0006",
    "the credential in that header": "mcp-header-0006",
    "a token in an MCP server's url": "mcp-url-token-0007",
    "platforms.telegram.token": "1:telegram-token-0008",
    "platforms.telegram.webhook.secret_token": "webhook-secret-0009",
    "platforms.discord.token": "discord-token-0010",
    "dashboard.token": "dashboard-token-0011",
    "dashboard.metrics_token": "metrics-token-0012",
    "the password in store.dsn": "db-password-0013",
    "the password in a base_url": "base-url-pass-0014",
}


def test_every_configured_secret_is_redacted(logged: io.StringIO, tmp_path: Path) -> None:
    s = CONFIGURED
    env_value, header = s["an MCP server's env"], s["an MCP server's header"]
    url_token = s["a token in an MCP server's url"]
    config_file = tmp_path / "config.yaml"
    config_file.write_text(
        f"data_dir: {tmp_path / 'data'}\n"
        "model: {api_key: '${MAIN_KEY}'}\n"
        "auxiliary:\n"
        f"  compression: {{model: small, api_key: {s['auxiliary.compression.api_key']}}}\n"
        "models:\n"
        f"  big: {{name: big-1, api_key: {s['models.big.api_key']}}}\n"
        f"  local: {{name: llama, base_url: 'https://u:{s['the password in a base_url']}@llm.lan/v1'}}\n"
        "media:\n"
        "  transcription: {base_url: 'http://127.0.0.1:9/v1', api_key: '${WHISPER_KEY}'}\n"
        "tools:\n"
        "  mcp_servers:\n"
        "    files:\n"
        "      command: [mcp-files]\n"
        f"      env: {{FILES_TOKEN: {env_value}}}\n"
        "    web:\n"
        f"      url: 'https://mcp.example.org/mcp?token={url_token}'\n"
        f"      headers: {{Authorization: '{header}'}}\n"
        "platforms:\n"
        "  telegram:\n"
        "    enabled: true\n"
        f"    token: '{s['platforms.telegram.token']}'\n"
        "    webhook:\n"
        "      url: https://bot.example.org/hook\n"
        f"      secret_token: {s['platforms.telegram.webhook.secret_token']}\n"
        "  discord:\n"
        f"    token: {s['platforms.discord.token']}\n"
        "dashboard:\n"
        f"  token: {s['dashboard.token']}\n"
        f"  metrics_token: {s['dashboard.metrics_token']}\n"
        "store:\n"
        "  backend: postgres\n"
        "  dsn: ${DATABASE_URL}\n"
    )
    (tmp_path / ".env").write_text(
        f"MAIN_KEY={s['model.api_key']}\n"
        f"WHISPER_KEY={s['media.transcription.api_key']}\n"
        f"DATABASE_URL=postgresql://owl:{s['the password in store.dsn']}@db:5432/owl\n"
    )
    setup_logging(load_config(config_file, environ={}), fmt="text")
    (handler,) = logging.getLogger().handlers
    handler.setStream(logged)  # type: ignore[attr-defined]
    for kind, secret in CONFIGURED.items():
        log.warning("%s: %s", kind, secret)
    text = logged.getvalue()
    assert [kind for kind, secret in CONFIGURED.items() if secret in text] == []
    assert text.count("[redacted]") == len(CONFIGURED)


def test_a_providers_key_from_the_environment_is_redacted_for_every_model_it_serves(
    logged: io.StringIO, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An Anthropic main model: OpenAI's key still goes to whisper and to a /model choice.
    monkeypatch.setenv("ANTHROPIC_API_KEY", "anthropic-env-key-0001")
    monkeypatch.setenv("OPENAI_API_KEY", "openai-env-key-0002")
    config = parse_config(
        {
            "data_dir": str(tmp_path),
            "model": {"provider": "anthropic", "name": "claude"},
            "media": {"transcription": {"enabled": True}},
        },
        {},
    )
    setup_logging(config, fmt="text")
    (handler,) = logging.getLogger().handlers
    handler.setStream(logged)  # type: ignore[attr-defined]
    log.warning("keys: anthropic-env-key-0001, openai-env-key-0002")
    assert logged.getvalue().endswith("keys: [redacted], [redacted]\n")


def test_mcp_values_that_are_no_secret_stay_readable_and_a_command_lines_key_does_not(
    tmp_path: Path,
) -> None:
    config = parse_config(
        {
            "data_dir": str(tmp_path),
            "tools": {
                "mcp_servers": {
                    "files": {
                        "command": ["mcp-files", "--api-key", "cmdline-key-0015", "--depth=3"],
                        "env": {"MODE": "production", "NOTES": "/home/owl/notes"},
                    },
                    "web": {
                        "command": ["mcp-web", "--token=inline-token-0016"],
                        "headers": {"Accept": "application/json", "X-Trace": "k9Zq2-77xPq-41"},
                    },
                }
            },
        },
        {},
    )
    secrets = configured_secrets(config)
    assert {"cmdline-key-0015", "inline-token-0016", "k9Zq2-77xPq-41"} <= set(secrets)
    assert not {"production", "/home/owl/notes", "application/json", "3"} & set(secrets)


@pytest.mark.parametrize(
    ("dsn", "secret", "shown"),
    [
        ("postgresql://owl:pw-0123456789@db/x", "pw-0123456789", "db/x"),
        ("postgresql://owl@db/x?sslpassword=hunter22x", "hunter22x", None),
        ("postgresql://owl:1234#abcd@db/x", "1234#abcd", None),
    ],
)
def test_a_dsn_s_credentials_are_secrets_and_where_it_points_is_not(
    tmp_path: Path, dsn: str, secret: str, shown: str | None
) -> None:
    """doctor names the database it checked; a DSN whose credentials are not all in
    plain sight stays a secret whole."""
    config = parse_config(
        {"data_dir": str(tmp_path), "store": {"backend": "postgres", "dsn": dsn}}, {}
    )
    said = redact(f"cannot reach {dsn}", configured_secrets(config))
    assert secret not in said
    if shown is not None:
        assert shown in said
