"""What stays and what is summarized: head, tail, tool pairs, pruning (SPEC C4, C5, C6, C15)."""

from __future__ import annotations

from typing import Any

import pytest

from agent.compression.boundaries import prune_old_tool_results
from agent.compression.markers import (
    PRUNED_TOOL_OUTPUT,
    STUB_TOOL_RESULT,
    SYSTEM_COMPACTION_NOTE,
    is_summary_message,
)
from agent.compression.settings import summary_token_budget
from agent.window import fit_request
from tests.agent.scripted_summarizer import conversation, make_engine, tool_round


def sized(role: str, tokens: int, label: str = "") -> dict[str, Any]:
    """A message whose rough estimate is exactly ``tokens``."""
    filler = tokens * 4 - len(role) - len(label)
    return {"role": role, "content": label + "x" * filler}


def split(messages: list[dict[str, Any]]):
    index = next(i for i, m in enumerate(messages) if is_summary_message(m))
    return messages[:index], messages[index], messages[index + 1 :]


def assert_tool_pairs_intact(messages: list[dict[str, Any]]) -> None:
    for i, message in enumerate(messages):
        if message["role"] == "tool":
            j = i
            while messages[j]["role"] == "tool":
                j -= 1
            caller = messages[j]
            assert caller["role"] == "assistant", f"orphan tool result at {i}"
            ids = {c["id"] for c in caller.get("tool_calls") or []}
            assert message["tool_call_id"] in ids
        if message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            results = [m["tool_call_id"] for m in messages[i + 1 : i + 1 + len(ids)]]
            assert sorted(results) == sorted(ids), f"call at {i} lost its results"
        assert message.get("content") != STUB_TOOL_RESULT


async def test_too_few_messages_are_left_unchanged():
    engine, main = make_engine()
    messages = conversation(2)[:-1]  # system, user, assistant, user
    result = await engine.compress(messages, force=True)
    assert not result.committed
    assert result.commit_status == "skipped"
    assert result.messages is messages
    assert main.calls == []


async def test_first_three_messages_are_kept():
    engine, _ = make_engine()
    messages = conversation(150, chars=1_500)
    result = await engine.compress(messages)
    assert result.committed
    head, _, _ = split(result.messages)
    assert head[0]["content"] == messages[0]["content"] + "\n\n" + SYSTEM_COMPACTION_NOTE
    assert head[1:] == messages[1:3]


async def test_last_user_message_survives_verbatim_behind_a_long_tool_loop():
    engine, _ = make_engine()
    messages = conversation(60, chars=2_000)
    ask = {"role": "user", "content": "please refactor the parser, keep the API"}
    messages.append(ask)
    for n in range(12):
        messages.extend(tool_round(f"call{n}", "y" * 24_000))
    result = await engine.compress(messages, trigger_source="post_tool")
    assert result.committed
    _, _, tail = split(result.messages)
    assert ask in tail
    assert_tool_pairs_intact(result.messages)


@pytest.mark.parametrize("tool_tokens", [300, 2_500, 4_000, 7_000, 9_900])
@pytest.mark.parametrize("chat_tokens", [150, 1_200, 3_000])
async def test_tool_calls_are_never_separated_from_their_results(tool_tokens, chat_tokens):
    engine, _ = make_engine()
    messages = [sized("system", 50), sized("user", 50), sized("assistant", 50)]
    n = 0
    while sum(len(m["content"]) for m in messages) // 4 < 100_000:
        messages.append(sized("user", chat_tokens, f"u{n} "))
        call = {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": f"a{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": f"b{n}", "type": "function", "function": {"name": "g", "arguments": "{}"}},
            ],
        }
        messages.append(call)
        for cid in (f"a{n}", f"b{n}"):
            result = sized("tool", tool_tokens)
            result.update(tool_call_id=cid, name="f")
            messages.append(result)
        messages.append(sized("assistant", chat_tokens, f"done {n} "))
        n += 1
    result = await engine.compress(messages)
    assert result.committed
    _, _, tail = split(result.messages)
    assert tail[0]["role"] != "tool"
    assert_tool_pairs_intact(result.messages)


async def test_head_keeps_the_results_of_a_tool_call_in_the_first_exchange():
    engine, _ = make_engine()
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "list my files"},
        *tool_round("first", "a.txt b.txt"),
        {"role": "assistant", "content": "You have a.txt and b.txt."},
        *conversation(120, chars=1_500)[1:],
    ]
    result = await engine.compress(messages)
    assert result.committed
    assert result.messages[2]["tool_calls"][0]["id"] == "first"
    assert result.messages[3] == messages[3]
    assert_tool_pairs_intact(result.messages)


@pytest.mark.parametrize(
    ("window", "budget"),
    [(16_384, 3_276), (32_768, 6_553), (128_000, 10_000), (600_000, 15_000), (2_000_000, 25_000)],
)
def test_lean_tail_budget(window, budget):
    engine, _ = make_engine(context_length=window)
    assert engine.tail_token_budget == budget


def test_legacy_tail_budget_is_threshold_times_target_ratio():
    engine, _ = make_engine(tail_mode="legacy", target_ratio=0.25)
    assert engine.tail_token_budget == int(engine.threshold_tokens * 0.25)


