"""The dashboard's token: generated once, private, the same for the gateway and
``nightowl dashboard-url``, never in a log line; what the server keeps of a login."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from gateway.config.schema import parse_config
from gateway.dashboard.logins import LOGIN_SECONDS, LOGINS_FILE, Logins
from gateway.dashboard.token import DASHBOARD_TOKEN_FILE, Keys, dashboard_token
from gateway.logs import setup_logging
from gateway.ops.cli import main
from tests.dashboard.support import client_of, log_in
from tests.fakes.llm_server import FakeLLM
from tests.harness import make_config, running_gateway


def test_a_generated_token_is_kept_private_and_printed_in_the_login_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(f"data_dir: {tmp_path / 'data'}\ndashboard:\n  enabled: true\n")
    assert main(["dashboard-url", "-c", str(config_file)]) == 0
    out = capsys.readouterr()
    kept = tmp_path / "data" / DASHBOARD_TOKEN_FILE
    token = kept.read_text().strip()
    assert out.out == f"http://127.0.0.1:8377/login#token={token}\n"
    assert "ssh -N -L 8377:127.0.0.1:8377" in out.err
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and len(token) >= 32
    config = parse_config({"data_dir": str(tmp_path / "data")})
    assert dashboard_token(config) == token  # what the gateway will use


def test_dashboard_url_says_when_the_dashboard_is_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_file = tmp_path / "config.yaml"
    config_file.write_text(f"data_dir: {tmp_path}\n")
    assert main(["dashboard-url", "-c", str(config_file)]) == 1
    assert "set dashboard.enabled: true" in capsys.readouterr().err
    assert not (tmp_path / DASHBOARD_TOKEN_FILE).exists()


async def test_the_generated_token_logs_in_and_never_reaches_a_log_line(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(tmp_path, fake_llm, dashboard={"enabled": True, "port": 0})
    setup_logging(config)  # undone by tests/conftest.py
    async with running_gateway(config) as gateway, client_of(gateway) as client:
        token = (tmp_path / DASHBOARD_TOKEN_FILE).read_text().strip()
        assert (await log_in(client, token)).status == 303
        logging.getLogger("nightowl").warning("someone pasted %s in a chat", token)
    err = capsys.readouterr().err
    assert "someone pasted [redacted] in a chat" in err and token not in err


async def test_a_login_is_kept_as_a_digest_under_the_token_and_expires(tmp_path: Path) -> None:
    now = [1_000_000.0]
    keys = Keys("the-token-0123456789")
    logins = Logins(tmp_path / LOGINS_FILE, keys, clock=lambda: now[0])
    login = await logins.begin()
    assert logins.valid(login) and not logins.valid(login[:-1]) and not logins.valid(None)
    assert login not in (tmp_path / LOGINS_FILE).read_text()
    assert Logins(tmp_path / LOGINS_FILE, keys, clock=lambda: now[0]).valid(login)
    renewed = Keys("another-token-0123456789")
    assert not Logins(tmp_path / LOGINS_FILE, renewed, clock=lambda: now[0]).valid(login)
    assert keys.csrf_valid(login, keys.csrf(login))
    assert not keys.csrf_valid(await logins.begin(), keys.csrf(login))
    now[0] += LOGIN_SECONDS + 1
    assert not logins.valid(login)
