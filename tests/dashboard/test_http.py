"""The dashboard over HTTP (aiohttp's test client): who gets in, what a page shows, what
an action does, and what it refuses."""

from __future__ import annotations

from pathlib import Path

from gateway.conversation.pairing import CODE_ALPHABET
from tests.dashboard.support import TOKEN, client_of, csrf_of, dashboard_config, log_in
from tests.db import value
from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, running_gateway, summarizing, turns_done
from tests.waiting import CEILING, Recording


async def test_every_page_and_action_needs_a_login(tmp_path: Path, fake_llm: FakeLLM) -> None:
    async with (
        running_gateway(dashboard_config(tmp_path, fake_llm)) as gateway,
        client_of(gateway) as client,
    ):
        page = await client.get("/sessions?sort=tokens", allow_redirects=False)
        assert page.status == 303
        assert page.headers["Location"] == "/login?next=/sessions%3Fsort%3Dtokens"
        for path in ("/", "/session?key=console:t", "/pairing"):
            polled = await client.get(path, headers={"Accept": "application/json"})
            assert polled.status == 401, path
        for path in ("/session/compress", "/session/forget", "/pairing/answer", "/logout"):
            posted = await client.post(path, data={"key": "console:t"})
            assert posted.status == 401, path
        forged = await client.get("/", cookies={"nightowl_session": "4102444800.deadbeef"})
        assert forged.status == 200 and "Log in" in await forged.text()  # the login form


