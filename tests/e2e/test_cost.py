"""What model calls cost, through the real gateway against the caching fake
(docs/cost.md): kept per call, shown by /usage, /status and /metrics to the cent,
capped by budgets before the call, kept across a restart and shared by replicas."""

from __future__ import annotations

import io
import signal
import time
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agent.cost.budget import format_usd
from gateway.config.schema import Config, parse_config
from gateway.ops.cli import _parser
from gateway.ops.usage_cli import run_usage_command
from tests.child_process import Spawn, clean_env, nightowl, write_config
from tests.dashboard.support import client_of, dashboard_config, log_in
from tests.dashboard.test_metrics import samples
from tests.e2e.priced import PRICE, SYSTEM, user_texts
from tests.fakes.caching_llm import CachingLLM
from tests.harness import (
    HeldAnswers,
    RecordingAdapter,
    make_config,
    running_gateway,
    turns_done,
)

CHECKOUT = Path(__file__).resolve().parents[2]
INPUT, CACHED, OUTPUT = (Decimal(PRICE[k]) for k in ("input", "cached_input", "output"))


@pytest.fixture
async def llm() -> AsyncIterator[CachingLLM]:
    async with CachingLLM() as server:
        yield server


MODEL = {
    "price": PRICE,
    "system_prompt": SYSTEM,
    "max_output_tokens": 256,
    "context_length": 200_000,
}


def priced(tmp_path: Path, llm: CachingLLM, **sections: Any) -> Config:
    return make_config(tmp_path / "data", llm, model=MODEL, **sections)


def implied(llm: CachingLLM) -> Decimal:
    """What the fake's usage reports cost, exactly, at :data:`PRICE`."""
    return sum((r.cost(INPUT, CACHED, OUTPUT) for r in llm.reports), Decimal(0))


async def test_usage_status_and_metrics_match_the_fake_s_cost_to_the_cent(
    tmp_path: Path, llm: CachingLLM
) -> None:
    adapter = RecordingAdapter()
    config = dashboard_config(tmp_path / "data", llm, model=MODEL)
    async with running_gateway(config, adapter) as gateway, client_of(gateway) as client:
        for n, text in enumerate(["hello", "tell me more", "and more"], start=1):
            await adapter.say(text)
            await adapter.wait_sent(n)
            await turns_done(gateway)
        cost = implied(llm)
        assert len(llm.reports) == 3 and llm.reports[-1].cached_tokens >= 1024  # cache served
        assert cost > Decimal("0.01")
        await adapter.say("/usage")
        usage = (await adapter.wait_sent(4))[-1]
        await adapter.say("/status")
        status = (await adapter.wait_sent(5))[-1]
        await gateway.events.drain()
        scrape = samples(await (await client.get("/metrics")).text())
        stored = await gateway.store.costs.totals("kind", 0)
    assert f"Cost of this conversation: {format_usd(cost)} over 3 model calls" in usage
    assert "This conversation's replies: 3 model calls" in usage
    assert f"This chat: {format_usd(cost)} today" in usage
    assert f"Spent today: {format_usd(cost)} in this chat" in status
    assert [(line.group, line.calls, line.cost) for line in stored] == [("chat", 3, cost)]
    metric = scrape[("nightowl_cost_usd_total", (("kind", "chat"), ("model", "fake-model")))]
    assert round(Decimal(repr(metric)), 2) == round(cost, 2)


#: Past one turn (about $0.22 here) and the estimate of a second ($0.16), within two.
PER_USER = {"per_user_daily": 0.35}


