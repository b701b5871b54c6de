"""Budgets where they are easy to get wrong, through the real gateway against the caching
fake (docs/cost.md#how-budgets-are-enforced): a chat over budget whose history is due a
compression, a batch of several people, voice notes, calls side by side."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agent.urls import host_port
from gateway.app import Gateway
from gateway.config.schema import Config
from gateway.store import CostRecord
from tests import db
from tests.e2e.priced import PRICE, SYSTEM, user_texts
from tests.fakes.caching_llm import CachingLLM
from tests.fakes.llm_server import FakeLLM, Reply
from tests.harness import (
    HeldAnswers,
    RecordingAdapter,
    make_config,
    running_gateway,
    summarizing,
    turns_done,
)

MODEL = {"price": PRICE, "system_prompt": SYSTEM, "max_output_tokens": 256}
GROUP = {"chat_id": "g", "chat_type": "group"}
CHAT = "console:g"


@pytest.fixture
async def llm() -> AsyncIterator[CachingLLM]:
    async with CachingLLM() as server:
        yield server


def priced(tmp_path: Path, llm: CachingLLM, **sections: Any) -> Config:
    return make_config(tmp_path / "data", llm, model=MODEL, **sections)


async def spend(gateway: Gateway, usd: str, *, chat: str = CHAT, person: str | None = None) -> None:
    """A call already made today (another turn's, stored as any call's row is)."""
    entry = CostRecord(time.time(), chat, person, "chat", "fake-model", cost=Decimal(usd))
    await gateway.store.costs.record(entry)


async def chatter(adapter: RecordingAdapter, gateway: Gateway, count: int) -> None:
    for n in range(count):
        text = f"carl: chatter {n} " + "blah " * 60
        await adapter.say(text, user_id="carl", addressed=False, **GROUP)
    await turns_done(gateway)


async def test_a_chat_over_budget_due_a_compression_keeps_the_message_refused_and_unsummarised(
    tmp_path: Path, llm: CachingLLM
) -> None:
    llm.responder = summarizing()
    config = priced(
        tmp_path,
        llm,
        budgets={"per_chat_daily": 1},
        compression={"hygiene_hard_message_limit": 30},
        memory={"enabled": True},
    )
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        await chatter(adapter, gateway, 29)  # the system row + 29 + the next one: hygiene's due
        await spend(gateway, "1.00")
        await adapter.say("ann: SECRET question", user_id="ann", **GROUP)
        await adapter.wait_sent(1)
        await turns_done(gateway)
    assert adapter.texts() == ["This chat has used its daily $1.00; it resets at 00:00 UTC."]
    assert llm.requests == []  # no summary, no flush, no turn
    rows = db.stored_messages(tmp_path / "data", "user")
    assert [row[1:] for row in rows if "SECRET" in row[0]] == [(0, 0)]  # refused: kept, inactive
    assert [row[1:] for row in rows if "chatter" in row[0]] == [(1, 0)] * 29  # none archived


async def test_compress_refused_by_a_budget_writes_no_fallback_and_says_why(
    tmp_path: Path, llm: CachingLLM
) -> None:
    llm.responder = summarizing()
    config = priced(tmp_path, llm, budgets={"per_chat_daily": 50})
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        for n, text in enumerate(["one", "two", "three"], start=1):
            await adapter.say(text)
            await adapter.wait_sent(n)
            await turns_done(gateway)
        asked = len(llm.requests)
        await spend(gateway, "50.00", chat="console:t")
        await adapter.say("/compress")
        answer = (await adapter.wait_sent(4))[-1]
        await adapter.say("/compress")  # no cooldown holds it back
        again = (await adapter.wait_sent(5))[-1]
    assert "a spending budget is used up" in answer and "nothing was removed" in answer
    assert "summary model" not in answer and again == answer
    assert len(llm.requests) == asked  # no summary, no flush
    assert all(row[1:] == (1, 0) for row in db.stored_messages(tmp_path / "data"))


async def test_a_batch_refuses_only_the_person_over_budget_and_keeps_the_chatter(
    tmp_path: Path, llm: CachingLLM
) -> None:
    first = HeldAnswers(matching=lambda request: "dave: first" in str(request.messages[-1]))
    llm.responder = first.respond
    config = priced(tmp_path, llm, budgets={"per_user_daily": 1})
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        await spend(gateway, "1.00", chat="console:elsewhere", person="console:ann")
        await adapter.say("dave: first", user_id="dave", **GROUP)
        await first.wait_held()  # dave's turn runs; these wait and are answered together
        await adapter.say("bob: BOB question", user_id="bob", **GROUP)
        await adapter.say("carl: CARL chatter", user_id="carl", addressed=False, **GROUP)
        await adapter.say("ann: ANN question", user_id="ann", **GROUP)  # the last to ask
        first.release()
        await adapter.wait_sent(3)
        await turns_done(gateway)
        calls = await gateway.store.costs.calls(0)
    refusal = [m for m in adapter.sent if m.text.startswith("You've used your daily")]
    assert [m.text for m in refusal] == [
        "You've used your daily $1.00 for this bot; it resets at 00:00 UTC."
    ]
    texts = user_texts(llm)
    assert any("BOB question" in text for text in texts)
    assert any("CARL chatter" in text for text in texts)
    assert not any("ANN" in text for text in texts)
    # The batch's turn had one person asking (bob): his; dave's was his own.
    assert [call.person for call in calls if call.session_key == CHAT] == [
        "console:dave",
        "console:bob",
    ]
    rows = db.stored_messages(tmp_path / "data", "user")
    assert [row[1:] for row in rows if "ANN" in row[0]] == [(0, 0)]
    assert [row[1:] for row in rows if "CARL" in row[0]] == [(1, 0)]


async def test_a_batch_of_two_people_is_charged_to_the_chat_alone(
    tmp_path: Path, llm: CachingLLM
) -> None:
    first = HeldAnswers(matching=lambda request: "dave: first" in str(request.messages[-1]))
    llm.responder = first.respond
    config = priced(tmp_path, llm, budgets={"per_user_daily": 5})
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("dave: first", user_id="dave", **GROUP)
        await first.wait_held()
        await adapter.say("bob: one", user_id="bob", **GROUP)
        await adapter.say("ann: two", user_id="ann", **GROUP)
        first.release()
        await adapter.wait_sent(2)
        await turns_done(gateway)
        calls = await gateway.store.costs.calls(0)
    assert [call.person for call in calls] == ["console:dave", None]


async def test_calls_side_by_side_hold_their_estimates_and_stay_within_the_budget(
    tmp_path: Path, llm: CachingLLM
) -> None:
    held = HeldAnswers()
    llm.responder = held.respond
    # A first call's estimate here is about $0.27 (the system prompt and the tools at
    # $100 a million, 256 tokens of reply at $200): two fit in $0.60, three do not.
    config = priced(tmp_path, llm, budgets={"per_user_daily": 0.60})
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        for chat in "abcdef":
            await adapter.say(f"ann in {chat}", user_id="ann", chat_id=chat)
        await adapter.wait_sent(4)  # four refused while two calls are in flight
        held.release()
        await adapter.wait_sent(6)
        await turns_done(gateway)
        spent = await gateway.store.costs.spent("console:ann", None, time.time())
    refused = [text for text in adapter.texts() if text.startswith("This message could cost")]
    assert len(refused) == 4 and len(llm.requests) == 2, adapter.texts()
    assert spent.user_today <= Decimal("0.60")


async def test_the_check_before_a_turn_counts_the_reply_the_window_leaves_room_for(
    tmp_path: Path,
) -> None:
    """On a 4K window a request of ~1,000 tokens asks for ~3,000 of reply, not the 4,096
    of max_output_tokens: the turn's check must not refuse what its call would be
    allowed (the call's own check sees the max_tokens it asks)."""
    async with FakeLLM() as server:
        config = make_config(
            tmp_path / "data",
            server,
            model={"context_length": 4_096, "price": {"input": 10, "output": 30}},
            budgets={"per_user_daily": 0.13},
        )
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter) as gateway:
            await spend(gateway, "0.01", chat="console:t", person="console:u1")
            await adapter.say("hello")
            [reply] = await adapter.wait_sent(1)
        [request] = server.requests
    assert reply == "echo: hello", reply

    # What was asked fits what was left ($0.12); the whole max_output_tokens would not.
    def usd(reply_tokens: int) -> Decimal:
        return Decimal(request.prompt_tokens * 10 + reply_tokens * 30) / 1_000_000

    assert usd(request.max_tokens) < Decimal("0.12") < usd(4_096)


