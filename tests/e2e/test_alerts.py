"""Alerts to the operator (docs/operations.md#alerts), end to end: the real gateway, the
fake Telegram and LLM, a local webhook; a condition told once when it starts and once
when it clears."""

from __future__ import annotations

import asyncio
import io
import logging
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from adapters.base import DeliveryError, OutboundMessage
from agent.served_window import ServedWindow
from agent.urls import host_port
from gateway.alerts.conditions import ModelServer, NoAnswer
from gateway.backup_status import BackupRun, record_run
from gateway.config.schema import Config, ConfigError, parse_config
from gateway.ops.backup import BackupError, backup
from tests.dashboard.support import client_of, dashboard_config, log_in
from tests.dashboard.test_metrics import samples
from tests.e2e.discord_stack import running_stack
from tests.e2e.telegram_helpers import ANN, BOB, telegram_config, telegram_gateway, visible
from tests.fakes.discord_world import ALICE, DM_CHANNEL_ID
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.fakes.local_servers import FakeOllama
from tests.fakes.telegram_server import FakeTelegram, SentMessage
from tests.harness import (
    RecordingAdapter,
    is_turn_request,
    make_config,
    running_gateway,
    turns_done,
)
from tests.waiting import Recording

OPERATOR = 42  # ANN: Telegram's private chat with a user has the user's id
AFTER = 0.3  # alerts.after_seconds: checks run every 0.15 s


class Webhook:
    """A local HTTP server recording the JSON POSTs it gets."""

    def __init__(self) -> None:
        self.posts: Recording[dict[str, Any]] = Recording()
        self.url = ""

    async def receive(self, request: web.Request) -> web.Response:
        await self.posts.add(await request.json())
        return web.Response(status=204)


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    hook = Webhook()
    app = web.Application()
    app.router.add_post("/alerts", hook.receive)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    hook.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/alerts"  # type: ignore[union-attr]
    try:
        yield hook
    finally:
        await runner.cleanup()


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


class Outage:
    """A model server that answers 500 while :attr:`failing`, then "back"."""

    failing = True

    def respond(self, request: Recorded) -> Reply:
        if self.failing:
            return Reply(status=500, error_type="server_error", error_message="down")
        return Reply("back")


def alerts(to: list[str], **more: Any) -> dict[str, Any]:
    return {"alerts": {"to": to, "after_seconds": AFTER, **more}}


def told(server: FakeTelegram, mark: str) -> list[SentMessage]:
    """Alert messages (``⚠`` started, ``✅`` cleared) sent to the operator's chat."""
    return [
        m
        for m in server.sent
        if str(m.chat_id) == str(OPERATOR) and visible(m.text).startswith(f"{mark} nightowl:")
    ]


def answered(server: FakeTelegram, text: str) -> bool:
    return any(visible(m.text) == text for m in server.sent)


async def test_a_provider_failing_every_call_is_told_once_and_its_recovery_once(
    tmp_path: Path, telegram: FakeTelegram, webhook: Webhook, caplog: pytest.LogCaptureFixture
) -> None:
    outage = Outage()
    async with FakeLLM(responder=outage.respond) as llm:
        config = telegram_config(
            tmp_path / "data",
            llm,
            telegram,
            sections=alerts([f"telegram:{OPERATOR}"], webhook=webhook.url),
        )
        async with telegram_gateway(config) as gateway:
            telegram.push_text(ANN["id"], "hello?", user=ANN)
            await telegram.wait_for(lambda: len(told(telegram, "⚠")) == 1)
            started = await webhook.posts.wait_for(1)
            assert gateway.operations.alerts()[0].condition == "provider"

            outage.failing = False
            telegram.push_text(ANN["id"], "and now?", user=ANN)
            await telegram.wait_for(lambda: len(told(telegram, "✅")) == 1)
            posts = await webhook.posts.wait_for(2)
            for _ in range(3):  # more looks tell nothing more
                await gateway.alerts.check()
            assert gateway.operations.alerts() == []

    [start] = told(telegram, "⚠")
    text = visible(start.text)
    # The model named as its server is (model_label), not as the SDK that speaks to it.
    assert f"the model (fake-model at {host_port(llm.openai_base_url)}) failed every" in text
    assert "the last with other (HTTP 500): " in text and "down" in text
    failures = [r for r in caplog.records if r.name == "gateway.provider_events"]
    assert failures and failures[0].levelno == logging.WARNING
    assert "chat call to fake-model failed: other (HTTP 500)" in failures[0].getMessage()
    assert "since 20" in text and "What to do:" in text and "nightowl doctor" in text
    assert "resolved: the model" in visible(told(telegram, "✅")[0].text)
    assert len(told(telegram, "⚠")) == 1 and len(told(telegram, "✅")) == 1
    assert [p["state"] for p in webhook.posts.items] == ["started", "cleared"]
    assert started[0]["condition"] == "provider" and posts[1]["condition"] == "provider"
    assert started[0]["since"] == posts[1]["since"]
    assert started[0]["text"].startswith("⚠ nightowl: the model")