async def test_a_per_user_budget_stops_one_person_in_a_group_and_not_another_and_outlives_a_restart(
    tmp_path: Path, llm: CachingLLM
) -> None:
    adapter = RecordingAdapter()
    config = priced(tmp_path, llm, budgets=PER_USER)
    group = {"chat_id": "g", "chat_type": "group"}
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("ann: first question", user_id="ann", **group)
        await adapter.wait_sent(1)
        await turns_done(gateway)
        await adapter.say("ann: SECRET second question", user_id="ann", **group)
        refusal = (await adapter.wait_sent(2))[-1]
        await turns_done(gateway)
        await adapter.say("bob: my question", user_id="bob", **group)
        await adapter.wait_sent(3)
        await turns_done(gateway)
        await adapter.say("/usage", user_id="bob", **group)
        usage_before = (await adapter.wait_sent(4))[-1]
    assert refusal.startswith("This message could cost up to ")
    assert "left of your daily $0.35; it resets at 00:00 UTC." in refusal
    assert len(llm.requests) == 2  # ann's first, bob's; nothing for the refused one
    assert any("bob: my question" in text for text in user_texts(llm))
    assert not any("SECRET" in text for text in user_texts(llm))  # not even as history
    assert f"This chat: {format_usd(implied(llm))} today" in usage_before
    assert f"Your share: {format_usd(llm.reports[-1].cost(INPUT, CACHED, OUTPUT))} today" in (
        usage_before
    )

    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:  # the spend is in the store
        await adapter.say("ann: third question", user_id="ann", **group)
        again = (await adapter.wait_sent(1))[-1]
        await turns_done(gateway)
        await adapter.say("/usage", user_id="bob", **group)
        usage_after = (await adapter.wait_sent(2))[-1]
        kept = await gateway.store.operator.export_rows("console:g")
    assert again.startswith("This message could cost up to ") and len(llm.requests) == 2
    assert usage_after.splitlines()[1:] == usage_before.splitlines()[1:]
    texts = [str(row.message.get("content")) for _, row in kept]
    assert any("SECRET" in text for text in texts)  # refused, yet kept: nothing lost

    rows = (await usage_cli(config, "--by", "person", "--csv")).splitlines()
    ann, bob = (report.cost(INPUT, CACHED, OUTPUT) for report in llm.reports)
    assert rows[0].startswith("person,calls,")
    assert {row.split(",")[0]: Decimal(row.split(",")[6]) for row in rows[1:]} == {
        "console:ann": ann,
        "console:bob": bob,
    }
    table_text = await usage_cli(config, "--by", "chat")
    assert f"total{' ' * 23}      2" in table_text


async def usage_cli(config: Config, *argv: str) -> str:
    """``nightowl usage ...`` as the command line parses and runs it."""
    out, err = io.StringIO(), io.StringIO()
    args = _parser().parse_args(["usage", *argv])
    assert await run_usage_command(config, args, out=out, err=err) == 0, err.getvalue()
    return out.getvalue()


async def test_a_huge_paste_is_refused_before_any_call(tmp_path: Path, llm: CachingLLM) -> None:
    adapter = RecordingAdapter()
    config = priced(tmp_path, llm, budgets=PER_USER)
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("PASTE " + "lorem ipsum dolor " * 12_000)
        refusal = (await adapter.wait_sent(1))[-1]
        await turns_done(gateway)
        assert llm.requests == []  # the model never saw it
        await adapter.say("just a short one")
        await adapter.wait_sent(2)
        await turns_done(gateway)
    assert refusal.startswith("This message could cost up to $5.")
    assert "and $0.35 is left of your daily $0.35" in refusal
    assert len(llm.requests) == 1
    assert not any("PASTE" in text for text in user_texts(llm))


async def test_two_replicas_on_postgresql_share_one_budget(
    tmp_path: Path, llm: CachingLLM, postgres_dsn: str
) -> None:
    store = {"backend": "postgres", "dsn": postgres_dsn}
    first, second = RecordingAdapter(), RecordingAdapter()
    # Either replica may run a chat's turn and answer through its own adapter: one outbox.
    second._outbox = first._outbox
    config_one = priced(tmp_path / "one", llm, budgets=PER_USER, store=store)
    config_two = priced(tmp_path / "two", llm, budgets=PER_USER, store=store)
    async with (
        running_gateway(config_one, first) as one,
        running_gateway(config_two, second) as two,
    ):
        await first.say("ann in one chat", user_id="ann", chat_id="a")
        await first.wait_sent(1)
        await turns_done(one)
        await second.say("ann in another chat", user_id="ann", chat_id="b")
        refusal = (await second.wait_sent(2))[-1]
        await turns_done(two)
        await second.say("bob there", user_id="bob", chat_id="b")
        await second.wait_sent(3)
        await turns_done(two)
    assert refusal.startswith("This message could cost up to ")
    assert "your daily $0.35" in refusal
    assert [text for text in user_texts(llm) if "ann" in text] == ["ann in one chat"]
    assert "bob there" in user_texts(llm)
    by_chat = await usage_cli(config_two, "--by", "chat", "--csv")  # read on PostgreSQL
    assert [row.split(",")[:2] for row in by_chat.splitlines()[1:]] == [
        ["console:a", "1"],
        ["console:b", "1"],
    ]


