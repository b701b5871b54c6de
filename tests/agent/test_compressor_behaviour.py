"""What a user of a long chat notices: nothing is lost, huge rows never block, logs stay clean
(SPEC C11, C12, C14, C15) — and compress() never runs twice at once."""

from __future__ import annotations

import asyncio
import json
import logging
import re

from agent.compression.markers import is_summary_message
from agent.providers.base import ProviderError
from agent.window import fit_request
from tests.agent.scripted_summarizer import (
    ScriptedSummarizer,
    conversation,
    make_engine,
    tool_round,
)
from tests.waiting import CEILING


def chatter(start: int, exchanges: int, chars: int = 1_500) -> list[dict]:
    rows = []
    for i in range(start, start + exchanges):
        rows.append({"role": "user", "content": f"message {i} " + "q" * chars})
        rows.append({"role": "assistant", "content": f"reply {i} " + "a" * chars})
    return rows


async def test_a_fact_told_once_early_survives_ten_compactions():
    engine, _main = make_engine()
    messages = conversation(1, chars=10)
    messages[1]["content"] = "Hi! fact: my cat is called Bartholomew."
    messages.extend(chatter(0, 120))
    for round_number in range(10):
        result = await engine.compress(messages)
        assert result.committed, result.failure_class
        if round_number >= 1:  # the first exchange is protected verbatim the first time
            assert "fact: my cat is called Bartholomew" in result.summary
        messages = result.messages + chatter(1_000 * (round_number + 1), 80)
    assert engine.compression_count == 10
    assert sum(is_summary_message(m) for m in messages) == 1
    assert "Bartholomew" not in messages[1]["content"] or is_summary_message(messages[1])


async def test_every_removed_row_passes_through_the_summary():
    engine, main = make_engine()
    messages = conversation(1, chars=10)
    for i in range(150):
        messages.append({"role": "user", "content": f"row-u{i} " + "q" * 1_500})
        messages.append({"role": "assistant", "content": f"row-a{i} " + "a" * 1_500})
    result = await engine.compress(messages)
    request = main.calls[0].request_text
    kept = "\n".join(str(m.get("content")) for m in result.messages)
    for marker in re.findall(r"row-[ua]\d+", "\n".join(str(m["content"]) for m in messages)):
        assert marker in request or marker in kept, marker