async def test_a_deaf_telegram_is_told_rebuilt_and_cleared_only_when_updates_flow(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(
        tmp_path / "data", fake_llm, telegram, sections=alerts([f"telegram:{OPERATOR}"])
    )
    async with telegram_gateway(config) as gateway:
        adapter = gateway.adapters["telegram"]
        telegram.get_updates_empty = True  # Telegram holds the update; polling gets none
        telegram.push_text(ANN["id"], "anyone there?", user=ANN)
        await telegram.wait_for(lambda: len(told(telegram, "⚠")) == 1)
        status = adapter.status()
        assert status.restarts >= 1  # rebuilt before it was told
        assert "holds 1 update(s)" in status.problem  # a rebuild alone clears nothing
        assert gateway.operations.alerts()[0].condition == "platform:telegram"

        telegram.get_updates_empty = False
        telegram.resume_get_updates()  # wakes the long poll
        await telegram.wait_for(lambda: len(told(telegram, "✅")) == 1)
        await telegram.wait_for(lambda: answered(telegram, "echo: anyone there?"))  # got it
        for _ in range(3):
            await gateway.alerts.check()

    text = visible(told(telegram, "⚠")[0].text)
    assert "telegram receives nothing: Telegram holds 1 update(s)" in text
    assert "What to do:" in text
    assert len(told(telegram, "⚠")) == 1 and len(told(telegram, "✅")) == 1
    assert telegram.method_calls("getWebhookInfo")


async def test_a_nearly_full_disk_is_told_and_cleared(tmp_path: Path, fake_llm: FakeLLM) -> None:
    operator = RecordingAdapter("telegram")
    nobody = f"http://127.0.0.1:{free_port()}/alerts"  # a webhook that is down: logged only
    config = make_config(
        tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"], webhook=nobody)
    )
    async with running_gateway(config, operator) as gateway:
        gateway.alerts.disk_min_free_bytes = 1 << 62  # more than any disk has
        [started] = await operator.wait_sent(1)
        gateway.alerts.disk_min_free_bytes = 0
        gateway.alerts.disk_min_free_share = 0.0
        sent = await operator.wait_sent(2)
        for _ in range(3):
            await gateway.alerts.check()
        assert len(operator.sent) == 2
    assert started.startswith("⚠ nightowl: the disk holding ")
    assert f"{tmp_path / 'data'} has " in started and "MB free" in started
    assert sent[1].startswith("✅ nightowl: resolved: the disk holding")
    assert {m.chat_id for m in operator.sent} == {str(OPERATOR)}


async def test_a_failed_backup_is_told_at_once_and_cleared_by_the_next_whole_one(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """``nightowl backup`` run beside the gateway (as its daily timer runs it) fails:
    the operator hears it at the next check, not the day the backup is needed."""
    operator = RecordingAdapter("telegram")
    config = make_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the backups should go\n")
    async with running_gateway(config, operator) as gateway:
        with pytest.raises(BackupError, match="could not write the backup: "):
            await asyncio.to_thread(
                backup, config, to=str(blocked / "owl.tar.gz"), out=io.StringIO()
            )
        [started] = await operator.wait_sent(1)
        await asyncio.to_thread(backup, config, out=io.StringIO())
        sent = await operator.wait_sent(2)
        for _ in range(3):
            await gateway.alerts.check()
        assert len(operator.sent) == 2
    assert started.startswith("⚠ nightowl: the backup of ")
    assert " failed: could not write the backup: " in started
    assert "(no whole backup since this was kept)" in started
    assert "journalctl --user -u nightowl-backup" in started
    assert sent[1].startswith("✅ nightowl: resolved: the backup of ")


async def test_a_daily_backup_that_stopped_coming_is_told(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    operator = RecordingAdapter("telegram")
    config = make_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    (tmp_path / "data").mkdir()
    three_days_ago = time.time() - 3 * 86_400
    record_run(config.data_dir, BackupRun(three_days_ago, True, "/b.tar.gz", every=86_400))
    async with running_gateway(config, operator):
        [started] = await operator.wait_sent(1)
    assert started.startswith("⚠ nightowl: the daily backup has not run since ")
    assert "loginctl enable-linger" in started


async def test_a_model_server_down_before_any_message_is_told_and_cleared_when_it_listens(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A reboot started nightowl before its Ollama, and nobody writes overnight: no call
    fails, yet the operator hears that nothing listens where the replies will go."""
    operator = RecordingAdapter("telegram")
    port = free_port()
    server_url = f"http://127.0.0.1:{port}"  # as told: no password, no path
    config = make_config(
        tmp_path / "data",
        fake_llm,
        model={"base_url": f"http://owl:pr0xy-pass@127.0.0.1:{port}/v1"},
        **alerts([f"telegram:{OPERATOR}"]),
    )
    async with running_gateway(config, operator) as gateway:
        [started] = await operator.wait_sent(1)
        assert [a.condition for a in gateway.operations.alerts()] == ["provider"]
        listening = await asyncio.start_server(lambda _, writer: writer.close(), "127.0.0.1", port)
        async with listening:
            sent = await operator.wait_sent(2)
    assert started.startswith(
        f"⚠ nightowl: the model server of fake-model at {server_url} takes no connection"
        " (connection refused), since "
    )
    assert "is its service enabled at boot?" in started
    assert "pr0xy-pass" not in started + sent[1]
    assert sent[1].startswith(
        f"✅ nightowl: resolved: the model server of fake-model at {server_url}"
    )
    assert not fake_llm.requests


async def test_replies_that_could_not_reach_a_local_server_clear_when_it_listens_again(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Ollama is down: the operator is told, a message's reply fails (the alert now says
    so); when Ollama is back the alert clears by itself, not when somebody next writes."""
    operator = RecordingAdapter("telegram")
    port = free_port()
    config = make_config(
        tmp_path / "data",
        fake_llm,
        model={"base_url": f"http://127.0.0.1:{port}/v1", "context_length": 8_192},
        **alerts([f"telegram:{OPERATOR}"]),
    )
    person = RecordingAdapter()
    async with running_gateway(config, operator, person) as gateway:
        [down] = await operator.wait_sent(1)  # before anyone wrote: nothing listens there
        await person.say("hello?")
        [sorry] = await person.wait_sent(1)
        listening = await asyncio.start_server(lambda _, writer: writer.close(), "127.0.0.1", port)
        async with listening:
            sent = await operator.wait_sent(2)
            assert gateway.operations.alerts() == []
    assert down.startswith("⚠ nightowl: the model server of fake-model at ")
    assert "reach" in sorry
    assert sent[1].startswith("✅ nightowl: resolved: the model")


async def test_a_model_server_alert_told_before_a_restart_clears_after_it_when_it_listens(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Taken up at the restart, it is looked at again, not left standing until somebody
    writes (a quiet bot: maybe never)."""
    operator = RecordingAdapter("telegram")
    port = free_port()
    config = make_config(
        tmp_path / "data",
        fake_llm,
        model={"base_url": f"http://127.0.0.1:{port}/v1"},
        **alerts([f"telegram:{OPERATOR}"]),
    )
    async with running_gateway(config, operator):
        [started] = await operator.wait_sent(1)
    listening = await asyncio.start_server(lambda _, writer: writer.close(), "127.0.0.1", port)
    async with listening, running_gateway(config, operator) as gateway:
        sent = await operator.wait_sent(2)
        assert gateway.operations.alerts() == []
    assert started.startswith("⚠ nightowl: the model server of fake-model at ")
    assert sent[1].startswith("✅ nightowl: resolved: the model server of fake-model at ")
    assert not fake_llm.requests


async def test_a_model_the_server_lacks_is_told_before_any_message_and_cleared_once_pulled(
    tmp_path: Path,
) -> None:
    """Set up at night with a name Ollama doesn't have (a typo, or never pulled): the
    operator hears it before the first morning message fails."""
    operator = RecordingAdapter("telegram")
    async with FakeOllama(model="qwen3:8b", loaded=True) as ollama:
        config = make_config(
            tmp_path / "data",
            ollama,
            model={"name": "qwen3:8B", "context_length": 4_096},
            **alerts([f"telegram:{OPERATOR}"]),
        )
        async with running_gateway(config, operator) as gateway:
            [started] = await operator.wait_sent(1)
            assert [a.condition for a in gateway.operations.alerts()] == ["provider"]
            ollama.model = "qwen3:8B"  # `ollama pull qwen3:8B`
            sent = await operator.wait_sent(2)
        assert not [r for r in ollama.requests if is_turn_request(r)]
    where = f"the model server of qwen3:8B at http://127.0.0.1:{ollama.port}"
    assert started.startswith(
        f"⚠ nightowl: {where} does not have that model (it has qwen3:8b), since "
    )
    assert "Set model.name to qwen3:8b (names are case-sensitive); replies fail" in started
    assert sent[1].startswith(f"✅ nightowl: resolved: {where} does not have that model")


async def test_a_model_server_that_answers_too_slowly_says_nothing_either_way() -> None:
    """A slow Ollama (loading another model) must not clear a standing alert, nor start
    one: the look raises NoAnswer, and the monitor keeps what held."""

    async def listening(url: str, timeout: float) -> None:
        return None

    async def slow() -> ServedWindow | None:
        await asyncio.Event().wait()  # never answers
        return None

    server = ModelServer("http://127.0.0.1:11434/v1", "qwen3:8b", listening, slow, timeout=0.05)
    with pytest.raises(NoAnswer, match=r"did not answer within 0\.05 s"):
        await server.observation()


async def test_a_budget_reached_is_told_once_at_once(tmp_path: Path, fake_llm: FakeLLM) -> None:
    console, operator = RecordingAdapter(), RecordingAdapter("telegram")
    config = make_config(
        tmp_path / "data",
        fake_llm,
        model={"price": {"input": 100, "output": 200}},
        budgets={"monthly": 0},
        alerts={"to": [f"telegram:{OPERATOR}"], "after_seconds": 3600},  # "at once" shows
    )
    async with running_gateway(config, console, operator) as gateway:
        for count, text in enumerate(("first", "second"), start=1):
            await console.say(text)
            await console.wait_sent(count)  # the refusal
            await turns_done(gateway)
        await gateway.events.drain()  # budget:reached reached the alerts
        for _ in range(3):
            await gateway.alerts.check()
        to_operator = operator.texts(str(OPERATOR))
        assert [a.condition for a in gateway.operations.alerts()] == ["budget"]
    assert len(to_operator) == 1
    assert to_operator[0].startswith(
        "⚠ nightowl: a budget refuses calls: budgets.monthly (the bot)"
    )
    assert "What to do:" in to_operator[0]
    assert not fake_llm.requests  # refused before any call


async def test_a_conflict_loop_is_told_and_cleared_once_polling_works(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """A second process polls with the token: every getUpdates gets 409 Conflict."""
    config = telegram_config(
        tmp_path / "data", fake_llm, telegram, sections=alerts([f"telegram:{OPERATOR}"])
    )
    async with telegram_gateway(config) as gateway:
        telegram.fail_next("getUpdates", 409, CONFLICT, times=1_000_000)
        await telegram.wait_for(lambda: len(told(telegram, "⚠")) == 1)
        assert gateway.adapters["telegram"].status().restarts >= 1
        telegram.clear_failures("getUpdates")  # the other process stopped
        telegram.push_text(ANN["id"], "you there?", user=ANN)
        await telegram.wait_for(lambda: len(told(telegram, "✅")) == 1)
        await telegram.wait_for(lambda: answered(telegram, "echo: you there?"))
    text = visible(told(telegram, "⚠")[0].text)
    assert "telegram receives nothing: getUpdates fails: " in text
    assert "another bot instance or a webhook is using this token" in text
    assert len(told(telegram, "⚠")) == 1 and len(told(telegram, "✅")) == 1


CONFLICT = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"


async def test_a_discord_operator_is_told_in_a_dm(tmp_path: Path, fake_llm: FakeLLM) -> None:
    section = alerts([f"discord:{ALICE['id']}"])
    async with running_stack(tmp_path / "data", fake_llm, sections=section) as stack:
        stack.gateway.alerts.disk_min_free_bytes = 1 << 62
        [sent] = await stack.fake.wait_for_sent(1)
    assert sent.channel_id == DM_CHANNEL_ID  # the DM the adapter opened with Alice
    assert sent.content.startswith("⚠ nightowl: the disk holding ")


async def test_an_alert_with_nobody_to_tell_is_an_event_but_no_message_counted(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """No alerts.to, no webhook: the event (for hooks) says it was not sent, and
    nightowl_alerts_sent_total counts no message that was never sent."""
    config = dashboard_config(tmp_path / "data", fake_llm, **alerts([]))
    async with running_gateway(config) as gateway, client_of(gateway) as client:
        seen: list[dict[str, Any]] = []
        told = asyncio.Event()

        def alert(_: str, payload: dict[str, Any]) -> None:
            seen.append(payload)
            told.set()

        gateway.events.subscribe(["gateway:alert"], alert)
        gateway.alerts.disk_min_free_bytes = 1 << 62  # checks run every 0.15 s
        await asyncio.wait_for(told.wait(), 10)
        await gateway.events.drain()
        scraped = samples(await (await client.get("/metrics")).text())
    assert [(p["condition"], p["state"], p["sent"]) for p in seen] == [("disk", "started", False)]
    assert scraped[("nightowl_alerts_active", (("condition", "disk"),))] == 1
    assert (
        "nightowl_alerts_sent_total",
        (("condition", "disk"), ("state", "started")),
    ) not in scraped


async def test_alerts_show_on_the_dashboard_and_in_metrics(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    operator = RecordingAdapter("telegram")
    config = dashboard_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    async with running_gateway(config, operator) as gateway, client_of(gateway) as client:
        gateway.alerts.disk_min_free_bytes = 1 << 62
        await operator.wait_sent(1)
        await gateway.events.drain()
        holding = samples(await (await client.get("/metrics")).text())
        await log_in(client)
        page = await (await client.get("/")).text()
        gateway.alerts.disk_min_free_bytes = 0
        gateway.alerts.disk_min_free_share = 0.0
        await operator.wait_sent(2)
        await gateway.events.drain()
        cleared = samples(await (await client.get("/metrics")).text())
    assert holding[("nightowl_alerts_active", (("condition", "disk"),))] == 1
    assert (
        holding[("nightowl_alerts_sent_total", (("condition", "disk"), ("state", "started")))] == 1
    )
    assert holding[("nightowl_adapter_restarts", (("platform", "telegram"),))] == 0
    assert "Needs a hand" in page and "the disk holding" in page and ">disk<" in page
    assert cleared[("nightowl_alerts_active", (("condition", "disk"),))] == 0
    assert (
        cleared[("nightowl_alerts_sent_total", (("condition", "disk"), ("state", "cleared")))] == 1
    )


async def test_a_waiting_pairing_request_is_told_and_cleared_once_answered(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(
        tmp_path / "data", fake_llm, telegram, sections=alerts([f"telegram:{OPERATOR}"])
    )
    async with telegram_gateway(config) as gateway:
        telegram.push_text(BOB["id"], "let me in", user=BOB)
        await telegram.wait_for(lambda: len(told(telegram, "⚠")) == 1)
        [request] = await gateway.operations.pending_pairings()
        await gateway.operations.approve(request.code, "the test")
        await telegram.wait_for(lambda: len(told(telegram, "✅")) == 1)
    text = visible(told(telegram, "⚠")[0].text)
    assert text.startswith("⚠ nightowl: 1 pairing request waiting, since ")
    assert "nightowl pairing approve <code>" in text


class RefusingAdapter(RecordingAdapter):
    """A platform that refuses every send while :attr:`refusing` is set."""

    refusing = True

    async def send(self, message: OutboundMessage) -> list[str]:
        if self.refusing:
            raise DeliveryError("refused", platform=self.platform, chat_id=message.chat_id)
        return await super().send(message)


async def test_undelivered_replies_are_told_and_cleared_once_delivered(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    chat, operator = RefusingAdapter(), RecordingAdapter("telegram")
    config = make_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    async with running_gateway(config, chat, operator) as gateway:
        await chat.say("hello")
        [started] = await operator.wait_sent(1)
        chat.refusing = False
        await gateway.scheduler.retry_deliveries()  # what its job does every minute
        await chat.wait_sent(1)
        sent = await operator.wait_sent(2)
    assert started.startswith("⚠ nightowl: 1 reply is stored but not delivered, since ")
    assert sent[1].startswith("✅ nightowl: resolved: 1 reply is stored but not delivered")


async def test_never_more_than_one_message_per_condition_per_after_seconds(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A condition that clears and comes back within ``after_seconds`` was never gone;
    a clearing waits until ``after_seconds`` passed since the last message."""
    operator = RecordingAdapter("telegram")
    hour = 3600.0
    config = make_config(
        tmp_path / "data", fake_llm, alerts={"to": [f"telegram:{OPERATOR}"], "after_seconds": hour}
    )
    async with running_gateway(config, operator) as gateway:
        alerts, now = gateway.alerts, 1_000_000.0
        alerts.clock = lambda: now

        async def look(at: float, *, full: bool) -> list[str]:
            nonlocal now
            now = 1_000_000.0 + at
            alerts.disk_min_free_bytes = 1 << 62 if full else 0
            alerts.disk_min_free_share = 0.05 if full else 0.0
            await alerts.check()
            return operator.texts()

        assert await look(0, full=True) == []
        assert await look(hour - 1, full=True) == []  # not long enough yet
        [started] = await look(hour, full=True)
        assert len(await look(hour + 100, full=False)) == 1  # cleared, but told too recently
        assert len(await look(hour + 200, full=True)) == 1  # back: it was never gone
        assert len(await look(2 * hour - 1, full=False)) == 1
        told = await look(2 * hour, full=False)
        assert await look(2 * hour + 1, full=False) == told
    assert started.startswith("⚠ nightowl: the disk holding ")
    assert "since 1970-01-12 13:46:40 UTC" in started
    assert len(told) == 2 and told[1].startswith("✅ nightowl: resolved: the disk holding")
    assert "2.0 h)" in told[1]  # from the first sight to the clearing


async def test_a_webhook_telegram_never_reached_is_told(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    port = free_port()
    config = telegram_config(
        tmp_path / "data",
        fake_llm,
        telegram,
        sections=alerts([f"telegram:{OPERATOR}"]),
        webhook={"url": "https://bot.example.org/tg/hook", "port": port, "secret_token": SECRET},
    )
    async with telegram_gateway(config) as gateway:
        telegram.webhook_error = "Connection timed out"  # the proxy in front is down
        update = telegram.push_text(ANN["id"], "hello?", user=ANN)
        await telegram.wait_for(lambda: len(told(telegram, "⚠")) == 1)
        assert gateway.adapters["telegram"].status().connected is False

        telegram.webhook_error, telegram.pending = None, []  # the proxy is back: delivered
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"http://127.0.0.1:{port}/tg/hook",
                json={"update_id": telegram.last_pushed, "message": update},
                headers={"X-Telegram-Bot-Api-Secret-Token": SECRET},
            ) as accepted,
        ):
            assert accepted.status == 200
        await telegram.wait_for(lambda: len(told(telegram, "✅")) == 1)
    text = visible(told(telegram, "⚠")[0].text)
    assert "Telegram holds 1 update(s) for the bot, but none reach the webhook" in text
    assert "(Telegram says: Connection timed out)" in text


SECRET = "alerts-test-secret_0123"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("section", "refusal"),
    [
        ({"to": ["42"]}, 'alerts.to[0]: expected "telegram:<user id>" or "discord:<user id>"'),
        ({"to": ["telegram:"]}, 'got "telegram:"'),
        ({"webhook": "hooks.example.org/x"}, "alerts.webhook: expected an http(s) URL"),
        ({"after_seconds": 0}, "alerts.after_seconds"),
    ],
)
def test_a_wrong_alerts_section_is_refused_with_its_key(
    section: dict[str, Any], refusal: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"alerts": section}, {})
    assert refusal in str(caught.value)


async def test_a_discord_gateway_connection_down_is_told_and_cleared_once_back(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    section = alerts([f"discord:{ALICE['id']}"])
    async with running_stack(tmp_path / "data", fake_llm, sections=section) as stack:
        fake = stack.fake
        await fake.cut_gateway()
        [started] = await fake.wait_for_sent(1)
        fake.restore_gateway()  # discord.py's next attempt gets through
        sent = await fake.wait_for_sent(2)
        assert stack.gateway.adapters["discord"].status().restarts == 1
    assert started.channel_id == DM_CHANNEL_ID
    assert started.content.startswith(
        "⚠ nightowl: discord receives nothing: the gateway connection dropped"
    )
    assert sent[1].content.startswith("✅ nightowl: resolved: discord receives nothing")


HOOK_URL = "https://bot.example.org/tg/hook"


def webhook_config(tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram) -> Config:
    """Telegram in webhook mode at :data:`HOOK_URL`, with the operator's alerts."""
    return telegram_config(
        tmp_path / "data",
        llm,
        telegram,
        sections=alerts([f"telegram:{OPERATOR}"]),
        webhook={"url": HOOK_URL, "port": free_port(), "secret_token": SECRET},
    )


async def test_a_webhook_another_process_deleted_is_set_again_and_told(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """A script that calls getUpdates with the bot's token must delete the webhook first;
    Telegram then keeps every update for getUpdates, and the bot is deaf until the
    webhook is set again."""
    url = HOOK_URL
    config = webhook_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config) as gateway:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{telegram.base_url}{telegram.token}/deleteWebhook") as deleted,
        ):
            assert deleted.status == 200  # as the other process would
        await telegram.wait_for(lambda: len(told(telegram, "⚠")) == 1)
        await telegram.wait_for(lambda: len(told(telegram, "✅")) == 1)
        status = gateway.adapters["telegram"].status()
    set_again = [w for w in telegram.webhooks if w.get("url") == url]
    assert len(set_again) == 2  # at start, and once more
    assert set_again[1]["secret_token"] == SECRET
    assert status.connected and status.restarts == 1
    text = visible(told(telegram, "⚠")[0].text)
    assert "Telegram sends its updates to no webhook" in text and url in text


async def test_a_webhook_another_deployment_moved_is_told_and_left_to_the_operator(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    """Setting it back would fight the other deployment for the bot's updates."""
    url = HOOK_URL
    config = webhook_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config) as gateway:
        other = f"https://new.example.org/bot{telegram.token}/hook"  # the token in its path
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{telegram.base_url}{telegram.token}/setWebhook", json={"url": other}),
        ):
            pass
        await telegram.wait_for(lambda: len(told(telegram, "⚠")) == 1)
        await gateway.alerts.check()
        status = gateway.adapters["telegram"].status()
    assert [w.get("url") for w in telegram.webhooks] == [url, other]  # not set back
    assert status.restarts == 0 and not status.connected
    text = visible(told(telegram, "⚠")[0].text)
    assert "Telegram sends its updates to https://new.example.org/bot" in text
    assert "another deployment of this bot?" in text and telegram.token not in text