async def test_replicas_count_each_other_s_calls_in_flight(
    tmp_path: Path, llm: CachingLLM, postgres_dsn: str
) -> None:
    """docs/cost.md#calls-side-by-side: ann writes in six chats at once, three to each
    replica; the estimates of the two calls in flight fill her $0.60, wherever they
    run, so four are refused and two calls are made (each replica alone would allow two)."""
    held = HeldAnswers()
    llm.responder = held.respond
    store = {"backend": "postgres", "dsn": postgres_dsn}
    budgets = {"per_user_daily": 0.60}  # a first call's estimate is about $0.27
    first, second = RecordingAdapter(), RecordingAdapter()
    second._outbox = first._outbox  # either replica may answer a chat: one outbox
    async with (
        running_gateway(priced(tmp_path / "one", llm, budgets=budgets, store=store), first) as one,
        running_gateway(priced(tmp_path / "two", llm, budgets=budgets, store=store), second) as two,
    ):
        for adapter, chats in ((first, "abc"), (second, "def")):
            for chat in chats:
                await adapter.say(f"ann in {chat}", user_id="ann", chat_id=chat)
        await first.wait_sent(4)  # four refused while two calls are in flight
        held.release()
        await first.wait_sent(6)
        await turns_done(one)
        await turns_done(two)
        spent = await one.store.costs.spent("console:ann", None, time.time())
        held_now = await one.store.costs.spent("nobody", None, time.time())
    refused = [text for text in first.texts() if text.startswith("This message could cost")]
    assert len(refused) == 4 and len(llm.requests) == 2, first.texts()
    assert spent.user_today <= Decimal("0.60")
    assert held_now.month == spent.user_today  # no hold left behind: only the two calls


async def test_the_overview_shows_today_s_spend_top_spenders_and_budgets_refusing(
    tmp_path: Path, llm: CachingLLM
) -> None:
    adapter = RecordingAdapter()
    config = dashboard_config(tmp_path / "data", llm, model=MODEL, budgets=PER_USER)
    async with running_gateway(config, adapter) as gateway, client_of(gateway) as client:
        for n, text in enumerate(["one", "two"], start=1):
            await adapter.say(text, user_id="ann")
            await adapter.wait_sent(n)
            await turns_done(gateway)
        await gateway.events.drain()
        await log_in(client)
        overview = await (await client.get("/", headers={"Accept": "application/json"})).json()
        page = await (await client.get("/")).text()
    spend = overview["data"]["spend"]
    cost = format_usd(implied(llm))
    assert spend["today"] == cost and spend["month"] == cost
    assert spend["people"] == [{"who": "console:ann", "spent": cost}]
    assert spend["budgets"] == [{"name": "per person, daily", "limit": "$0.35"}]
    assert [(r["budget"], r["subject"]) for r in spend["refusing"]] == [
        ("user_daily", "console:ann")
    ]
    assert "Spend" in page and "console:ann" in page and "budgets refusing calls" in page


async def test_the_cost_of_a_call_outlives_kill_9(
    tmp_path: Path, llm: CachingLLM, spawn: Spawn
) -> None:
    config = write_config(tmp_path, llm, **MODEL)
    env = clean_env(PYTHONPATH=str(CHECKOUT))  # this checkout's code, whatever is installed
    chat = await spawn("chat", "-c", str(config), cwd=tmp_path, env=env)
    await chat.say("hello")
    await chat.out.expect("owl › ")
    await chat.say("/usage")
    await chat.out.expect("This chat: ")
    chat.signal(signal.SIGKILL)  # no code of the gateway runs after this
    await chat.wait()
    code, out, err = await nightowl(
        "usage", "--by", "kind", "--csv", "-c", str(config), cwd=tmp_path, env=env
    )
    assert code == 0, err
    rows = out.splitlines()
    assert [row.split(",")[:2] for row in rows[1:]] == [["chat", "1"]]
    assert Decimal(rows[1].split(",")[6]) == implied(llm) > 0


async def test_usage_refuses_an_until_not_after_its_since(tmp_path: Path) -> None:
    """Rather than a table of zeros for a range that holds no day."""
    config = parse_config({"data_dir": str(tmp_path)}, {})
    out, err = io.StringIO(), io.StringIO()
    args = _parser().parse_args(["usage", "--since", "2026-12-10", "--until", "2026-12-01"])
    assert await run_usage_command(config, args, out=out, err=err) == 1
    assert "--until must be a day after the first one" in err.getvalue()
    assert out.getvalue() == ""
