"""The budget check before a call and the record after it, on a real store
(gateway/cost/meter.py, docs/cost.md#how-budgets-are-enforced)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from agent.cost.budget import Budgets
from agent.providers import ProviderSettings, make_provider
from agent.providers.base import Usage
from gateway.conversation.turns import describe_provider_error
from gateway.cost.meter import BudgetRefused, BudgetUnchecked, CostMeter
from gateway.cost.payer import paying
from gateway.cost.pricing import Pricing
from gateway.events import EventBus
from gateway.store import CostRecord, SQLiteStore

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC).timestamp()
HOSTED = make_provider(
    ProviderSettings("openai", "gpt-4o-mini", api_key="k", base_url="https://api.example.com/v1")
)
ASK = [{"role": "user", "content": "hello"}]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(tmp_path / "state.db") as opened:
        yield opened


def meter(store: SQLiteStore, events: EventBus, **budgets: str) -> CostMeter:
    limits = Budgets(**{name: Decimal(value) for name, value in budgets.items()})
    return CostMeter(store.costs, Pricing(limits=limits), events, clock=lambda: NOW)


async def allow(meter: CostMeter, kind: str) -> None:
    await meter.allow(kind, HOSTED, ASK, max_tokens=100, tools=None, cache_ttl=None, previous=[])


async def test_housekeeping_runs_for_a_person_over_budget_and_stops_with_the_chat(
    store: SQLiteStore, caplog: pytest.LogCaptureFixture
) -> None:
    events = EventBus()
    reached: list[dict[str, object]] = []
    events.subscribe(["budget:reached"], lambda name, payload: reached.append(payload))
    costs = meter(store, events, per_user_daily="0.10", per_chat_daily="1.00")
    await store.costs.record(
        CostRecord(NOW - 60, "tg:g", "tg:ann", "chat", "m", cost=Decimal("0.10"))
    )
    with paying("tg:g", "tg:ann"), caplog.at_level(logging.WARNING):
        for _ in range(2):  # the operator hears once
            with pytest.raises(BudgetRefused) as refused:
                await allow(costs, "chat")
        await allow(costs, "summary")  # the chat's housekeeping still runs
        await allow(costs, "flush")
    assert refused.value.sentence == (
        "You've used your daily $0.10 for this bot; it resets at 00:00 UTC."
    )
    with paying("tg:g", "tg:bob"):
        await allow(costs, "chat")  # another person goes on
    await store.costs.record(
        CostRecord(NOW - 30, "tg:g", None, "summary", "m", cost=Decimal("0.90"))
    )
    with paying("tg:g", "tg:bob"):
        with pytest.raises(BudgetRefused):
            await allow(costs, "summary")  # the chat used its day up: it stops
        with pytest.raises(BudgetRefused):
            await allow(costs, "chat")
    with paying("tg:other", "tg:bob"):
        await allow(costs, "chat")  # other chats go on
    await events.drain()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "budgets.per_user_daily refused a call of tg:ann ($0.10 spent of $0.10);"
        " it resets at 2026-12-07 00:00 UTC",
        "budgets.per_chat_daily refused a call of tg:g ($1.00 spent of $1.00);"
        " it resets at 2026-12-07 00:00 UTC",
    ]
    assert [(p["budget"], p["subject"]) for p in reached] == [
        ("user_daily", "tg:ann"),
        ("chat_daily", "tg:g"),
    ]


async def test_a_call_is_recorded_for_its_chat_and_person_and_housekeeping_for_no_one(
    store: SQLiteStore,
) -> None:
    costs = meter(store, EventBus())
    usage = Usage(prompt_tokens=2_000, completion_tokens=100, cache_read_tokens=1_024)
    with paying("tg:g", "tg:ann"):
        chat = await costs.record("chat", HOSTED, usage, None)
        summary = await costs.record("summary", HOSTED, usage, None)
    # gpt-4o-mini: 976 x 0.15 + 1,024 x 0.075 + 100 x 0.60, per million
    assert chat == summary == Decimal("0.0002832")
    recorded = await store.costs.calls(0)
    assert [(r.kind, r.session_key, r.person, r.cost) for r in recorded] == [
        ("chat", "tg:g", "tg:ann", Decimal("0.0002832")),
        ("summary", "tg:g", None, Decimal("0.0002832")),
    ]
    unknown = make_provider(ProviderSettings("openai", "mystery", "k", "https://x.example/v1"))
    assert await costs.record("chat", unknown, usage, None) is None  # unknown, not $0
    assert (await store.costs.calls(0))[-1].cost is None


async def test_a_check_cancelled_on_its_way_leaves_no_hold(store: SQLiteStore) -> None:
    """A turn cancelled (a shutdown) while its check is on SQLite's thread: the check
    ends there all the same, and what it held is let go, not left counting for 15
    minutes."""
    costs = meter(store, EventBus(), per_user_daily="1.00")
    for steps in (1, 2, 3, 5, 8) * 4:  # cancelled at each point on its way, twice
        with paying("tg:g", "tg:ann"):
            checking = asyncio.ensure_future(
                costs.allow(
                    "chat", HOSTED, ASK, max_tokens=100, tools=None, cache_ttl=None, previous=[]
                )
            )
        for _ in range(steps):
            await asyncio.sleep(0)  # the loop's turns, not time: the trip leaves at once
        checking.cancel()
        await asyncio.sleep(0)
        checking.cancel()  # a second signal while it waits for the check
        try:
            done = await checking
        except asyncio.CancelledError:
            continue
        await costs.release(done)  # it was done before the cancel: its caller lets go
    spent = await store.costs.spent("tg:ann", "tg:g", NOW)
    assert spent.user_today == 0


async def test_a_hold_goes_with_its_cost_s_row(store: SQLiteStore) -> None:
    """The call's row and the end of its hold are one write: a release that failed
    afterwards could not count the call twice."""
    costs = meter(store, EventBus(), per_user_daily="1.00")
    with paying("tg:g", "tg:ann"):
        hold = await costs.allow(
            "chat", HOSTED, ASK, max_tokens=100, tools=None, cache_ttl=None, previous=[]
        )
        assert hold is not None
        held = await store.costs.spent("tg:ann", "tg:g", NOW)
        assert held.user_today == hold.hold.amount
        await costs.record(
            "chat", HOSTED, Usage(prompt_tokens=10, completion_tokens=5), None, hold=hold
        )
    after = await store.costs.spent("tg:ann", "tg:g", NOW)
    [row] = await store.costs.calls(0)
    assert after.user_today == row.cost  # the call's cost, its estimate gone
    await costs.release(hold)  # nothing left to do
    assert await store.costs.spent("tg:ann", "tg:g", NOW) == after


async def test_a_check_the_store_cannot_make_stops_the_call_with_a_sentence(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Fail closed, and say so: no call no budget saw, a sentence for the person (not
    "something went wrong"), a WARNING for the operator."""
    store = SQLiteStore(tmp_path / "state.db")
    await store.open()
    costs = meter(store, EventBus(), per_user_daily="1.00")
    await store.close()  # the store fails every write from now on
    with paying("tg:g", "tg:ann"), caplog.at_level(logging.WARNING):
        with pytest.raises(BudgetUnchecked) as stopped:
            await allow(costs, "chat")
    assert stopped.value.sentence.startswith("I couldn't check this bot's spending budget")
    assert describe_provider_error(stopped.value) == stopped.value.sentence
    assert any("a budget check could not use the store" in r.getMessage() for r in caplog.records)
