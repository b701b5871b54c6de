"""/metrics: Prometheus' text format, counters that move with turns, and who may scrape."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gateway.store import CostRecord
from tests.dashboard.support import client_of, dashboard_config
from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, running_gateway, turns_done


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels (parsed by prometheus-client)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_the_counters_move_after_a_turn(tmp_path: Path, fake_llm: FakeLLM) -> None:
    adapter = RecordingAdapter()
    async with (
        running_gateway(dashboard_config(tmp_path, fake_llm), adapter) as gateway,
        client_of(gateway) as client,
    ):
        scrape = await client.get("/metrics")
        assert scrape.status == 200
        assert scrape.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        before = samples(await scrape.text())
        assert ("nightowl_turns_total", (("platform", "console"),)) not in before
        assert before[("nightowl_inbox_pending", ())] == 0
        await adapter.say("hello")
        await adapter.wait_sent(1)
        await turns_done(gateway)
        await gateway.events.drain()
        after = samples(await (await client.get("/metrics")).text())
    assert after[("nightowl_turns_total", (("platform", "console"),))] == 1
    assert after[("nightowl_turn_duration_seconds_count", ())] == 1
    assert after[("nightowl_llm_requests_total", (("kind", "chat"), ("outcome", "ok")))] == 1
    assert after[("nightowl_prompt_tokens_total", (("kind", "chat"),))] > 0
    assert after[("nightowl_completion_tokens_total", (("kind", "chat"),))] > 0
    assert after[("nightowl_sessions_active", ())] == 1
    assert after[("nightowl_undelivered_replies", ())] == 0
    assert after[("nightowl_reminders_pending", ())] == 0


async def test_metrics_answer_this_machine_or_the_bearer_of_their_token(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with (
        running_gateway(dashboard_config(tmp_path / "open", fake_llm)) as gateway,
        client_of(gateway) as client,
    ):
        assert (await client.get("/metrics")).status == 200  # from 127.0.0.1
        forwarded = await client.get("/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
        assert forwarded.status == 403  # through a proxy: not this machine
    config = dashboard_config(
        tmp_path / "token", fake_llm, dashboard={"metrics_token": "scrape-token-123456"}
    )
    async with running_gateway(config) as gateway, client_of(gateway) as client:
        assert (await client.get("/metrics")).status == 403
        wrong = {"Authorization": "Bearer nope"}
        assert (await client.get("/metrics", headers=wrong)).status == 403
        right = {"Authorization": "Bearer scrape-token-123456", "X-Forwarded-For": "203.0.113.9"}
        assert (await client.get("/metrics", headers=right)).status == 200


async def test_a_budget_that_starts_refusing_is_counted(tmp_path: Path, fake_llm: FakeLLM) -> None:
    """``nightowl_budgets_reached_total`` moves when a budget refuses (docs/cost.md): the
    dashboard listens to ``budget:reached`` too."""
    config = dashboard_config(
        tmp_path,
        fake_llm,
        model={"price": {"input": 100, "output": 200}, "max_output_tokens": 256},
        budgets={"per_user_daily": 1},
    )
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway, client_of(gateway) as client:
        spent = CostRecord(
            time.time(), "console:t", "console:u1", "chat", "fake-model", cost=Decimal(1)
        )
        await gateway.store.costs.record(spent)
        await adapter.say("hello")
        [refusal] = await adapter.wait_sent(1)
        await turns_done(gateway)
        await gateway.events.drain()
        after = samples(await (await client.get("/metrics")).text())
    assert "daily $1.00" in refusal and fake_llm.requests == []
    assert after[("nightowl_budgets_reached_total", (("budget", "user_daily"),))] == 1
