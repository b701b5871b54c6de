"""Dashboard logins against the listening server: failed logins are limited per client
address, and a login ends at logout or with a new token — a restart brings neither back."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from aiohttp import ClientSession

from gateway.app import Gateway
from gateway.dashboard.logins import LOGINS_FILE
from gateway.dashboard.throttle import (
    FAILED_LOGINS_PER_MINUTE,
    MAX_CLIENTS,
    LoginThrottle,
    client_of,
)
from gateway.logs import setup_logging
from tests.dashboard.support import TOKEN, browser, csrf_of, dashboard_config, log_in
from tests.fakes.llm_server import FakeLLM
from tests.harness import make_config, running_gateway

GUESS = "a-wrong-guess-0123456789"


async def test_failed_logins_lock_out_only_the_address_they_came_from(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with running_gateway(dashboard_config(tmp_path, fake_llm)) as gateway:
        async with (
            browser(gateway, "127.0.0.2") as stranger,
            browser(gateway, headers={"X-Forwarded-For": "203.0.113.9"}) as proxied,
            browser(gateway, "127.0.0.1") as operator,
        ):
            for _ in range(FAILED_LOGINS_PER_MINUTE):
                assert (await log_in(stranger, GUESS)).status == 401
            locked = await log_in(stranger)
            assert locked.status == 429  # even with the token, for a minute
            assert "nightowl_session" not in locked.cookies
            # Strangers through a reverse proxy on this machine arrive from 127.0.0.1 too,
            # but as forwarded requests: they do not lock out an ssh tunnel's direct ones.
            for _ in range(FAILED_LOGINS_PER_MINUTE):
                assert (await log_in(proxied, GUESS)).status == 401
            assert (await log_in(proxied)).status == 429
            answer = await log_in(operator)
            assert answer.status == 303
            assert (await operator.get("/")).status == 200


async def test_a_login_ends_at_logout_and_with_a_new_token_and_no_restart_revives_it(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = dashboard_config(tmp_path, fake_llm)
    async with running_gateway(config) as gateway:
        async with browser(gateway) as laptop, browser(gateway) as phone:
            assert (await log_in(laptop)).status == 303
            assert (await log_in(phone)).status == 303
            laptop_login, phone_login = login_cookie(laptop), login_cookie(phone)
            assert laptop_login != phone_login
            csrf = await csrf_of(laptop)
            logout = await laptop.post("/logout", data={"csrf": csrf}, allow_redirects=False)
            assert logout.status == 303
        assert await answers(gateway, laptop_login) == 401  # the cookie a thief kept
        assert await answers(gateway, phone_login) == 200  # another browser's login holds
    kept = tmp_path / LOGINS_FILE
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert laptop_login not in kept.read_text() and phone_login not in kept.read_text()
    async with running_gateway(config) as gateway:  # a restart
        assert await answers(gateway, laptop_login) == 401
        assert await answers(gateway, phone_login) == 200
    renewed = dashboard_config(tmp_path, fake_llm, dashboard={"token": TOKEN + "-renewed"})
    async with running_gateway(renewed) as gateway:
        assert await answers(gateway, phone_login) == 401
        async with browser(gateway) as phone:
            assert (await log_in(phone, TOKEN + "-renewed")).status == 303
    async with running_gateway(config) as gateway:  # the old token back: still ended
        assert await answers(gateway, phone_login) == 401


async def test_a_short_token_is_logged_without_the_token(
    tmp_path: Path, fake_llm: FakeLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(
        tmp_path, fake_llm, dashboard={"enabled": True, "port": 0, "token": "short-t0ken"}
    )
    setup_logging(config)  # undone by tests/conftest.py
    async with running_gateway(config):
        pass
    err = capsys.readouterr().err
    [warning] = [line for line in err.splitlines() if "dashboard.token" in line]
    assert "WARNING" in warning and "shorter than 16 characters" in warning
    assert "short-t0ken" not in err


def test_a_client_is_refused_a_minute_and_memory_keeps_the_latest_clients_only() -> None:
    now = [1000.0]
    throttle = LoginThrottle(clock=lambda: now[0])
    for _ in range(FAILED_LOGINS_PER_MINUTE):
        throttle.failed("198.51.100.7")
    assert throttle.throttled("198.51.100.7") and not throttle.throttled("198.51.100.8")
    now[0] += 60
    assert not throttle.throttled("198.51.100.7")
    for _ in range(FAILED_LOGINS_PER_MINUTE):
        throttle.failed("198.51.100.7")
    for n in range(MAX_CLIENTS):
        throttle.failed(f"client {n}")
    assert not throttle.throttled("198.51.100.7")  # forgotten: the bound holds
    # One host commonly holds a whole IPv6 /64; IPv4 through a dual-stack socket is IPv4.
    assert client_of("2001:db8:1:2::7", False) == client_of("2001:db8:1:2:ffff::1", False)
    assert client_of("2001:db8:1:2::7", False) != client_of("2001:db8:1:3::7", False)
    assert client_of("::ffff:192.0.2.1", False) == "192.0.2.1"
    assert client_of("192.0.2.1", True) == "192.0.2.1 via a proxy"


def login_cookie(session: ClientSession) -> str:
    """The login cookie a browser holds (what a thief of it would replay)."""
    [value] = [c.value for c in session.cookie_jar if c.key == "nightowl_session"]
    return value


async def answers(gateway: Gateway, login: str) -> int:
    """What a page polled with ``login`` as its cookie answers: 200 or 401."""
    async with browser(gateway, "127.0.0.3") as thief:
        polled = await thief.get(
            "/", cookies={"nightowl_session": login}, headers={"Accept": "application/json"}
        )
        return polled.status
