"""The usage anchor (SPEC S4, H3): real tokens + a rough estimate of only what came after."""

from __future__ import annotations

import json

from agent.compression.settings import CompressionSettings
from agent.context_compressor import ContextCompressor
from agent.providers.base import Usage
from agent.tokens import estimate_messages_tokens_rough
from agent.usage_anchor import UsageAnchor, anchored_tokens, build_anchor
from tests.agent.scripted_summarizer import ScriptedSummarizer, conversation

ROUTE = "openai:default:gpt-4o"


def answered(n: int = 5) -> list[dict]:
    return conversation(n, chars=100)


def test_anchor_plus_small_delta():
    messages = answered()
    anchor = build_anchor(Usage(prompt_tokens=5_000, completion_tokens=200), messages, ROUTE)
    assert anchor is not None and anchor.covered == len(messages)
    reply = estimate_messages_tokens_rough(messages[-1:])
    assert anchored_tokens(anchor, messages, ROUTE) == 5_000 + reply
    new_rows = [{"role": "user", "content": "x" * 400}, {"role": "user", "content": "y" * 40}]
    expected = 5_000 + estimate_messages_tokens_rough(messages[-1:] + new_rows)
    assert anchored_tokens(anchor, messages + new_rows, ROUTE) == expected


def test_a_thinking_models_reasoning_is_not_counted_as_context():
    messages = answered()
    # 3,000 output tokens of reasoning for a short visible reply: the next prompt carries
    # the reply, not the reasoning.
    anchor = build_anchor(Usage(prompt_tokens=5_000, completion_tokens=3_000), messages, ROUTE)
    assert anchored_tokens(anchor, messages, ROUTE) < 5_100


def test_no_usage_means_no_anchor():
    assert build_anchor(None, answered(), ROUTE) is None
    assert build_anchor(Usage(), answered(), ROUTE) is None
    assert anchored_tokens(None, answered(), ROUTE) is None


def test_rewritten_transcript_fails_closed():
    messages = answered()
    anchor = build_anchor(Usage(prompt_tokens=900, completion_tokens=100), messages, ROUTE)
    edited = [dict(m) for m in messages]
    edited[-1]["content"] = "a different reply"
    assert anchored_tokens(anchor, edited, ROUTE) is None


def test_shorter_list_fails_closed():
    messages = answered()
    anchor = build_anchor(Usage(prompt_tokens=900, completion_tokens=100), messages, ROUTE)
    assert anchored_tokens(anchor, messages[:-2], ROUTE) is None


def test_compacted_list_of_the_same_length_fails_closed():
    messages = answered()
    anchor = build_anchor(Usage(prompt_tokens=900, completion_tokens=100), messages, ROUTE)
    shifted = [
        *messages[:1],
        {"role": "user", "content": "[CONTEXT COMPACTION] ..."},
        *messages[3:],
    ]
    shifted.append(messages[-1] | {"content": "tail"})
    assert anchored_tokens(anchor, shifted, ROUTE) is None


def test_model_change_fails_closed():
    messages = answered()
    anchor = build_anchor(Usage(prompt_tokens=900, completion_tokens=100), messages, ROUTE)
    assert anchored_tokens(anchor, messages, "anthropic:default:claude-sonnet-4") is None


def test_anchor_survives_persistence_and_a_reloaded_transcript():
    messages = answered()
    anchor = build_anchor(Usage(prompt_tokens=900, completion_tokens=100), messages, ROUTE)
    stored = json.loads(json.dumps(anchor.to_dict()))
    reloaded = json.loads(json.dumps(messages))  # the gateway re-reads rows from SQLite
    restored = UsageAnchor.from_dict(stored)
    assert restored == anchor
    assert anchored_tokens(restored, reloaded, ROUTE) == 900 + estimate_messages_tokens_rough(
        messages[-1:]
    )


def test_malformed_persisted_anchor_is_no_anchor():
    assert UsageAnchor.from_dict({"prompt_tokens": "x"}) is None
    assert UsageAnchor.from_dict(None) is None


def test_threshold_decision_flips_with_the_anchor():
    engine = ContextCompressor(
        main=ScriptedSummarizer(),
        context_length=100_000,
        settings=CompressionSettings(max_output_tokens=4_000),
    )
    # A short list whose rough estimate is far below the threshold...
    messages = answered(3)
    assert not engine.should_compress(estimate_messages_tokens_rough(messages))
    # ...but the provider said the prompt (system prompt, tools, images) was much bigger.
    real = engine.threshold_tokens - 10 - estimate_messages_tokens_rough(messages[-1:])
    anchor = build_anchor(Usage(prompt_tokens=real, completion_tokens=5), messages, ROUTE)
    assert not engine.should_compress(anchored_tokens(anchor, messages, ROUTE))
    grown = [*messages, {"role": "user", "content": "z" * 40}]
    assert engine.should_compress(anchored_tokens(anchor, grown, ROUTE))