async def test_a_free_local_model_reporting_no_usage_costs_nothing(tmp_path: Path) -> None:
    async with FakeLLM() as local:
        local.responder = lambda request: Reply("hi", usage=None)
        config = make_config(tmp_path / "data", local)  # 127.0.0.1: free
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter) as gateway:
            await adapter.say("hello")
            await adapter.wait_sent(1)
            await turns_done(gateway)
            await adapter.say("/usage")
            usage = (await adapter.wait_sent(2))[-1]
            [call] = await gateway.store.costs.calls(0)
    assert call.cost == Decimal(0)
    assert "Cost of this conversation: $0.00" in usage and "unknown" not in usage


async def test_a_call_cut_off_mid_stream_leaves_a_row_and_a_refused_one_none(
    tmp_path: Path, llm: CachingLLM
) -> None:
    llm.script(
        Reply("the start of an answer that", stream_error="server_error"),
        Reply(status=429, error_type="rate_limit_exceeded"),
    )
    config = priced(tmp_path, llm)
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        for n, text in enumerate(["first", "second"], start=1):
            await adapter.say(text)
            await adapter.wait_sent(n)
            await turns_done(gateway)
        await adapter.say("/usage")
        usage = (await adapter.wait_sent(3))[-1]
        calls = await gateway.store.costs.calls(0)
    assert len(llm.requests) == 2
    [cut] = calls  # the vendor may bill the one it began; the rate-limited one did nothing
    assert (cut.kind, cut.person, cut.cost) == ("chat", "console:u1", None)
    assert cut.prompt_tokens > 1_000 and cut.completion_tokens > 0  # estimated
    assert "Cost of this conversation: unknown — 1 model call" in usage


