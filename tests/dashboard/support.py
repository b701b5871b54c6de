"""What the dashboard's tests share: a gateway with the dashboard on, a logged-in client
(aiohttp's test client on the dashboard's own application, or a browser-like session on
the listening dashboard from a chosen loopback address), and the values pages carry."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import ClientResponse, ClientSession, CookieJar, TCPConnector
from aiohttp.test_utils import TestClient, TestServer

from gateway.app import Gateway
from gateway.config.schema import Config
from gateway.dashboard.server import open_reader
from tests.fakes.llm_server import FakeLLM
from tests.harness import make_config

TOKEN = "test-dashboard-token-0123456789"


def dashboard_config(data_dir: Path, llm: FakeLLM, **sections: Any) -> Config:
    """The harness config with the dashboard on: a fixed token, any free port."""
    dashboard = {"enabled": True, "port": 0, "token": TOKEN, **sections.pop("dashboard", {})}
    return make_config(data_dir, llm, dashboard=dashboard, **sections)


def form_value(html: str, name: str) -> str:
    """The value of the (first) hidden input ``name`` of a page."""
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found, f"no {name} field in the page"
    return found.group(1)


@contextlib.asynccontextmanager
async def client_of(gateway: Gateway) -> AsyncIterator[TestClient]:
    """aiohttp's test client on ``gateway``'s dashboard application (not logged in)."""
    assert gateway.dashboard is not None, "dashboard.enabled is off"
    reader = await open_reader(gateway.store)
    try:
        async with TestClient(TestServer(gateway.dashboard.application(reader))) as client:
            yield client
    finally:
        await reader.close()


@contextlib.asynccontextmanager
async def browser(
    gateway: Gateway, address: str = "127.0.0.1", headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """A client of ``gateway``'s listening dashboard that connects from ``address`` (any
    of 127.0.0.0/8 is this machine's), sends ``headers`` with every request and keeps
    cookies as a browser does."""
    assert gateway.dashboard is not None and gateway.dashboard.url, "the dashboard is not up"
    async with ClientSession(
        gateway.dashboard.url,
        headers=headers,
        connector=TCPConnector(local_addr=(address, 0)),
        cookie_jar=CookieJar(unsafe=True),  # keep cookies of a numeric host
    ) as session:
        yield session


async def log_in(client: TestClient | ClientSession, token: str = TOKEN) -> ClientResponse:
    """Fill in the login form as a browser would; returns the answer to the POST."""
    form = await client.get("/login")
    nonce = form_value(await form.text(), "nonce")
    return await client.post(
        "/login", data={"token": token, "nonce": nonce, "next": "/"}, allow_redirects=False
    )


async def csrf_of(client: TestClient | ClientSession, path: str = "/") -> str:
    page = await client.get(path)
    assert page.status == 200, await page.text()
    return form_value(await page.text(), "csrf")