async def test_the_token_logs_in_with_an_httponly_strict_cookie(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with (
        running_gateway(dashboard_config(tmp_path, fake_llm)) as gateway,
        client_of(gateway) as client,
    ):
        wrong = await log_in(client, "not-the-token")
        assert wrong.status == 401 and "wrong token" in await wrong.text()
        assert "nightowl_session" not in wrong.cookies
        answer = await log_in(client)
        assert answer.status == 303 and answer.headers["Location"] == "/"
        cookie = answer.cookies["nightowl_session"]
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/"
        assert TOKEN not in cookie.value
        for path, text in (
            ("/", "Provider"),
            ("/sessions", "No sessions yet"),
            ("/pairing", "No requests are waiting"),
        ):
            page = await client.get(path)
            assert page.status == 200 and text in await page.text(), path
            assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
            assert page.headers["X-Frame-Options"] == "DENY"
        logout = await client.post(
            "/logout", data={"csrf": await csrf_of(client)}, allow_redirects=False
        )
        assert logout.status == 303
        assert (await client.get("/", allow_redirects=False)).status == 303


async def test_a_login_form_not_shown_by_the_dashboard_is_refused(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with (
        running_gateway(dashboard_config(tmp_path, fake_llm)) as gateway,
        client_of(gateway) as client,
    ):
        posted = await client.post("/login", data={"token": TOKEN, "nonce": "guess"})
        assert posted.status == 403
        assert "nightowl_session" not in posted.cookies


async def test_a_post_without_the_csrf_value_changes_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    config = dashboard_config(tmp_path, fake_llm)
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway, client_of(gateway) as client:
        for n in range(4):
            await adapter.say(f"message {n}")
            await adapter.wait_sent(n + 1)
        await log_in(client)
        for csrf in (None, "0" * 32):
            data = {"key": "console:t", **({"csrf": csrf} if csrf else {})}
            for path in ("/session/compress", "/session/forget"):
                refused = await client.post(path, data={**data, "confirm": "console:t"})
                assert refused.status == 403, (path, csrf)
        await gateway.pairing.request("telegram", "77", "Eve", "77")
        [request] = await gateway.pairing.pending()
        refused = await client.post(
            "/pairing/answer", data={"code": request.code, "action": "approve"}
        )
        assert refused.status == 403
        await turns_done(gateway)
    assert value(config, "SELECT compression_count FROM sessions") == 0
    assert value(config, "SELECT COUNT(*) FROM messages") == 9  # system + 4 exchanges
    assert value(config, "SELECT COUNT(*) FROM paired_users") == 0


async def test_compress_now_runs_in_the_lane_and_the_page_tells_how_it_went(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    adapter = RecordingAdapter()
    config = dashboard_config(tmp_path, fake_llm)
    compressed: Recording[dict] = Recording()
    async with running_gateway(config, adapter) as gateway, client_of(gateway) as client:
        gateway.events.subscribe(["session:compress"], lambda e, p: compressed.add(p))
        for n in range(8):
            await adapter.say(f"fact: number {n} is lucky.\n" + "w" * 6000)
            await adapter.wait_sent(n + 1)
        await log_in(client)
        csrf = await csrf_of(client, "/session?key=console:t")
        answer = await client.post(
            "/session/compress", data={"key": "console:t", "csrf": csrf}, allow_redirects=False
        )
        assert answer.status == 303 and answer.headers["Location"] == "/session?key=console%3At"
        [event] = await compressed.wait_for(1)
        assert event["trigger_source"] == "manual"
        assert gateway.dashboard is not None and gateway.dashboard.pages is not None
        await gateway.dashboard.pages.background.wait(CEILING)
        page = await (await client.get("/session?key=console:t")).text()
        assert "Compressed: 17 →" in page
        assert page.count('class="compression"') == 1
        assert "fact: number 0 is lucky" in page  # the summary
    assert value(config, "SELECT COUNT(*) FROM compactions WHERE trigger_source = 'manual'") == 1


async def test_forget_asks_for_the_key_then_erases_the_session_and_its_chart(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter()
    config = dashboard_config(tmp_path, fake_llm)
    async with running_gateway(config, adapter) as gateway, client_of(gateway) as client:
        await adapter.say("keep me", chat_id="keep")
        await adapter.say("forget me", chat_id="gone")
        await adapter.wait_sent(2)
        await log_in(client)
        confirm = await client.get("/session/forget?key=console:gone")
        assert "Type <code>console:gone</code> to confirm" in await confirm.text()
        csrf = await csrf_of(client, "/session/forget?key=console:gone")
        mistyped = await client.post(
            "/session/forget",
            data={"key": "console:gone", "confirm": "console:gon", "csrf": csrf},
            allow_redirects=False,
        )
        assert mistyped.headers["Location"] == "/session?key=console%3Agone"
        page = await (await client.get("/session?key=console:gone")).text()
        assert "Nothing was forgotten" in page
        assert value(config, "SELECT COUNT(*) FROM turn_stats") == 2
        forgot = await client.post(
            "/session/forget",
            data={"key": "console:gone", "confirm": "console:gone", "csrf": csrf},
            allow_redirects=False,
        )
        assert forgot.headers["Location"] == "/sessions"
        assert gateway.dashboard is not None and gateway.dashboard.pages is not None
        await gateway.dashboard.pages.background.wait(CEILING)
        listing = await (await client.get("/sessions")).text()
        assert "Forgot console:gone: 3 messages erased." in listing
        assert "console:keep" in listing and "session?key=console%3Agone" not in listing
        assert (await client.get("/session?key=console:gone")).status == 404
    assert value(config, "SELECT COUNT(*) FROM sessions WHERE session_key = 'console:gone'") == 0
    assert value(config, "SELECT COUNT(*) FROM turn_stats") == 1  # the kept chat's


async def test_pairing_requests_are_approved_and_denied_from_the_page(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with (
        running_gateway(dashboard_config(tmp_path, fake_llm)) as gateway,
        client_of(gateway) as client,
    ):
        await gateway.pairing.request("telegram", "501", "Ada", "501")
        await gateway.pairing.request("discord", "502", "Bob\x1b[31m", "502")
        ada, bob = await gateway.pairing.pending()
        await log_in(client)
        page = await (await client.get("/pairing")).text()
        assert ada.code in page and "telegram:501 (Ada)" in page
        assert "discord:502 (Bob\\x1b[31m)" in page  # a name's escape sequence, shown escaped
        csrf = await csrf_of(client, "/pairing")
        await client.post(
            "/pairing/answer", data={"csrf": csrf, "code": ada.code, "action": "approve"}
        )
        await client.post(
            "/pairing/answer", data={"csrf": csrf, "code": bob.code, "action": "deny"}
        )
        page = await (await client.get("/pairing")).text()
        assert "Denied discord:502" in page and "No requests are waiting" in page
        assert "telegram:501 (Ada)" in page and "by dashboard" in page  # now paired
        assert await gateway.pairing.is_approved("telegram", "501")
        assert not await gateway.pairing.is_approved("discord", "502")
        assert set(ada.code) <= set(CODE_ALPHABET)


async def test_a_page_polled_as_json_gives_its_data_and_live_parts(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter()
    async with (
        running_gateway(dashboard_config(tmp_path, fake_llm), adapter) as gateway,
        client_of(gateway) as client,
    ):
        await adapter.say("hello")
        await adapter.wait_sent(1)
        await log_in(client)
        polled = await client.get("/sessions", headers={"Accept": "application/json"})
        body = await polled.json()
        [row] = body["data"]["sessions"]
        assert row["session_key"] == "console:t" and row["active_messages"] == 3
        assert set(body["fragments"]) == {"live_sessions"}
        assert "console:t" in body["fragments"]["live_sessions"]
        session = await (
            await client.get("/session?key=console:t", headers={"Accept": "application/json"})
        ).json()
        assert {
            "live_status",
            "live_context",
            "live_chart",
            "live_summary",
            "live_messages",
        } <= set(session["fragments"])
        assert session["data"]["turns"] == 1
        assert "<svg" in session["fragments"]["live_chart"]