async def test_a_150k_character_row_in_the_middle_still_compresses_under_the_threshold():
    engine, _ = make_engine(context_length=64_000)
    messages = conversation(10, chars=1_000)
    messages.append({"role": "user", "content": "here is the overnight log: " + "g" * 150_000})
    messages.append({"role": "assistant", "content": "I read it."})
    messages.extend(chatter(0, 10))
    assert engine.should_compress(sum(len(str(m["content"])) for m in messages) // 4)
    result = await engine.compress(messages)
    assert result.committed
    assert result.tokens_after < engine.threshold_tokens


async def test_a_150k_character_newest_message_stays_whole_and_is_sent_as_an_excerpt():
    engine, main = make_engine(context_length=32_768)
    messages = conversation(20, chars=1_000)
    huge = "please summarize this log: " + "w" * 150_000
    messages.append({"role": "user", "content": huge})
    result = await engine.compress(messages, trigger_source="turn_start_threshold")
    assert result.committed
    assert result.tokens_after < engine.threshold_tokens
    assert result.messages[-1] is messages[-1]  # the row itself, never a rewritten copy
    assert "please summarize this log" in main.calls[0].request_text
    request = fit_request(result.messages, engine.window)
    shown = request.messages[-1]["content"]
    assert shown.startswith("please summarize this log: ")
    assert "150,027 characters" in shown and "session_search" in shown
    assert request.prompt_tokens + request.max_tokens <= engine.context_length


async def test_manual_compress_on_a_small_window_shrinks_a_short_chat():
    engine, _ = make_engine(context_length=8_192)
    messages = conversation(30, chars=200)
    result = await engine.compress(messages, force=True, trigger_source="manual")
    assert result.committed
    assert result.tokens_after < result.tokens_before


async def test_telemetry_line_has_the_fields_and_never_any_text(caplog):
    secret = "TOP-SECRET-TEXT"
    engine, _ = make_engine([f"summary mentioning {secret}", ProviderError("network", secret)])
    messages = conversation(150, chars=1_500)
    messages[7]["content"] = f"{secret} in a message"
    with caplog.at_level(logging.INFO, logger="agent.conversation_compression"):
        await engine.compress(messages, focus=secret, trigger_source="pre_api")
        await engine.compress(messages, focus=secret, force=True, trigger_source="manual")
    lines = [r.getMessage() for r in caplog.records if r.name == "agent.conversation_compression"]
    assert len(lines) == 2
    assert all(secret not in line for line in lines)
    prefix = "context compression attempt telemetry: "
    committed, aborted = (json.loads(line.removeprefix(prefix)) for line in lines)
    expected = {
        "trigger_source", "commit_status", "failure_class", "attempt_id", "session_id",
        "method", "messages_before", "messages_after", "tokens_before", "tokens_after",
        "tokens_reclaimed", "token_count_method", "tool_results_pruned",
    }  # fmt: skip
    assert expected <= set(committed)
    assert committed["trigger_source"] == "pre_api"
    assert committed["commit_status"] == "committed"
    assert committed["session_id"] == "sess-1"
    assert committed["method"] == "llm_summary"
    assert committed["tokens_reclaimed"] == committed["tokens_before"] - committed["tokens_after"]
    assert committed["token_count_method"] == "estimate_rough"
    assert aborted["commit_status"] == "aborted"
    assert aborted["failure_class"] == "summary_network"
    assert aborted["tokens_after"] is None  # nothing crossed the commit boundary
    assert committed["attempt_id"] != aborted["attempt_id"]


async def test_blocked_attempts_are_logged_too(caplog):
    engine, _ = make_engine([ProviderError("other", "x", detail="json_decode")])
    await engine.compress(conversation(100, chars=1_500))  # above the threshold, below 85%
    with caplog.at_level(logging.INFO, logger="agent.conversation_compression"):
        await engine.compress(conversation(100, chars=1_500))
    assert '"failure_class": "blocked:cooldown"' in caplog.records[-1].getMessage()


async def test_no_context_pressure_text_is_ever_added():
    engine, _ = make_engine()
    messages = conversation(150, chars=1_500)
    before = [dict(m) for m in messages]
    engine.should_compress(10**9)
    assert messages == before  # asking never touches the conversation
    result = await engine.compress(messages)
    added = [m for m in result.messages if m not in messages and m["role"] != "system"]
    assert len(added) == 1 and is_summary_message(added[0])
    pressure = re.compile(r"context (window )?(is )?(almost )?full|running out of|% of context")
    assert not any(pressure.search(str(m.get("content")).lower()) for m in result.messages)


async def test_a_compression_that_would_not_shrink_anything_is_reported_not_committed():
    engine, _ = make_engine(["word " * 40_000])
    messages = conversation(12, chars=100)
    result = await engine.compress(messages, force=True)
    assert (result.commit_status, result.failure_class) == ("blocked", "blocked:ineffective")
    assert result.messages is messages


async def test_compress_never_runs_twice_at_once():
    main = ScriptedSummarizer(script=["the only summary"])
    main.release = asyncio.Event()
    engine, _ = make_engine()
    engine.main = main
    messages = conversation(150, chars=1_500)
    first = asyncio.create_task(engine.compress(messages))
    await asyncio.wait_for(main.started.wait(), CEILING)
    second = await engine.compress(messages)
    assert (second.commit_status, second.failure_class) == ("skipped", "skipped:in_progress")
    main.release.set()
    assert (await asyncio.wait_for(first, 1)).committed
    assert len(main.calls) == 1


async def test_result_counts_describe_the_commit():
    engine, _ = make_engine()
    messages = conversation(150, chars=1_500)
    messages[10:10] = tool_round("t", "o" * 1_000)
    result = await engine.compress(messages)
    assert result.messages_before == len(messages)
    assert result.messages_after == len(result.messages)
    assert result.tokens_after < result.tokens_before
    assert result.tool_results_pruned == 1
    assert result.attempt_id
    assert engine.compression_count == 1
    assert engine.export_state()["compression_count"] == 1


async def test_a_middle_bigger_than_the_summary_window_is_folded_in_chunks():
    """A night of chatter several times the summary model's window: every part of it is
    read by the summarizer (in window-sized calls that update each other), none is cut
    to a stub, and no call exceeds the window."""
    engine, main = make_engine(context_length=16_000)
    messages = conversation(1, chars=10)
    for i in range(60):
        middle = f"\nfact: night-{i}\n"  # mid-row: cutting rows to fit would lose it
        messages.append({"role": "user", "content": "Ann: " + "z" * 600 + middle + "z" * 600})
    messages.append({"role": "assistant", "content": "noted"})
    messages.append({"role": "user", "content": "what happened overnight?"})
    result = await engine.compress(messages)
    assert result.committed and result.method == "llm_summary"
    assert len(main.calls) > 1
    for call in main.calls:
        assert len(call.request_text) // 4 + call.max_tokens <= 16_000
    for i in range(59):  # the newest rows may stay verbatim in the tail
        assert f"fact: night-{i}\n" in result.summary + "\n" or any(
            f"night-{i}\n" in str(m.get("content")) for m in result.messages[2:]
        ), i
    later_calls = [c.request_text for c in main.calls[1:]]
    assert all("<previous-summary>" in text for text in later_calls)


async def test_a_huge_focus_is_bounded_before_it_reaches_the_summary_model():
    engine, main = make_engine()
    await engine.compress(conversation(40, chars=300), focus="trains " * 7_000, force=True)
    focus = main.calls[0].request_text.split("preserve as much detail as possible about:")[1]
    assert len(focus.split("\n\n")[0]) <= 510  # not 44 KB of focus in the request


async def test_compressing_again_with_nothing_new_makes_no_model_call():
    engine, main = make_engine(["## Goal\nfirst summary", "## Goal\nsecond summary"])
    first = await engine.compress(conversation(40, chars=300), force=True)
    # The second takes the first exchange the first one kept (C14); then nothing is new.
    second = await engine.compress(first.messages, force=True, trigger_source="manual")
    assert first.committed and second.committed
    again = await engine.compress(second.messages, force=True, trigger_source="manual")
    assert not again.committed and again.failure_class == "nothing_new"
    assert len(main.calls) == 2
