"""`nightowl doctor`: one line per check, exit 1 on any failure, every failure explained."""

from __future__ import annotations

import asyncio
import io
import os
import socket
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.ops.cli import main
from gateway.ops.doctor import run_doctor
from gateway.store import SQLiteStore
from gateway.store.datadir_lock import DataDirLock
from gateway.store.postgres import PostgresStore
from gateway.store.postgres.schema import SCHEMA_VERSION as POSTGRES_VERSION
from tests import db
from tests.child_process import nightowl, without_root_privileges
from tests.fakes.discord_server import running_fake_discord
from tests.fakes.llm_server import FakeLLM
from tests.fakes.local_servers import FakeOllama
from tests.fakes.telegram_server import FakeTelegram

KEY = "sk-doctor-test-0123456789abcdef"


def write_config(tmp_path: Path, base_url: str, **extra: Any) -> Path:
    raw: dict[str, Any] = {
        "data_dir": str(tmp_path / "data"),
        "model": {"base_url": base_url, "name": "fake-model", "api_key": KEY},
    }
    raw.update(extra)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    path.chmod(0o600)
    return path


async def doctor(config: Path, **options: Any) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = await run_doctor(str(config), timeout=3, out=out, **options)
    return code, out.getvalue().splitlines()


def line(lines: list[str], check: str) -> str:
    found = [entry for entry in lines if entry[2:].startswith(f"{check}:")]
    assert len(found) == 1, lines
    return found[0]


async def make_database(config_dir: Path) -> Path:
    path = config_dir / "data" / "state.db"
    async with SQLiteStore(path):
        pass
    return path


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_all_good_against_the_fakes_exits_0(tmp_path: Path, fake_llm: FakeLLM) -> None:
    telegram = FakeTelegram(token="123456:doctor-token")
    await telegram.start()
    try:
        async with running_fake_discord():
            config = write_config(
                tmp_path,
                fake_llm.openai_base_url,
                platforms={
                    "telegram": {
                        "enabled": True,
                        "token": "123456:doctor-token",
                        "base_url": telegram.base_url,
                    },
                    "discord": {"enabled": True, "token": "discord-doctor-token"},
                },
            )
            await make_database(tmp_path)
            code, lines = await doctor(config)
    finally:
        await telegram.stop()
    assert code == 0, lines
    assert all(entry.startswith("✓ ") for entry in lines), lines
    assert [entry[2:].split(":")[0] for entry in lines] == [
        "config",
        "secrets",
        "provider",
        "window",
        "telegram",
        "discord",
        "database",
        "permissions",
        "backup",
    ]
    assert "fake-model at http" in line(lines, "provider")
    assert "none made yet (`nightowl backup`; daily: " in line(lines, "backup")
    # The fake does not say its window and the table does not know "fake-model".
    assert "nightowl assumes 32,768 tokens (a cautious guess)" in line(lines, "window")
    assert "set model.context_length" in line(lines, "window")
    assert "@NightowlBot" in line(lines, "telegram")
    assert "integrity ok, schema v" in line(lines, "database")
    assert fake_llm.requests[-1].max_tokens == 1  # the check costs a handful of tokens


