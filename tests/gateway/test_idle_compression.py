"""Idle compression (docs/design.md#idle-compression): a chat that grew and went quiet is
compact by morning.

Sessions are seeded straight into the real store (as a night of turns would leave them);
the idle compression's clock is moved past ``idle_after_minutes`` instead of waiting, and
the scan is called directly — except in the one test that lets apscheduler's interval run
it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.scheduling.scheduler import Scheduler
from gateway.store import InboxEntry, NewMessage, SessionOrigin
from tests.fakes.llm_server import FakeLLM, Reply
from tests.harness import (
    RecordingAdapter,
    is_summary_request,
    make_config,
    running_gateway,
    summarizing,
)

WINDOW = 4000
LEARNED_WINDOW = 2000  # what the provider states in an overflow error, later
IDLE_MINUTES = 30
LATER = (IDLE_MINUTES + 1) * 60.0
TELEMETRY = "context compression attempt telemetry: "


def idle_config(tmp_path: Path, llm: FakeLLM, **compression: Any):
    return make_config(
        tmp_path,
        llm,
        model={"context_length": WINDOW, "max_output_tokens": 256},
        compression={"idle_after_minutes": IDLE_MINUTES, "protect_last_n": 4, **compression},
    )


async def seed(gateway: Gateway, chat: str, rows: int, words: int) -> str:
    """A console session ``console:<chat>`` with ``rows`` messages of ``words`` words each."""
    counter = gateway.counter
    system = {"role": "system", "content": "You are nightowl."}
    record = await gateway.store.conversation.start_session(
        SessionOrigin(f"console:{chat}", "console", chat),
        "fake-model",
        NewMessage(system, counter.count(system)),
    )
    messages = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"fact: {chat} number {i}\n" + "lorem ipsum " * (words // 2),
        }
        for i in range(rows)
    ]
    await gateway.store.conversation.commit_turn(
        record.id, [NewMessage(m, counter.count(m)) for m in messages]
    )
    return record.id


def idle_attempts(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(TELEMETRY)]
    attempts = [json.loads(line[len(TELEMETRY) :]) for line in lines]
    return [a for a in attempts if a["trigger_source"] == "idle"]


def summary_requests(llm: FakeLLM) -> int:
    return sum(1 for r in llm.requests if is_summary_request(r))


@pytest.fixture
def summarizing_llm(fake_llm: FakeLLM) -> FakeLLM:
    fake_llm.responder = summarizing()
    return fake_llm


async def test_an_idle_session_above_the_threshold_is_compressed_and_keeps_every_row(
    tmp_path: Path, summarizing_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    compressions: list[dict[str, Any]] = []
    async with running_gateway(idle_config(tmp_path, summarizing_llm)) as gateway:
        gateway.events.subscribe(["session:compress"], lambda _, p: compressions.append(p))
        big = await seed(gateway, "big", rows=24, words=80)  # ~50% of the window
        small = await seed(gateway, "small", rows=6, words=4)
        before = await gateway.store.operator.export_rows("console:big")

        assert await gateway.scheduler.idle.scan() == []  # written to just now: not idle
        gateway.scheduler.idle.clock = lambda: time.time() + LATER
        assert await gateway.scheduler.idle.scan() == ["console:big"]
        await gateway.events.drain(2)

        after = {row.id: row for _, row in await gateway.store.operator.export_rows("console:big")}
        active = await gateway.store.conversation.load_active(big)
        small_rows = await gateway.store.conversation.load_active(small)
        small_session = await gateway.store.conversation.current_session("console:small")

    # Every row is still there, once: the ones left in the active list are the same rows.
    assert set(after) >= {row.id for _, row in before}
    kept = {m.id for m in active}
    assert all(
        after[row.id].active if row.id in kept else after[row.id].compacted for _, row in before
    )
    assert len(active) < len(before)
    assert any("fact: big number 1\n" in str(m.message["content"]) for m in active)
    assert len(small_rows) == 7 and small_session.compression_count == 0
    [attempt] = idle_attempts(caplog)
    assert attempt["commit_status"] == "committed"
    assert attempt["session_id"] == big
    [payload] = compressions
    assert payload["trigger_source"] == "idle" and payload["in_place"] is True
    assert payload["session_key"] == "console:big"


async def test_an_idle_session_is_not_compressed_again_until_it_has_new_rows(
    tmp_path: Path, summarizing_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    adapter = RecordingAdapter()
    # A threshold so low the compacted session is still above it: only the cooldown holds.
    config = idle_config(tmp_path, summarizing_llm, idle_threshold=0.02)
    async with running_gateway(config, adapter) as gateway:
        await seed(gateway, "night", rows=24, words=80)
        gateway.scheduler.idle.clock = lambda: time.time() + LATER
        assert await gateway.scheduler.idle.scan() == ["console:night"]
        summaries = summary_requests(summarizing_llm)

        assert await gateway.scheduler.idle.scan() == []
        assert await gateway.scheduler.idle.scan() == []
        assert summary_requests(summarizing_llm) == summaries
        assert len(idle_attempts(caplog)) == 1

        await adapter.say("good morning", chat_id="night")  # new rows
        await adapter.wait_sent(1)
        await gateway.lanes.wait_idle(5)
        await gateway.scheduler.idle.scan()
    assert len(idle_attempts(caplog)) == 2


async def test_a_session_with_messages_waiting_is_not_compressed(
    tmp_path: Path, summarizing_llm: FakeLLM
) -> None:
    async with running_gateway(idle_config(tmp_path, summarizing_llm)) as gateway:
        session = await seed(gateway, "busy", rows=24, words=80)
        await gateway.store.conversation.enqueue(  # stored, its turn not taken yet
            InboxEntry(
                session_key="console:busy",
                platform="console",
                chat_id="busy",
                message={"role": "user", "content": "are you there?"},
                token_count=5,
                addressed=True,
            )
        )
        gateway.scheduler.idle.clock = lambda: time.time() + LATER
        assert await gateway.scheduler.idle.scan() == []
        assert len(await gateway.store.conversation.load_active(session)) == 25
    assert summary_requests(summarizing_llm) == 0


async def test_idle_compression_is_off_unless_configured(
    tmp_path: Path, summarizing_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, summarizing_llm, model={"context_length": WINDOW})
    async with running_gateway(config) as gateway:
        session = await seed(gateway, "big", rows=24, words=80)
        gateway.scheduler.idle.clock = lambda: time.time() + 24 * 3600
        assert await gateway.scheduler.idle.scan() == []
        assert len(await gateway.store.conversation.load_active(session)) == 25


async def test_the_interval_job_compresses_without_anyone_asking(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.script(Reply("## Goal\nChat.\n\n## Critical Context\n- fact: kept"))
    config = idle_config(tmp_path, fake_llm)
    compressed = asyncio.Event()
    async with running_gateway(config) as gateway:
        gateway.events.subscribe(["session:compress"], lambda _, p: compressed.set())
        session = await seed(gateway, "overnight", rows=24, words=80)
        scheduler = Scheduler(
            gateway.store.scheduling,
            gateway.store.conversation,
            gateway.sessions,
            gateway.lanes,
            gateway.runner,
            window=lambda: WINDOW,
            idle_after_minutes=IDLE_MINUTES,
            idle_scan_seconds=0.05,
            clock=lambda: time.time() + LATER,
        )
        await scheduler.start()
        try:
            await asyncio.wait_for(compressed.wait(), 5)
        finally:
            await scheduler.stop()
        await gateway.lanes.wait_idle(5)
        record = await gateway.store.conversation.current_session("console:overnight")
        assert record.id == session and record.compression_count == 1


async def test_a_window_learned_after_the_start_decides_which_sessions_are_big(
    tmp_path: Path, summarizing_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter()
    async with running_gateway(idle_config(tmp_path, summarizing_llm), adapter) as gateway:
        session = await seed(gateway, "night", rows=8, words=80)
        tokens = sum(m.token_count for m in await gateway.store.conversation.load_active(session))
        assert 0.30 * LEARNED_WINDOW < tokens < 0.30 * WINDOW  # idle_threshold's default
        gateway.scheduler.idle.clock = lambda: time.time() + LATER
        assert await gateway.scheduler.idle.scan() == []  # small for the configured window

        # The server really holds less than the config says, and its overflow error says so.
        summarizing_llm.context_window = LEARNED_WINDOW
        await adapter.say("a long one: " + "lorem ipsum dolor " * 400, chat_id="day")
        await adapter.wait_sent(1)
        await gateway.lanes.wait_idle(5)
        assert gateway.current_window() == LEARNED_WINDOW

        assert await gateway.scheduler.idle.scan() == ["console:night"]
        record = await gateway.store.conversation.current_session("console:night")
    assert record.id == session and record.compression_count == 1