async def tail_of(row_tokens: int, rows: int = 400, **settings) -> list[dict[str, Any]]:
    engine, _ = make_engine(**settings)
    messages = [sized("system", 10), sized("user", 10), sized("assistant", 10)]
    for i in range(rows):
        messages.append(sized("user" if i % 2 == 0 else "assistant", row_tokens))
    result = await engine.compress(messages, force=True)
    assert result.committed
    return split(result.messages)[2]


async def test_tail_fills_the_budget_with_at_least_protect_last_n_rows():
    small = await tail_of(200)  # 50 rows make the 10K budget
    assert 50 <= len(small) <= 51
    exact = await tail_of(500)  # 20 rows are exactly the budget
    assert 20 <= len(exact) <= 21


async def test_past_the_ceiling_protect_last_n_yields_down_to_eight_rows():
    tail = await tail_of(3_000)  # 20 rows would be 60K against a 15K ceiling
    assert 8 <= len(tail) <= 9


async def test_protect_last_n_below_eight_is_honoured_as_is():
    tail = await tail_of(3_000, protect_last_n=4)
    assert 4 <= len(tail) <= 5


async def test_a_short_chat_still_compresses_on_request():
    engine, main = make_engine()
    messages = conversation(8, chars=100)
    result = await engine.compress(messages, force=True)
    assert result.committed
    assert len(main.calls) == 1
    assert len(split(result.messages)[2]) >= 8


async def test_a_huge_tool_output_in_the_middle_does_not_block_compaction():
    engine, _ = make_engine()
    messages = conversation(30, chars=2_000)
    messages.extend(tool_round("big", "L" * 150_000))
    messages.append({"role": "assistant", "content": "That log shows three failures."})
    messages.extend(conversation(25, chars=2_000)[1:])
    result = await engine.compress(messages)
    assert result.committed
    assert result.tokens_after < engine.threshold_tokens
    assert len(split(result.messages)[2]) >= 3


async def test_a_huge_unanswered_tool_output_stays_and_is_shown_as_an_excerpt():
    engine, main = make_engine()
    messages = conversation(40, chars=4_000)
    messages.append({"role": "user", "content": "read the server log"})
    messages.extend(tool_round("log", "E" * 150_000))
    result = await engine.compress(messages, trigger_source="post_tool")
    assert result.committed
    assert result.tokens_after < engine.threshold_tokens
    _, _, tail = split(result.messages)
    assert len(tail) >= 3
    assert tail[-1]["tool_call_id"] == "log"
    assert tail[-1]["content"] == "E" * 150_000  # kept as it is: rows are never rewritten
    assert "E" * 1_000 in main.calls[0].request_text  # the summary also sees it
    assert_tool_pairs_intact(result.messages)
    # What the model is sent shows it as a bounded excerpt, and the request fits.
    request = fit_request(result.messages, engine.window)
    shown = request.messages[-1]["content"]
    assert "150,000 characters" in shown and len(shown) <= engine.window.row_cap * 4
    assert request.prompt_tokens + request.max_tokens <= engine.context_length


@pytest.mark.parametrize(
    ("middle", "window", "budget"),
    [
        (1_000, 128_000, 2_000),
        (20_000, 128_000, 4_000),
        (90_000, 128_000, 6_400),
        (90_000, 1_000_000, 12_000),
        (30_000, 1_000_000, 6_000),
    ],
)
def test_summary_budget(middle, window, budget):
    assert summary_token_budget(middle, window) == budget


async def test_summary_call_asks_for_the_capped_budget():
    engine, main = make_engine()
    await engine.compress(conversation(150, chars=1_500))
    assert main.calls[0].max_tokens == 6_400  # min(5% of 128K, 12000)


async def test_small_middle_gets_the_minimum_summary_budget():
    engine, main = make_engine()
    await engine.compress(conversation(12, chars=100), force=True)
    assert main.calls[0].max_tokens == 2_000


def test_phase_one_clears_old_long_tool_output_and_keeps_an_unanswered_round():
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        *tool_round("old", "o" * 500),
        *tool_round("short", "ok"),
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "again"},
        *tool_round("pending", "p" * 500),
    ]
    pruned, count = prune_old_tool_results(messages, protect_from=len(messages))
    assert count == 1
    assert pruned[3]["content"] == PRUNED_TOOL_OUTPUT
    assert pruned[3]["tool_call_id"] == "old"
    assert pruned[5]["content"] == "ok"
    assert pruned[-1]["content"] == "p" * 500  # the model has not answered it yet
    assert messages[3]["content"] == "o" * 500  # the input is not mutated


def test_phase_one_leaves_the_protected_tail_alone():
    messages = [{"role": "user", "content": "go"}, *tool_round("t", "o" * 500)]
    messages.append({"role": "assistant", "content": "done"})
    pruned, count = prune_old_tool_results(messages, protect_from=1)
    assert count == 0
    assert pruned == messages


async def test_pruned_output_reaches_the_summarizer_as_the_placeholder():
    engine, main = make_engine()
    messages = conversation(20, chars=1_000)
    messages.extend(tool_round("t1", "SECRET-OUTPUT " * 100))
    messages.append({"role": "assistant", "content": "read it"})
    messages.extend(conversation(120, chars=1_500)[1:])
    result = await engine.compress(messages)
    assert result.committed
    assert result.tool_results_pruned == 1
    assert PRUNED_TOOL_OUTPUT in main.calls[0].request_text
    assert "SECRET-OUTPUT" not in main.calls[0].request_text
