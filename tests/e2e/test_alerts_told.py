"""Alerts across restarts and replicas (docs/operations.md#alerts-and-replicas): what
was told is in the store, so a gateway that restarts does not tell it again but tells
its clearing, and replicas on one PostgreSQL database tell a shared condition once."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from asyncio import FIRST_COMPLETED
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from adapters.base import DeliveryError, OutboundMessage
from agent.urls import host_port
from gateway.alerts.conditions import HOUSEKEEPING, USES, ProviderFailures
from gateway.alerts.sending import UNSENT_FILE, UNSENT_KEPT, AlertSender
from gateway.app import Gateway
from gateway.config.alerts import AlertsConfig
from gateway.config.schema import Config
from gateway.events import BudgetReached
from gateway.store import AlertStore, AlertTold, Claim, PairingRequest, StoreError
from tests import db
from tests.e2e.test_alerts import OPERATOR, Outage, alerts
from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, make_config, running_gateway
from tests.waiting import CEILING, Recording

FULL = 1 << 62  # more free bytes than any disk has: the disk condition holds
AFTER_SECONDS = 0.3  # alerts.after_seconds in these tests


def disk_full(gateway: Gateway, full: bool) -> None:
    gateway.alerts.disk_min_free_bytes = FULL if full else 0
    gateway.alerts.disk_min_free_share = 0.05 if full else 0.0


class RefusingAdapter(RecordingAdapter):
    """A platform that refuses every send while :attr:`refusing` is set (and records
    each refused text)."""

    refusing = True

    def __init__(self, platform: str) -> None:
        super().__init__(platform)
        self.refused: Recording[str] = Recording()

    async def send(self, message: OutboundMessage) -> list[str]:
        if self.refusing:
            await self.refused.add(message.text)
            raise DeliveryError("refused", platform=self.platform, chat_id=message.chat_id)
        return await super().send(message)


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """``app`` on a free local port; yields its ``/alerts`` URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/alerts"
    finally:
        await runner.cleanup()


async def one_more(*operators: RecordingAdapter) -> None:
    """Until one of ``operators`` was sent one message more than it has now."""
    waits = [asyncio.create_task(o.wait_sent(len(o.sent) + 1)) for o in operators]
    try:
        done, _ = await asyncio.wait(waits, timeout=CEILING, return_when=FIRST_COMPLETED)
        assert done, "no alert was told"
    finally:
        for wait in waits:
            wait.cancel()


async def looks(*gateways: Gateway, times: int = 3) -> None:
    """What the alert job does every ``after_seconds / 2``, now, a few times over."""
    for _ in range(times):
        for gateway in gateways:
            await gateway.alerts.check()


async def disk_told_then_stopped(tmp_path: Path, llm: FakeLLM) -> tuple[Config, str]:
    """A gateway told the operator its disk is full, then stopped: its config, what it told."""
    config = make_config(tmp_path / "data", llm, **alerts([f"telegram:{OPERATOR}"]))
    operator = RecordingAdapter("telegram")
    async with running_gateway(config, operator) as gateway:
        disk_full(gateway, True)
        [started] = await operator.wait_sent(1)
    return config, started


async def test_a_restart_does_not_tell_again_what_holds_and_tells_its_clearing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config, started = await disk_told_then_stopped(tmp_path, fake_llm)
    after = RecordingAdapter("telegram")
    async with running_gateway(config, after) as gateway:
        disk_full(gateway, True)
        await looks(gateway)
        assert after.texts() == []  # told before the restart; still holding
        assert [a.condition for a in gateway.operations.alerts()] == ["disk"]
        disk_full(gateway, False)
        [cleared] = await after.wait_sent(1)
    assert started.startswith("⚠ nightowl: the disk holding ")
    assert cleared.startswith("✅ nightowl: resolved: the disk holding ")


