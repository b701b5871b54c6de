"""What model calls cost, through the real gateway against the caching fake
(docs/cost.md): kept per call, shown by /usage, /status and /metrics to the cent,
capped by budgets before the call, kept across a restart and shared by replicas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agent.cost.budget import format_usd
from gateway.config.schema import Config
from tests.dashboard.support import client_of, dashboard_config
from tests.dashboard.test_metrics import samples
from tests.fakes.caching_llm import CachingLLM
from tests.harness import RecordingAdapter, make_config, running_gateway, turns_done

#: USD per million tokens: dear, so a few calls pass a cent.
INPUT, CACHED, OUTPUT = Decimal(100), Decimal(50), Decimal(200)
PRICE = {"input": 100, "cached_input": 50, "output": 200}
#: A system prompt past 1,024 tokens, so the fake's prefix cache serves later turns.
SYSTEM = "You are a patient assistant. " * 200


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


def user_texts(llm: CachingLLM) -> list[str]:
    return [
        str(m.get("content"))
        for request in llm.requests
        for m in request.messages
        if m.get("role") == "user"
    ]


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
    assert f"Cost of this conversation: {format_usd(cost)}" in usage
    assert f"This chat: {format_usd(cost)} today" in usage
    assert f"Spent today: {format_usd(cost)} in this chat" in status
    assert [(line.group, line.calls, line.cost) for line in stored] == [("chat", 3, cost)]
    metric = scrape[("nightowl_cost_usd_total", (("kind", "chat"), ("model", "fake-model")))]
    assert round(Decimal(repr(metric)), 2) == round(cost, 2)