async def test_an_unpriced_model_is_named_at_start_and_usage_says_it_is_not_counted(
    tmp_path: Path, llm: CachingLLM, caplog: pytest.LogCaptureFixture
) -> None:
    summaries = {"model": "mystery-model", "base_url": "https://llm.example.com/v1"}
    config = priced(
        tmp_path,
        llm,
        budgets={"per_chat_daily": 5},
        auxiliary={"compression": {**summaries, "api_key": "k"}},
    )
    adapter = RecordingAdapter()
    with caplog.at_level(logging.WARNING, logger="gateway.cost.meter"):
        async with running_gateway(config, adapter) as gateway:
            entry = CostRecord(time.time(), "console:t", None, "summary", "mystery-model")
            await gateway.store.costs.record(entry)  # a summary of unknown cost
            await adapter.say("/usage")
            usage = (await adapter.wait_sent(1))[-1]
    warnings = [  # (the summary server, nowhere, is named by its own logger)
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and r.name == "gateway.cost.meter"
    ]
    assert warnings == [
        "budgets are set, but openai mystery-model has no price: its calls are not counted"
        " against budgets and no budget stops them; give it a price in config.yaml"
    ]
    assert usage.splitlines()[-1] == "Unpriced calls are not counted against budgets."


async def test_a_paid_model_s_name_at_a_local_server_is_named_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """gpt-4o-mini at 127.0.0.1 counts as free (a local server), which a proxy in front
    of OpenAI is not: with budgets set, the start says so once."""
    async with FakeLLM(models=("gpt-4o-mini",)) as server:
        model = {"name": "gpt-4o-mini", "api_key": "k"}
        config = make_config(tmp_path / "data", server, model=model, budgets={"monthly": 5})
        with caplog.at_level(logging.WARNING, logger="gateway.cost.meter"):
            async with running_gateway(config):
                pass
    warnings = [r.getMessage() for r in caplog.records if r.name == "gateway.cost.meter"]
    assert warnings == [
        f"budgets are set, but gpt-4o-mini at {host_port(server.openai_base_url)} counts as"
        " free (a local server): if it passes calls on to a paid API (a proxy such as"
        " LiteLLM), give the model a price in config.yaml, or no budget stops them"
    ]


async def test_usage_in_a_private_chat_shows_what_the_person_s_budget_counts(
    tmp_path: Path, llm: CachingLLM
) -> None:
    config = priced(tmp_path, llm, budgets={"per_user_daily": 5})
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        await spend(gateway, "1.25", person="console:u1")  # in the group, earlier
        await adapter.say("/usage")  # in the private chat
        usage = (await adapter.wait_sent(1))[-1]
    assert "You, in all chats: $1.25 today" in usage.splitlines()
    assert usage.splitlines()[-1] == "Budgets: you, daily $1.25 of $5.00 used"


async def test_usage_near_a_budget_never_rounds_up_to_it(tmp_path: Path, llm: CachingLLM) -> None:
    """$0.018 of a $0.02 budget is not "$0.02 of $0.02": what is left still buys calls."""
    config = priced(tmp_path, llm, budgets={"per_user_daily": 0.02, "monthly": 0.05})
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        await spend(gateway, "0.018", person="console:u1")
        await adapter.say("/usage")
        first = (await adapter.wait_sent(1))[-1]
        await spend(gateway, "0.002", person="console:u1")
        await adapter.say("/usage")
        second = (await adapter.wait_sent(2))[-1]
    assert first.splitlines()[-1] == (
        "Budgets: you, daily $0.018 of $0.02 used · the bot, monthly $0.02 of $0.05 used"
    )
    assert second.splitlines()[-1] == (
        "Budgets: you, daily $0.02, used up · the bot, monthly $0.02 of $0.05 used"
    )
