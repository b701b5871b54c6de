"""Phase 4 and the iterative summary: roles, the note, the update, orphan repair (SPEC C6, C7)."""

from __future__ import annotations

import copy
import itertools

import pytest

from agent.compression.assembly import assemble, choose_summary_role, repair_tool_pairs
from agent.compression.markers import (
    MERGED_MESSAGE_DELIMITER,
    STUB_TOOL_RESULT,
    SUMMARY_PREFIX,
    SYSTEM_COMPACTION_NOTE,
    is_summary_message,
)
from agent.compression.summary import TEMPLATE
from tests.agent.scripted_summarizer import conversation, make_engine, tool_round


@pytest.mark.parametrize(
    ("head", "tail", "role"),
    [
        ("assistant", "assistant", "user"),  # head ends assistant -> user
        ("user", "user", "assistant"),  # head ends user -> assistant
        ("assistant", "user", "merge"),  # flip collides with the head too
        ("user", "assistant", "merge"),
        ("tool", "user", "assistant"),  # tool results sit on the user's side
        ("tool", "assistant", "merge"),
        ("system", "assistant", "user"),
        ("system", "user", "assistant"),  # collision with the tail flips
    ],
)
def test_summary_role_never_repeats_a_neighbours_role(head, tail, role):
    assert choose_summary_role(head, tail) == role


def test_double_collision_merges_the_summary_into_the_first_tail_message():
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    tail = [{"role": "assistant", "content": "the answer"}, {"role": "user", "content": "next"}]
    out = assemble(head, "## Goal\nx", tail)
    assert len(out) == 4
    assert out[2]["role"] == "assistant"
    assert out[2]["content"].startswith(SUMMARY_PREFIX)
    assert out[2]["content"].endswith(MERGED_MESSAGE_DELIMITER + "\n\nthe answer")
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]


async def test_compressed_list_never_has_two_same_role_neighbours():
    engine, _ = make_engine()
    for shift in range(4):
        messages = conversation(150, chars=1_500)[: len(conversation(150)) - shift]
        result = await engine.compress(messages, force=True)
        roles = [m["role"] for m in result.messages]
        assert all(a != b for a, b in itertools.pairwise(roles)), roles[:8]


async def test_summary_message_uses_the_template_and_the_prefix():
    engine, main = make_engine()
    result = await engine.compress(conversation(150, chars=1_500))
    request = main.calls[0].request_text
    for heading in (
        "## Goal",
        "## Constraints & Preferences",
        "### In Progress",
        "## Critical Context",
    ):
        assert heading in request
    assert TEMPLATE in request
    summaries = [m for m in result.messages if is_summary_message(m)]
    assert len(summaries) == 1
    assert summaries[0]["content"].startswith(SUMMARY_PREFIX)


async def test_the_compaction_note_is_added_to_the_system_prompt_only_the_first_time():
    engine, _ = make_engine()
    first = await engine.compress(conversation(150, chars=1_500))
    system_after_first = first.messages[0]["content"]
    assert system_after_first.count(SYSTEM_COMPACTION_NOTE) == 1
    grown = first.messages + conversation(150, chars=1_500)[1:]
    second = await engine.compress(grown)
    assert second.committed
    assert second.messages[0]["content"] == system_after_first


async def test_second_compression_updates_the_previous_summary():
    engine, main = make_engine(["SUMMARY-ONE: the user builds a parser", "SUMMARY-TWO"])
    first = await engine.compress(conversation(150, chars=1_500))
    assert first.summary == "SUMMARY-ONE: the user builds a parser"
    assert "<previous-summary>" not in main.calls[0].request_text
    second = await engine.compress(first.messages + conversation(100, chars=1_500)[1:])
    request = main.calls[1].request_text
    assert "SUMMARY-ONE: the user builds a parser" in request
    assert "UPDATE the previous summary" in request
    assert "move items that are now finished from In Progress to Done" in request
    assert second.summary == "SUMMARY-TWO"
    assert sum(is_summary_message(m) for m in second.messages) == 1


async def test_previous_summary_is_found_in_the_transcript_after_a_restart():
    engine, _ = make_engine(["SUMMARY-ONE"])
    first = await engine.compress(conversation(150, chars=1_500))
    fresh, main = make_engine(["SUMMARY-TWO"])  # a new process, nothing in memory
    await fresh.compress(first.messages + conversation(150, chars=1_500)[1:])
    assert "SUMMARY-ONE" in main.calls[0].request_text


async def test_first_exchange_goes_into_the_second_summary():
    engine, main = make_engine()
    messages = conversation(150, chars=1_500)
    messages[1]["content"] = "FIRST-REQUEST: build me a parser"
    first = await engine.compress(messages)
    assert "FIRST-REQUEST" not in main.calls[0].request_text  # still protected in the head
    assert first.messages[1]["content"] == "FIRST-REQUEST: build me a parser"
    second = await engine.compress(first.messages + conversation(100, chars=1_500)[1:])
    assert "FIRST-REQUEST" in main.calls[1].request_text
    assert all("FIRST-REQUEST" not in str(m.get("content")) for m in second.messages[1:2])


async def test_focus_topic_is_passed_to_the_summarizer():
    engine, main = make_engine()
    await engine.compress(conversation(150, chars=1_500), focus="the database schema", force=True)
    assert "the database schema" in main.calls[0].request_text


def test_orphaned_results_are_dropped_and_orphaned_calls_get_a_stub():
    messages = [
        {"role": "system", "content": "s"},
        {"role": "tool", "tool_call_id": "gone", "content": "result of a removed call"},
        *tool_round("kept", "fine"),
        tool_round("lost", "x")[0],
        {"role": "user", "content": "next"},
    ]
    out = repair_tool_pairs(messages)
    assert all(m.get("tool_call_id") != "gone" for m in out)
    assert out[2]["tool_call_id"] == "kept"
    assert out[3]["tool_calls"][0]["id"] == "lost"
    assert out[4] == {"role": "tool", "tool_call_id": "lost", "content": STUB_TOOL_RESULT}
    assert out[5]["content"] == "next"


async def test_compression_does_not_mutate_the_input():
    engine, _ = make_engine()
    messages = conversation(150, chars=1_500)
    messages[5:5] = tool_round("t", "z" * 1_000)
    snapshot = copy.deepcopy(messages)
    result = await engine.compress(messages)
    assert result.committed and result.tool_results_pruned == 1
    assert messages == snapshot
