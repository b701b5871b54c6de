"""A 4K-window model whose summary calls fail: the chat goes on inside the window, the
fallback summary stays bounded and keeps facts, and the user is told once.

Each test drives the real gateway with the OpenAI SDK against a fake that enforces the
window, 25-30 turns of about 700 characters, as a person on a small local model would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.compression.settings import fallback_max_chars
from tests import db
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.harness import (
    RecordingAdapter,
    is_summary_request,
    is_turn_request,
    make_config,
    running_gateway,
)

WINDOW = 4_096
FACT = "My locker code is 4471 and the spare key is with Ilse."


def config(tmp_path: Path, llm: FakeLLM):
    return make_config(tmp_path, llm, model={"context_length": WINDOW, "max_output_tokens": 512})


def turn_text(i: int) -> str:
    opening = FACT if i == 0 else f"Turn {i}: here is more about the garden plan."
    return (
        opening + " " + ("the beds by the fence get more sun than the ones by the shed " * 12)[:650]
    )


async def chat(adapter: RecordingAdapter, turns: int) -> None:
    for i in range(turns):
        count = len(adapter.sent)
        await adapter.say(turn_text(i))
        await adapter.wait_sent(count + 1)
        while not adapter.sent[-1].text.startswith(("echo:", "ok")):
            await adapter.wait_sent(len(adapter.sent) + 1)  # a notice came first


def active_summary(tmp_path: Path) -> str:
    """The one summary in the context (fails when there are none or several)."""
    return db.value(
        tmp_path,
        "SELECT content FROM messages WHERE active = 1 AND content LIKE '[CONTEXT COMPACTION]%'",
    )


def answer_or(summary: Reply):
    def respond(request: Recorded) -> Reply:
        if is_summary_request(request):
            return summary
        return Reply(f"echo: {request.last_user_text[:40]}")

    return respond


async def test_failing_summaries_fall_back_to_a_bounded_summary_that_keeps_facts(
    tmp_path: Path,
) -> None:
    compressions: list[dict[str, Any]] = []
    async with FakeLLM(context_window=WINDOW) as llm:
        llm.responder = answer_or(Reply(status=500))
        adapter = RecordingAdapter()
        async with running_gateway(config(tmp_path, llm), adapter) as gateway:
            gateway.events.subscribe(["session:compress"], lambda _, p: compressions.append(p))
            await chat(adapter, 35)
            await gateway.events.drain()
        requests = list(llm.requests)

    assert all(r.prompt_tokens + r.max_tokens <= WINDOW for r in requests)
    fallbacks = [c for c in compressions if c["method"] == "deterministic_fallback"]
    assert len(fallbacks) >= 3
    for c in fallbacks:  # every compression frees real room
        assert c["tokens_after"] <= 0.75 * c["tokens_before"], c
    notices = [m.text for m in adapter.sent if "without the summary model" in m.text]
    assert len(notices) == 1  # one notice per failure streak
    summary = active_summary(tmp_path)
    assert len(summary) <= fallback_max_chars(WINDOW) + 400  # + the fixed intro and end
    assert "4471" in summary  # told in turn 1, kept through every fallback
    assert "Earlier summary" not in summary and "- - " not in summary  # never nested
    for i, request in enumerate(r for r in requests if is_turn_request(r)):
        assert request.last_user_text.startswith(turn_text(i)[:600])  # never "first 0"


async def test_a_length_cut_summary_and_its_cooldown_never_let_a_prompt_pass_the_window(
    tmp_path: Path,
) -> None:
    compressions: list[dict[str, Any]] = []
    async with FakeLLM(context_window=WINDOW) as llm:
        llm.responder = answer_or(Reply("## Goal\nhalf a summ", finish_reason="length"))
        adapter = RecordingAdapter()
        async with running_gateway(config(tmp_path, llm), adapter) as gateway:
            gateway.events.subscribe(["session:compress"], lambda _, p: compressions.append(p))
            await chat(adapter, 30)
            count = len(adapter.sent)
            await adapter.say("/status")
            status = (await adapter.wait_sent(count + 1))[-1]
            await gateway.events.drain()
        requests = list(llm.requests)

    assert all(r.prompt_tokens + r.max_tokens <= WINDOW for r in requests)
    assert not [m.text for m in adapter.sent if "too long" in m.text]
    summaries = [r for r in requests if is_summary_request(r)]
    # Cut by its length, the summary is asked once more with more room before it fails.
    assert summaries[1].max_tokens > summaries[0].max_tokens
    assert summaries[0].max_tokens >= 800  # a 4K window gets a budget that can hold one
    # The cooldown paces the summary model, but the safety line still compresses.
    assert any(c["method"] == "deterministic_fallback" for c in compressions)
    share = int(status.split("Context: ")[1].split("tokens (")[1].split("%")[0])
    assert share < 100