def test_a_broken_config_is_reported_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("compression:\n  threshold: high\n")
    assert main(["doctor", "-c", str(config)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f'✗ config: {config}:2: compression.threshold: expected a number between 0 and 1, got "high"'
        " — fix that key (see config.yaml.example)"
    ]
    config.write_text("compression:\n  threshold: high\nfoo: 1\n")
    assert main(["doctor", "-c", str(config)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2] == f"{config}:3: foo: unknown key"  # the hint is not about foo alone
    assert out[-1] == "  — fix the keys above (see config.yaml.example)"
    assert main(["doctor", "-c", str(tmp_path / "nope.yaml")]) == 1
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("✗ config: ") and "cannot read the file" in line
    assert line.endswith(" — check the path, or run `nightowl init` to write one")


async def test_an_unreachable_provider_is_reported(tmp_path: Path) -> None:
    port = closed_port()
    code, lines = await doctor(write_config(tmp_path, f"http://127.0.0.1:{port}/v1"))
    assert code == 1
    failure = line(lines, "provider")
    assert failure.startswith(f"✗ provider: http://127.0.0.1:{port}/v1: cannot connect")
    assert "check model.base_url" in failure
    assert line(lines, "config").startswith("✓")


async def test_a_discord_bot_without_the_message_content_intent_fails_before_run_does(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The one portal switch the README asks for: its application flag says whether it
    is on, so doctor need not open the gateway socket that run would be refused on."""
    async with running_fake_discord() as discord_server:
        discord_server.close_on_identify = 4014  # the portal's switch is off
        discord = {"enabled": True, "token": "discord-doctor-token"}
        config = write_config(tmp_path, fake_llm.openai_base_url, platforms={"discord": discord})
        code, lines = await doctor(config)
    assert code == 1
    assert line(lines, "discord").endswith(
        "logged in, but its Message Content intent is off: run would be refused — turn it on"
        " in Discord's developer portal (Bot, Privileged Gateway Intents)"
    )


async def test_a_refused_key_is_reported_without_printing_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.api_key = "the-right-key"
    code, lines = await doctor(write_config(tmp_path, fake_llm.openai_base_url))
    assert code == 1
    # Refused by the model listing, as OpenAI's refuses a wrong key, before any request.
    assert "the key was refused (HTTP 401) — the API key was rejected" in line(lines, "provider")
    assert KEY not in "\n".join(lines)


async def test_a_model_the_server_does_not_serve_is_reported(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.models = ("llama3.1:8b", "qwen2.5:7b")
    code, lines = await doctor(write_config(tmp_path, fake_llm.openai_base_url))
    assert code == 1
    assert "does not list the model fake-model" in line(lines, "provider")
    assert "llama3.1:8b" in line(lines, "provider")


async def test_a_bare_ollama_name_is_its_latest_tag_and_passes(tmp_path: Path) -> None:
    """Ollama lists "llama3.2:latest" and answers "llama3.2": the name is fine."""
    async with FakeOllama(served=2_048, declared=2_048, model="llama3.2:latest") as ollama:
        config = write_config(tmp_path, ollama.openai_base_url)
        raw = yaml.safe_load(config.read_text())
        raw["model"]["name"] = "llama3.2"
        config.write_text(yaml.safe_dump(raw))
        code, lines = await doctor(config)
    assert line(lines, "provider").startswith("✓ provider: llama3.2 at "), lines
    assert code == 0, lines


async def test_a_configured_window_larger_than_the_server_serves_is_reported(
    tmp_path: Path,
) -> None:
    async with FakeOllama(served=4_096, loaded=True, model="fake-model") as ollama:
        config = write_config(tmp_path, ollama.openai_base_url)
        raw = yaml.safe_load(config.read_text())
        raw["model"]["context_length"] = 32_768
        config.write_text(yaml.safe_dump(raw))
        code, lines = await doctor(config)
        assert code == 1
        assert line(lines, "window") == (
            "✗ window: the server serves 4,096 tokens, not 32,768 — set "
            "OLLAMA_CONTEXT_LENGTH=32768 where Ollama runs (or PARAMETER num_ctx 32768 in the "
            "model's Modelfile), or lower model.context_length"
        )
        raw["model"]["context_length"] = 4_096
        config.write_text(yaml.safe_dump(raw))
        code, lines = await doctor(config)
    assert line(lines, "window") == (
        "✓ window: ollama serves fake-model with 4,096 tokens (the model declares 40,960: to "
        "give it more, set OLLAMA_CONTEXT_LENGTH=40960 where Ollama runs (or PARAMETER "
        "num_ctx 40960 in the model's Modelfile))"
    )


async def test_the_one_token_request_loads_an_ollama_model_so_its_window_is_known(
    tmp_path: Path,
) -> None:
    async with FakeOllama(served=2_048, declared=2_048, model="fake-model") as ollama:
        code, lines = await doctor(write_config(tmp_path, ollama.openai_base_url))
    assert code == 0
    assert line(lines, "window") == "✓ window: ollama serves fake-model with 2,048 tokens"


async def test_a_world_readable_database_fails_until_fixed(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = write_config(tmp_path, fake_llm.openai_base_url)
    database = await make_database(tmp_path)
    database.chmod(0o644)
    code, lines = await doctor(config)
    assert code == 1
    failure = line(lines, "permissions")
    assert failure.startswith(f"✗ permissions: readable by other users: {database} (0644)")
    assert failure.endswith(" — run: nightowl doctor --fix (chmod 600)")
    code, lines = await doctor(config, fix=True)
    assert code == 0, lines
    for private in database.parent.iterdir():  # the WAL files follow the database's mode
        assert private.stat().st_mode & 0o777 == 0o600, private
    code, _ = await doctor(config)
    assert code == 0


async def test_answering_yes_makes_a_readable_config_private(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = write_config(tmp_path, fake_llm.openai_base_url)
    config.chmod(0o644)
    asked: list[str] = []

    def yes(question: str) -> str:
        asked.append(question)
        return "y"

    code, lines = await doctor(config, confirm=yes)
    assert code == 0, lines
    assert str(config) in asked[0]
    assert config.stat().st_mode & 0o777 == 0o600


async def test_config_env_and_data_files_open_to_the_group_or_others_are_fixed(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # docs/design.md#private-files
    config = write_config(tmp_path, fake_llm.openai_base_url)
    database = await make_database(tmp_path)
    data = database.parent
    dotenv = tmp_path / ".env"
    dotenv.write_text("SOME_TOKEN=abc\n")
    kept = {
        data / "chat.log": "INFO nightowl: started\n",
        data / "context_length_cache.yaml": "version: 1\n",
        data / "telegram_webhook_secret": "generated-secret-0123456789\n",
        data / "dashboard_logins": "0123abcd 1700000000\n",
    }
    for path, text in kept.items():
        path.write_text(text)
    exposed = {config: 0o644, dotenv: 0o644, data: 0o755} | dict.fromkeys(kept, 0o640)
    for path, mode in exposed.items():
        path.chmod(mode)

    code, lines = await doctor(config)
    assert code == 1
    failure = line(lines, "permissions")
    for path, mode in exposed.items():
        assert f"{path} ({mode:04o})" in failure, failure
    assert failure.endswith(" — run: nightowl doctor --fix (chmod 600, 700 for the data dir)")

    code, out, err = await nightowl("doctor", "--fix", "-c", str(config), cwd=tmp_path)
    assert code == 0, out + err
    assert "✓ permissions: made private: " in out
    for path in exposed:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    code, lines = await doctor(config)
    assert code == 0, lines


async def test_a_short_dashboard_token_fails_and_metrics_beyond_loopback_are_noted(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    # A free port: the default one may be a running gateway's (a taken port adds its own
    # advice to the line).
    short = {"enabled": True, "token": "short-t0ken", "listen": "0.0.0.0", "port": closed_port()}
    config = write_config(tmp_path, fake_llm.openai_base_url, dashboard=short)
    await make_database(tmp_path)
    code, lines = await doctor(config)
    assert code == 1
    flagged = line(lines, "dashboard")
    assert flagged.startswith("✗ dashboard: dashboard.token is shorter than 16 characters")
    assert "(note: dashboard listens on 0.0.0.0 with no metrics_token" in flagged
    assert flagged.endswith(
        " — set dashboard.token to 16 characters or more, or null to have one generated"
    )
    assert "short-t0ken" not in "\n".join(lines)

    port = closed_port()
    sound = {
        "enabled": True,
        "token": "long-enough-token-0123",
        "listen": "0.0.0.0",
        "port": port,
    }
    code, lines = await doctor(write_config(tmp_path, fake_llm.openai_base_url, dashboard=sound))
    assert code == 0, lines
    noted = line(lines, "dashboard")
    assert noted.startswith(
        f"✓ dashboard: on 0.0.0.0:{port} (free), token from dashboard.token; /metrics for this"
        " machine only (note: dashboard listens on 0.0.0.0 with no metrics_token: /metrics answers"
        " only requests from this machine — and so anything a reverse proxy here forwards"
        " without X-Forwarded-For"
    )
    assert noted.endswith("set dashboard.metrics_token)")
    sound["metrics_token"] = "scrape-token-0123456789"
    code, lines = await doctor(write_config(tmp_path, fake_llm.openai_base_url, dashboard=sound))
    assert code == 0, lines
    assert line(lines, "dashboard") == (
        f"✓ dashboard: on 0.0.0.0:{port} (free), token from dashboard.token; /metrics needs its"
        " token"
    )


async def test_a_dashboard_port_another_program_holds_fails_and_the_gateways_own_passes(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The gateway would log a taken port and run without its dashboard: doctor says so
    first, unless the holder is the gateway itself (it holds the data dir's lock)."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        dashboard = {"enabled": True, "listen": "127.0.0.1", "port": port}
        config = write_config(tmp_path, fake_llm.openai_base_url, dashboard=dashboard)
        await make_database(tmp_path)
        code, lines = await doctor(config)
        assert code == 1
        assert line(lines, "dashboard") == (
            f"✗ dashboard: 127.0.0.1:{port} is in use by another program; the gateway would"
            " log that and run without its dashboard — choose another dashboard.port, or stop"
            " that program"
        )
        lock = DataDirLock.acquire(tmp_path / "data")  # as a running gateway holds it
        try:
            code, lines = await doctor(config)
            assert code == 0, lines
            assert line(lines, "dashboard").startswith(
                f"✓ dashboard: on 127.0.0.1:{port} (in use by the running gateway, pid"
                f" {os.getpid()}), token from "
            )
            other.close()  # a gateway that started without its dashboard
            _, lines = await doctor(config)
        finally:
            lock.release()
    assert line(lines, "dashboard").startswith(
        f"✓ dashboard: on 127.0.0.1:{port} (free: the running gateway, pid {os.getpid()}, does"
        " not listen there: restart it), token from "
    )


async def listening() -> tuple[asyncio.Server, int, list[bytes], asyncio.Event]:
    """A local server that keeps what each connection sent until it closed."""
    received: list[bytes] = []
    closed = asyncio.Event()

    async def keep(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read())
        writer.close()
        closed.set()

    server = await asyncio.start_server(keep, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], received, closed


async def test_an_alerts_webhook_nobody_listens_on_fails_without_its_secrets(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    port = closed_port()
    webhook = f"http://hook:pw-0123456789@127.0.0.1:{port}/hooks/T0123/path-s3cret?token=q-s3cret"
    config = write_config(tmp_path, fake_llm.openai_base_url, alerts={"webhook": webhook})
    code, lines = await doctor(config)
    assert code == 1
    assert line(lines, "alerts") == (
        f"✗ alerts: the alerts webhook http://127.0.0.1:{port} cannot be reached: connection"
        " refused; alerts will only be logged — check alerts.webhook, the network, and that the"
        " receiver is running"
    )
    said = "\n".join(lines)
    for secret in ("pw-0123456789", "T0123", "path-s3cret", "q-s3cret", "hook:"):
        assert secret not in said


async def test_a_reachable_alerts_webhook_passes_with_nothing_sent_to_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    server, port, received, closed = await listening()
    webhook = f"http://127.0.0.1:{port}/hooks/path-s3cret"
    alerts = {"webhook": webhook, "after_seconds": 120}
    async with server:
        code, lines = await doctor(write_config(tmp_path, fake_llm.openai_base_url, alerts=alerts))
        await asyncio.wait_for(closed.wait(), 5)
    assert code == 0, lines
    assert line(lines, "alerts") == (
        f"✓ alerts: to http://127.0.0.1:{port} (it accepts connections; nothing was sent),"
        " after 120 s"
    )
    assert received == [b""]  # connected and closed: no alert, fake or real


async def test_an_alert_recipient_on_a_platform_not_enabled_fails(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    alerts = {"to": ["discord:42", "telegram:7"]}
    async with FakeTelegram(token="123456:doctor-token") as telegram:
        section = {"enabled": True, "token": telegram.token, "base_url": telegram.base_url}
        config = write_config(
            tmp_path, fake_llm.openai_base_url, alerts=alerts, platforms={"telegram": section}
        )
        code, lines = await doctor(config)
        assert code == 1
        assert line(lines, "alerts") == (
            "✗ alerts: alerts.to has discord:42 but discord is not enabled: its alerts are only"
            " logged — enable platforms.discord or remove discord:42 from alerts.to"
        )
        alerts["to"] = ["telegram:7"]
        code, lines = await doctor(
            write_config(
                tmp_path, fake_llm.openai_base_url, alerts=alerts, platforms={"telegram": section}
            )
        )
    assert code == 0, lines
    assert line(lines, "alerts") == "✓ alerts: to telegram:7, after 300 s"


async def test_a_corrupt_database_is_reported(tmp_path: Path, fake_llm: FakeLLM) -> None:
    config = write_config(tmp_path, fake_llm.openai_base_url)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "state.db").write_bytes(b"this is not a database" * 100)
    (tmp_path / "data" / "state.db").chmod(0o600)
    code, lines = await doctor(config)
    assert code == 1
    assert "is damaged (PRAGMA integrity_check: file is not a database)" in line(lines, "database")
    assert "restore a backup" in line(lines, "database")


@pytest.mark.parametrize(
    ("file_mode", "dir_mode", "says"),
    [
        (0o000, 0o700, "permission denied: cannot read {data}/state.db (mode 0000"),
        (0o400, 0o500, "permission denied: cannot write to {data} (mode 0500"),
    ],
)
async def test_a_permissions_problem_is_named_not_blamed_on_the_file(
    tmp_path: Path, fake_llm: FakeLLM, file_mode: int, dir_mode: int, says: str
) -> None:
    config = write_config(tmp_path, fake_llm.openai_base_url)
    database = await make_database(tmp_path)
    database.chmod(file_mode)
    database.parent.chmod(dir_mode)
    try:
        code, out, err = await nightowl(
            "doctor", "-c", str(config), cwd=tmp_path, prefix=without_root_privileges()
        )
    finally:
        database.parent.chmod(0o700)
    assert code == 1, err
    found = line(out.splitlines(), "database")
    assert found.startswith("✗") and says.format(data=database.parent) in found, found
    assert "backup" not in found


async def test_a_database_from_a_newer_nightowl_is_reported(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = write_config(tmp_path, fake_llm.openai_base_url)
    database = await make_database(tmp_path)
    await asyncio.to_thread(db.execute, database, "PRAGMA user_version=999")
    code, lines = await doctor(config)
    assert code == 1
    assert "schema v999 is newer than this nightowl" in line(lines, "database")


async def test_no_database_yet_is_fine_and_nothing_is_created(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    code, lines = await doctor(write_config(tmp_path, fake_llm.openai_base_url))
    assert code == 0, lines
    assert "the first run creates" in line(lines, "database")
    assert not (tmp_path / "data").exists()


async def test_a_missing_llm_key_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\n")
    config.chmod(0o600)
    code, lines = await doctor(config)
    assert code == 1
    assert "OPENAI_API_KEY" in line(lines, "secrets")
    assert line(lines, "provider") == "✗ provider: skipped: no key — see the secrets line"


async def test_an_anthropic_provider_is_checked_through_its_own_api(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.models = ("claude-test-4-5-20250929",)
    config = write_config(tmp_path, fake_llm.anthropic_base_url)
    raw = yaml.safe_load(config.read_text())
    raw["model"].update(provider="anthropic", name="claude-test-4-5")  # an undated alias
    config.write_text(yaml.safe_dump(raw))
    code, lines = await doctor(config)
    assert code == 0, lines
    assert "claude-test-4-5 at http" in line(lines, "provider")
    assert fake_llm.requests[-1].api == "anthropic"


async def test_a_key_only_in_the_shell_environment_is_pointed_out(
    tmp_path: Path, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    config = write_config(tmp_path, fake_llm.openai_base_url)
    raw = yaml.safe_load(config.read_text())
    raw["model"]["api_key"] = "${OPENAI_API_KEY}"
    config.write_text(yaml.safe_dump(raw))
    code, lines = await doctor(config)
    assert code == 0, lines
    assert "OPENAI_API_KEY came from this shell's environment" in line(lines, "secrets")
    assert str(tmp_path / ".env") in line(lines, "secrets")

    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={KEY}\n")
    (tmp_path / ".env").chmod(0o600)
    code, lines = await doctor(config)
    assert code == 0, lines
    assert line(lines, "secrets") == "✓ secrets: LLM key found"


async def test_a_postgresql_store_is_asked_about_its_schema_locks_and_clock(
    tmp_path: Path, fake_llm: FakeLLM, postgres_dsn: str
) -> None:
    store = {"backend": "postgres", "dsn": postgres_dsn}
    config = write_config(tmp_path, fake_llm.openai_base_url, store=store)
    code, lines = await doctor(config)
    assert code == 0, lines
    assert "empty; the first gateway start creates the schema" in line(lines, "database")
    assert "one holder at a time" in line(lines, "advisory locks")
    assert "of the database's" in line(lines, "clock")
    async with PostgresStore(postgres_dsn):  # a gateway started once
        pass
    _, lines = await doctor(config)
    assert line(lines, "database").endswith(f"schema v{POSTGRES_VERSION}")
    assert not (tmp_path / "data" / "state.db").exists()
    unreachable = {"backend": "postgres", "dsn": f"postgresql://127.0.0.1:{closed_port()}/x"}
    code, lines = await doctor(write_config(tmp_path, fake_llm.openai_base_url, store=unreachable))
    assert code == 1
    # Where it points is said (its password would not be): which database was checked.
    assert "cannot reach postgresql://127.0.0.1:" in line(lines, "database")
    assert line(lines, "database").endswith("— check store.dsn")


async def test_doctor_says_where_telegram_sends_updates_and_its_last_delivery_error(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A webhook behind a reverse proxy that is down, or one another deployment moved:
    what getWebhookInfo says, beside getMe."""
    url = "https://bot.example.org/tg/hook"
    async with FakeTelegram(token="123456:doctor-token") as telegram:
        section = {"enabled": True, "token": telegram.token, "base_url": telegram.base_url}
        config = write_config(
            tmp_path,
            fake_llm.openai_base_url,
            platforms={"telegram": {**section, "webhook": {"url": url}}},
        )
        _, unset = await doctor(config)
        telegram.webhooks.append({"url": "https://elsewhere.example.org/hook"})
        _, moved = await doctor(config)
        telegram.webhooks.append({"url": url})
        telegram.webhook_error = "Connection refused"
        telegram.push_text(42, "hello?")
        _, failing = await doctor(config)
    assert f"no webhook is set yet (nightowl run sets {url})" in line(unset, "telegram")
    assert f"Telegram sends updates to https://elsewhere.example.org/hook, not {url}" in line(
        moved, "telegram"
    )
    said = line(failing, "telegram")
    assert f"Telegram sends updates to {url}; 1 update(s) wait" in said
    assert "its last delivery error, 0 min ago: Connection refused" in said


async def test_a_webhook_port_another_program_holds_fails_before_the_start_would(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The gateway cannot start when it cannot listen for Telegram's webhook: doctor
    says so, with what to change; a free port passes."""
    async with FakeTelegram(token="123456:doctor-token") as telegram:
        section = {"enabled": True, "token": telegram.token, "base_url": telegram.base_url}
        with socket.socket() as other:
            other.bind(("127.0.0.1", 0))
            other.listen()
            port = other.getsockname()[1]
            hook = {"url": "https://bot.example.org/tg/hook", "port": port}
            config = write_config(
                tmp_path,
                fake_llm.openai_base_url,
                platforms={"telegram": {**section, "webhook": hook}},
            )
            code, taken = await doctor(config)
        _, free = await doctor(config)
    assert code == 1
    assert line(taken, "telegram webhook") == (
        f"✗ telegram webhook: 127.0.0.1:{port} is in use by another program; the gateway would"
        " not start — choose another platforms.telegram.webhook.port, or stop that program"
    )
    assert (
        line(free, "telegram webhook")
        == f"✓ telegram webhook: can listen on 127.0.0.1:{port} (free)"
    )
