"""gateway/connecting.py: whether anything takes a connection at a URL, said in a few
words, and the URL as it may be shown (docs/operations.md#alerts)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from agent.urls import shown_url
from gateway.connecting import connect_problem, proxied


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_localhost_is_every_address_it_names_and_its_refusal_is_said_plainly() -> None:
    """``localhost`` is ::1 and 127.0.0.1 on most systems: asyncio would say "Multiple
    exceptions: [Errno 111] Connect call failed ('::1', ...), ..." where one word does."""
    port = free_port()
    assert await connect_problem(f"http://localhost:{port}/v1", 3.0) == "connection refused"
    only_ipv4 = await asyncio.start_server(lambda _, writer: writer.close(), "127.0.0.1", port)
    async with only_ipv4:
        assert await connect_problem(f"http://localhost:{port}/v1", 3.0) is None


async def test_a_url_that_names_no_place_to_connect_is_said_so() -> None:
    assert await connect_problem("http://127.0.0.1:port/v1", 3.0) == "its port is not valid"
    assert await connect_problem("http://127.0.0.1:99999/v1", 3.0) == "its port is not valid"
    said = await connect_problem("http://hooks..example.org/t", 3.0)
    assert said == "hooks..example.org is not a valid host name"
    assert await connect_problem("http:///v1", 3.0) == "it names no host"


def test_a_url_is_shown_without_what_may_hold_a_secret() -> None:
    assert (
        shown_url("https://owl:pw@hooks.example.org/t0ken?key=1") == "https://hooks.example.org:443"
    )
    assert shown_url("http://[::1]:11434/v1") == "http://[::1]:11434"
    assert shown_url("http://ollama/v1") == "http://ollama:80"


def test_a_url_the_environment_sends_through_a_proxy_is_known_as_such(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """httpx sends it there (trust_env), so a connection straight to its host proves
    nothing: doctor says "not checked" and the alerts do not look."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        for spelled in (name, name.lower()):
            monkeypatch.delenv(spelled, raising=False)
    assert not proxied("https://hooks.example.org/t")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.lan:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert proxied("https://hooks.example.org/t")
    assert not proxied("https://127.0.0.1:8443/t")  # NO_PROXY
    assert not proxied("http://hooks.example.org/t")  # no proxy for http