async def test_a_condition_gone_while_the_gateway_was_down_is_told_cleared(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config, _ = await disk_told_then_stopped(tmp_path, fake_llm)
    after = RecordingAdapter("telegram")
    async with running_gateway(config, after) as gateway:
        disk_full(gateway, False)
        [cleared] = await after.wait_sent(1)
        await looks(gateway)
    assert cleared.startswith("✅ nightowl: resolved: the disk holding ")
    assert len(after.sent) == 1


async def test_a_failing_model_told_before_a_restart_stands_until_a_call_says_otherwise(
    tmp_path: Path,
) -> None:
    outage = Outage()
    async with FakeLLM(responder=outage.respond) as llm:
        config = make_config(tmp_path / "data", llm, **alerts([f"telegram:{OPERATOR}"]))
        console, before = RecordingAdapter(), RecordingAdapter("telegram")
        after = RecordingAdapter("telegram")
        async with running_gateway(config, console, before) as gateway:
            await console.say("hello?")
            [started] = await before.wait_sent(1)
        outage.failing = False
        console = RecordingAdapter()
        async with running_gateway(config, console, after) as gateway:
            await looks(gateway)  # no call yet: nothing says the model is back
            assert after.texts() == []
            assert [a.condition for a in gateway.operations.alerts()] == ["provider"]
            await console.say("and now?")
            [cleared] = await after.wait_sent(1)
    model = f"fake-model at {host_port(llm.openai_base_url)}"
    assert started.startswith(f"⚠ nightowl: the model ({model}) failed")
    assert cleared.startswith(f"✅ nightowl: resolved: the model ({model})")


async def test_replicas_tell_a_shared_condition_once(
    tmp_path: Path, fake_llm: FakeLLM, postgres_dsn: str
) -> None:
    """Two gateways on one database see the same pairing request: one message, from
    whichever claimed it, for its start and for its clearing."""
    operators = RecordingAdapter("telegram"), RecordingAdapter("telegram")
    configs = [
        make_config(
            tmp_path / name,
            fake_llm,
            store={"backend": "postgres", "dsn": postgres_dsn},
            **alerts([f"telegram:{OPERATOR}"]),
        )
        for name in ("a", "b")
    ]
    async with (
        running_gateway(configs[0], operators[0]) as a,
        running_gateway(configs[1], operators[1]) as b,
    ):
        now = a.alerts.clock()
        stranger = PairingRequest("telegram", "7", "Eve", "7", "ABCD2345", now, now + 3600)
        await a.store.pairing.request(stranger, limit=10, fresh_code=lambda: "EFGH2345")
        await one_more(*operators)
        await looks(a, b)
        assert sum(len(o.sent) for o in operators) == 1
        await b.operations.deny(stranger.code)
        await one_more(*operators)
        await looks(a, b)
    texts = [text for operator in operators for text in operator.texts()]
    assert len(texts) == 2
    assert {text[:1] for text in texts} == {"⚠", "✅"}
    assert any("1 pairing request waiting" in text for text in texts)


async def test_an_alert_the_store_cannot_keep_is_told_anyway(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The disk is full, or the database refuses writes: the operator must hear of it all
    the same, this process keeping the pace on its own."""
    config = make_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    operator = RecordingAdapter("telegram")
    async with running_gateway(config, operator) as gateway:
        await gateway.alerts.check()  # what was told before is read at the first look
        await gateway.store.close()  # every trip to it fails from now on
        disk_full(gateway, True)
        [started] = await operator.wait_sent(1)
        await looks(gateway)
        assert len(operator.sent) == 1  # told once, not at every look
        disk_full(gateway, False)
        sent = await operator.wait_sent(2)  # no row says it was told: told all the same
    assert started.startswith("⚠ nightowl: the disk holding ")
    assert sent[1].startswith("✅ nightowl: resolved: the disk holding ")


class WritesRefused:
    """The gateway's own store of what was told, refusing writes while :attr:`full` (a
    disk that filled up, then got room again)."""

    def __init__(self, store: AlertStore) -> None:
        self.store = store
        self.full = True

    async def told(self) -> list[AlertTold]:
        return await self.store.told()

    async def claim(self, alert: AlertTold, after: float) -> tuple[Claim, AlertTold | None]:
        if self.full:
            raise StoreError("database or disk is full")
        return await self.store.claim(alert, after)

    async def extend(self, condition: str, until: float) -> None:
        if self.full:
            raise StoreError("database or disk is full")
        await self.store.extend(condition, until)


async def test_a_start_the_store_could_not_keep_gets_its_clearing_once_it_can(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    operator = RecordingAdapter("telegram")
    async with running_gateway(config, operator) as gateway:
        gateway.alerts.told = writes = WritesRefused(gateway.store.alerts)
        disk_full(gateway, True)
        await operator.wait_sent(1)
        writes.full = False  # room again: the store has no row of that start
        disk_full(gateway, False)
        sent = await operator.wait_sent(2)
    assert sent[1].startswith("✅ nightowl: resolved: the disk holding ")


async def test_an_alert_the_operator_could_not_get_is_sent_again_in_order(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The way to the operator is down when the alert is told: it is sent at a later
    check, and its clearing after it."""
    operator = RefusingAdapter("telegram")
    config = make_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    async with running_gateway(config, operator) as gateway:
        disk_full(gateway, True)
        await operator.refused.wait_for(1)
        disk_full(gateway, False)  # cleared while the first message waits
        await operator.refused.wait_for(2)
        operator.refusing = False
        sent = await operator.wait_sent(2)
        await looks(gateway)
        assert gateway.alerts.sender.unsent == deque()
    assert sent[0].startswith("⚠ nightowl: the disk holding ")
    assert sent[1].startswith("✅ nightowl: resolved: the disk holding ")
    assert len(operator.sent) == 2


async def test_a_webhook_down_gets_the_alert_later_and_one_that_refuses_it_does_not(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    answers = [503, 204, 404]
    posts: Recording[dict[str, Any]] = Recording()

    async def receive(request: web.Request) -> web.Response:
        await posts.add(await request.json())
        return web.Response(status=answers.pop(0) if answers else 204)

    app = web.Application()
    app.router.add_post("/alerts", receive)
    async with serving(app) as url:
        config = make_config(tmp_path / "data", fake_llm, **alerts([], webhook=url))
        async with running_gateway(config, RecordingAdapter("telegram")) as gateway:
            disk_full(gateway, True)
            first = await posts.wait_for(2)  # 503, then sent again at the next check: 204
            disk_full(gateway, False)
            cleared = await posts.wait_for(3)  # 404: a refusal, not tried again
            await looks(gateway)
            assert gateway.alerts.sender.unsent == deque()
    assert first[0] == first[1] and first[0]["state"] == "started"
    assert cleared[2]["state"] == "cleared" and len(posts.items) == 3


@contextlib.asynccontextmanager
async def summary_model_down(tmp_path: Path, llm: FakeLLM) -> AsyncIterator[tuple[FakeLLM, Config]]:
    """A summary model (auxiliary.compression) answering 500 to every call, and a config
    with it beside ``llm`` and the operator's alerts."""
    async with FakeLLM(responder=Outage().respond) as summaries:
        aux = {"model": "summary-model", "base_url": summaries.openai_base_url, "api_key": "k"}
        extra = alerts([f"telegram:{OPERATOR}"])
        yield (
            summaries,
            make_config(tmp_path / "data", llm, auxiliary={"compression": aux}, **extra),
        )


async def summary_failed(console: RecordingAdapter) -> None:
    """Three replies, then ``/compress``: a summary the summary model is asked for."""
    for count, text in enumerate(("one " * 50, "two " * 50, "three " * 50), start=1):
        await console.say(text)
        await console.wait_sent(count)
    await console.say("/compress")
    await console.wait_sent(4)


async def test_a_failing_summary_model_is_told_though_replies_work(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The summary model is its own route: the main model's answers do not hide it."""

    async with summary_model_down(tmp_path, fake_llm) as (summaries, config):
        console, operator = RecordingAdapter(), RecordingAdapter("telegram")
        async with running_gateway(config, console, operator):
            await summary_failed(console)
            assert summaries.requests  # the summary model was asked, and failed
            await console.say("still there?")
            await console.wait_sent(5)  # a reply: the main model works
            [started] = await operator.wait_sent(1)
    assert started.startswith(
        f"⚠ nightowl: the model for summaries (summary-model at "
        f"{host_port(summaries.openai_base_url)}) failed every call"
    )
    assert "replies go on" in started


async def test_a_failing_summary_model_told_before_a_restart_is_not_cleared_by_a_reply(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """After a restart, a reply that works says nothing of the summary model."""

    async with summary_model_down(tmp_path, fake_llm) as (_, config):
        console, operator = RecordingAdapter(), RecordingAdapter("telegram")
        async with running_gateway(config, console, operator):
            await summary_failed(console)
            await operator.wait_sent(1)
        console, after = RecordingAdapter(), RecordingAdapter("telegram")
        async with running_gateway(config, console, after) as gateway:
            await console.say("a reply works")
            await console.wait_sent(1)
            await gateway.events.drain()
            await looks(gateway)
            assert after.texts() == []
            assert [a.condition for a in gateway.operations.alerts()] == ["provider:summaries"]


async def test_unsent_alerts_are_bounded_per_recipient_and_a_start_goes_with_its_clearing() -> None:
    operator = RefusingAdapter("telegram")
    sender = AlertSender(AlertsConfig(to=(f"telegram:{OPERATOR}",)), {"telegram": operator})
    pairs = UNSENT_KEPT // 2 + 1
    for n in range(pairs):
        await sender.send(f"c{n}", "started", 0.0, f"start {n}")
        await sender.send(f"c{n}", "cleared", 0.0, f"clear {n}")
    kept = [(m.condition, m.state) for m in sender.unsent]
    assert len(kept) == UNSENT_KEPT and kept[:2] == [("c1", "started"), ("c1", "cleared")]
    assert len(operator.refused.items) == 1  # tried once; the others waited behind it


async def test_an_alert_the_operator_could_not_be_sent_is_sent_after_a_restart(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """Telegram refused it, then the gateway was restarted (a deploy, a reboot): the
    store counts it as told, so only the kept message can still reach the operator."""
    config = make_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    refusing = RefusingAdapter("telegram")
    async with running_gateway(config, refusing) as gateway:
        gateway.alerts.disk_min_free_bytes = 1 << 62  # more than any disk has
        [refused] = await refusing.refused.wait_for(1)
    kept = tmp_path / "data" / UNSENT_FILE
    assert kept.stat().st_mode & 0o777 == 0o600 and "the disk holding" in kept.read_text()
    operator = RecordingAdapter("telegram")
    async with running_gateway(config, operator):  # the disk has room again
        sent = await operator.wait_sent(2)
    assert sent[0] == refused and refused.startswith("⚠ nightowl: the disk holding ")
    assert sent[1].startswith("✅ nightowl: resolved: the disk holding ")
    assert not kept.exists()


async def test_kept_alerts_go_only_to_recipients_still_configured_and_a_damaged_file_goes(
    tmp_path: Path,
) -> None:
    kept = tmp_path / UNSENT_FILE
    refusing = RefusingAdapter("telegram")
    before = AlertSender(AlertsConfig(to=("telegram:42",)), {"telegram": refusing}, kept=kept)
    await before.send("disk", "started", 0.0, "⚠ the disk")
    assert kept.exists()
    operator = RecordingAdapter("telegram")
    moved = AlertSender(AlertsConfig(to=("telegram:7",)), {"telegram": operator}, kept=kept)
    await moved.retry()
    assert list(moved.unsent) == [] and operator.texts() == []  # 42 is no longer told
    assert not kept.exists()

    # A start given up before the restart: its clearing goes with it, and the file with it.
    kept.write_text('{"unsent": [], "given_up": [["telegram:7", "disk"]]}')
    gave_up = AlertSender(AlertsConfig(to=("telegram:7",)), {"telegram": operator}, kept=kept)
    await gave_up.send("disk", "cleared", 0.0, "✅ the disk")
    assert operator.texts() == [] and not kept.exists()

    kept.write_text("{not json")
    damaged = AlertSender(AlertsConfig(to=("telegram:7",)), {"telegram": operator}, kept=kept)
    await damaged.retry()
    assert not kept.exists()  # replaced (by nothing) at once, not warned of at every start


async def test_a_later_budget_joining_a_told_one_moves_its_stored_end(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A person's daily budget was told (ends at midnight); the bot's monthly one joins:
    a restart after midnight must not take the alert as over by itself."""
    config = make_config(tmp_path / "data", fake_llm, **alerts([f"telegram:{OPERATOR}"]))
    operator = RecordingAdapter("telegram")
    async with running_gateway(config, operator) as gateway:
        now = time.time()
        midnight, month_end = now + 3_600, now + 10 * 86_400
        gateway.events.emit(BudgetReached("user_daily", "telegram:42", "0.5", midnight))
        await gateway.events.drain()
        await operator.wait_sent(1)
        gateway.events.emit(BudgetReached("monthly", "bot", "20", month_end))
        await gateway.events.drain()
        await looks(gateway)
        [row] = await gateway.store.alerts.told()
    assert (row.condition, row.state, row.until) == ("budget", "started", month_end)
    assert len(operator.sent) == 1  # told once; only its end moved


@pytest.mark.parametrize("told_by", ["this version", "the version before"])
async def test_a_budget_raised_and_restarted_is_told_cleared_once_a_reply_goes_through(
    told_by: str, tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """What the budget's alert advises: raise it in config.yaml and restart — also when
    the version before told it, in its words ("monthly (bot)")."""
    sections: dict[str, Any] = {
        "model": {"price": {"input": 100, "output": 200}},
        "alerts": {"to": [f"telegram:{OPERATOR}"], "after_seconds": AFTER_SECONDS},
    }
    config = make_config(tmp_path / "data", fake_llm, budgets={"monthly": 0}, **sections)
    console, before = RecordingAdapter(), RecordingAdapter("telegram")
    async with running_gateway(config, console, before):
        await console.say("hello")
        await console.wait_sent(1)  # refused
        [started] = await before.wait_sent(1)
    if told_by == "the version before":
        old_words = "a budget refuses calls: monthly (bot)"
        db.execute(config, "UPDATE alerts_told SET what = ? WHERE condition = 'budget'", old_words)
    raised = make_config(tmp_path / "data", fake_llm, budgets={"monthly": 100}, **sections)
    console, after = RecordingAdapter(), RecordingAdapter("telegram")
    async with running_gateway(raised, console, after) as gateway:
        await looks(gateway)
        assert after.texts() == []  # no reply has gone through yet
        await console.say("hello again")
        await console.wait_sent(1)
        [cleared] = await after.wait_sent(1)
    assert started.startswith("⚠ nightowl: a budget refuses calls: budgets.monthly (the bot)")
    words = "budgets.monthly (the bot)" if told_by == "this version" else "monthly (bot)"
    assert cleared.startswith(f"✅ nightowl: resolved: a budget refuses calls: {words}")


async def test_an_alert_never_says_a_secret_the_server_s_error_quotes(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A proxy URL with its password, unreachable: the error names the URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://owl:proxy-pass-0123456789@127.0.0.1:{port}/v1"
    config = make_config(
        tmp_path / "data",
        fake_llm,
        model={"base_url": url, "max_retries": 0},
        **alerts([f"telegram:{OPERATOR}"]),
    )
    console, operator = RecordingAdapter(), RecordingAdapter("telegram")
    async with running_gateway(config, console, operator) as gateway:
        await console.say("hello?")
        [started] = await operator.wait_sent(1)
        told = await gateway.store.alerts.told()
    assert started.startswith(f"⚠ nightowl: the model (fake-model at 127.0.0.1:{port}) failed")
    assert "proxy-pass-0123456789" not in started
    assert all("proxy-pass-0123456789" not in row.what for row in told)


def test_a_summary_model_no_longer_asked_is_forgotten_and_one_taken_over_from_is_not() -> None:
    uses = ProviderFailures(HOUSEKEEPING, USES[HOUSEKEEPING][0], per_model=True)

    def call(model: str, outcome: str, at: float) -> None:
        uses.observe({"kind": "summary", "model": model, "provider": "p", "outcome": outcome}, at)

    call("aux", "network", 1_000.0)  # the summary model fails...
    call("main", "ok", 1_001.0)  # ...and the main model takes over
    observed = uses.observation()
    assert observed is not None and "(aux via p)" in observed.what
    call("chosen", "network", 2_000.0)  # a /model choice's summary fails once, then is left
    call("aux", "network", 5_000.0)
    call("main", "ok", 5_001.0)
    observed = uses.observation()
    assert observed is not None and "chosen" not in observed.what and "aux" in observed.what
