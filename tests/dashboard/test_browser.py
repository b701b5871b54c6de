"""The dashboard in a real browser: Debian's Chromium driven by Playwright, against a
gateway holding a replayed night (tests/dashboard/night.py).

Playwright's own browser download cannot work on these machines, so the system's
``chromium`` is used (``executable_path``). Without it these tests skip with one line —
except under ``CI=true``, where a missing browser is a failure (.ci/run installs it).
Screenshots of every page land in ``artifacts/dashboard/`` (not committed).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.dashboard.url import dashboard_url
from tests.dashboard.night import (
    PEOPLE,
    SECRET_WORD,
    TELEGRAM_GROUP,
    night_config,
    night_gateway,
    replay_night,
)
from tests.dashboard.support import TOKEN
from tests.db import value
from tests.harness import RecordingAdapter
from tests.waiting import CEILING

playwright_api = pytest.importorskip("playwright.async_api")

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "dashboard"
WAIT_MS = CEILING * 1000
PHONE = {"width": 390, "height": 844}


def chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but no chromium: .ci/run must apt-get install -y chromium")
    pytest.skip("dashboard browser tests need Debian's chromium: apt-get install -y chromium")


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The replayed night, built once for the module (each test works on a copy)."""
    chromium()  # no browser: skip before spending the time
    data_dir = tmp_path_factory.mktemp("night")
    asyncio.run(replay_night(data_dir))
    return data_dir


@pytest.fixture
async def gateway(night: Path, tmp_path: Path) -> AsyncIterator[Gateway]:
    data_dir = tmp_path / "night"
    shutil.copytree(night, data_dir)
    config = night_config(data_dir, dashboard={"enabled": True, "port": 0, "token": TOKEN})
    gateway = night_gateway(config)
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.stop(drain_seconds=5)


@pytest.fixture
async def page(gateway: Gateway) -> AsyncIterator[playwright_api.Page]:
    """A browser tab logged in with the link ``nightowl dashboard-url`` prints."""
    assert gateway.dashboard is not None
    base = gateway.dashboard.url
    link = dashboard_url(gateway.config).replace("http://127.0.0.1:0", base)
    async with playwright_api.async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            tab = await browser.new_page(viewport={"width": 1280, "height": 900})
            tab.set_default_timeout(WAIT_MS)
            await tab.goto(link)
            await tab.wait_for_url(base + "/")
            yield tab
        finally:
            await browser.close()


async def screenshot(page: playwright_api.Page, name: str, *, full_page: bool = True) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)


async def test_the_printed_link_logs_in_and_leaves_no_token_behind(
    page: playwright_api.Page,
) -> None:
    assert await page.inner_text("h1") == "Overview"
    assert TOKEN not in page.url  # the fragment was cleared
    overview = await page.inner_text("main")
    assert "sessions active\n3" in overview and "turn_start_threshold" in overview
    cookies = await page.context.cookies()
    [session] = [c for c in cookies if c["name"] == "nightowl_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    assert await page.evaluate("document.cookie") == ""  # scripts cannot read it
    await screenshot(page, "overview")


async def test_the_sessions_table_lists_the_night_and_sorts(
    page: playwright_api.Page, gateway: Gateway
) -> None:
    await page.goto(gateway.dashboard.url + "/sessions")  # type: ignore[union-attr]
    keys = await page.locator("table.sessions td.key a").all_inner_texts()
    assert sorted(keys) == ["console:replay", "discord:9001", f"telegram:{TELEGRAM_GROUP}"]
    await page.click("th >> text=archived")
    await page.wait_for_url("**/sessions?sort=archived&dir=desc")
    ordered = await page.locator("table.sessions td.key a").all_inner_texts()
    assert ordered[0] == "console:replay"  # the longest night archived the most
    await screenshot(page, "sessions")


async def test_the_session_chart_marks_every_compaction(
    page: playwright_api.Page, gateway: Gateway
) -> None:
    config = gateway.config
    await page.goto(gateway.dashboard.url + "/session?key=console:replay")  # type: ignore[union-attr]
    chart = page.locator("#live_chart svg.chart")
    of_the_night = " JOIN sessions s ON s.id = x.session_id WHERE s.session_key = 'console:replay'"
    turns = value(config, "SELECT COUNT(*) FROM turn_stats x" + of_the_night)
    per_session = value(config, "SELECT COUNT(*) FROM compactions x" + of_the_night)
    counted = "SELECT compression_count FROM sessions WHERE session_key = 'console:replay'"
    assert per_session == value(config, counted)
    assert per_session > 10 and turns == 120
    assert await chart.locator("g.compression").count() == per_session
    points = await chart.locator("polyline.prompt").get_attribute("points")
    assert points is not None and len(points.split()) == turns
    tip = await chart.locator("g.compression title").first.text_content()
    assert tip is not None and "turn_start_threshold" in tip and "→" in tip
    for limit in ("window", "hygiene", "threshold"):
        assert await chart.locator(f"line.limit.{limit}").count() == 1
    await screenshot(page, "session", full_page=False)
    await page.set_viewport_size(PHONE)
    await screenshot(page, "session-phone", full_page=False)


async def test_search_finds_an_archived_row_greyed(
    page: playwright_api.Page, gateway: Gateway
) -> None:
    await page.goto(gateway.dashboard.url + "/session?key=console:replay")  # type: ignore[union-attr]
    await page.fill("form.search input[type=search]", SECRET_WORD)
    await page.press("form.search input[type=search]", "Enter")
    found = page.locator("#live_messages article.message.archived")
    await found.first.wait_for()
    assert SECRET_WORD in await found.first.inner_text()
    opacity = await found.first.evaluate("e => Number(getComputedStyle(e).opacity)")
    assert opacity < 1
    await screenshot(page, "search")


async def test_a_pairing_request_is_approved_in_the_browser(
    page: playwright_api.Page, gateway: Gateway
) -> None:
    await gateway.pairing.request("telegram", "4242", "Ada", "4242")
    await page.goto(gateway.dashboard.url + "/pairing")  # type: ignore[union-attr]
    await screenshot(page, "pairing")
    await page.click("tr:has-text('telegram:4242 (Ada)') >> button:has-text('Approve')")
    await page.wait_for_selector("text=Approved telegram:4242 (Ada)")
    assert await gateway.pairing.is_approved("telegram", "4242")
    assert "No requests are waiting" in await page.inner_text("main")


async def test_pages_refresh_themselves_and_fit_a_phone(
    page: playwright_api.Page, gateway: Gateway
) -> None:
    base = gateway.dashboard.url  # type: ignore[union-attr]
    await page.set_viewport_size(PHONE)
    await page.goto(base + "/sessions")
    adapter = gateway.adapters["telegram"]
    assert isinstance(adapter, RecordingAdapter)
    await adapter.say("good morning", chat_id=PEOPLE["Alice"], user_id=PEOPLE["Alice"])
    await page.wait_for_selector(f"text=telegram:{PEOPLE['Alice']}")  # no reload: the poll
    await screenshot(page, "sessions-phone")
    for path in ("/", "/sessions", "/session?key=console:replay", "/pairing"):
        await page.goto(base + path)
        overflow = await page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, path
