"""What a response's count says about the request (docs/design.md#silent-truncation,
#overflow-recovery): a prompt the server cut is never answered from, a prompt that counts
light is not mistaken for a cut, and an overflow the server explains costs a smaller reply,
not a summary."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from agent.model_metadata import CACHE_FILE_NAME
from agent.tokens import load_encoding
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.local_servers import FakeOllama, FakeVllm, LlamaTokens
from tests.harness import RecordingAdapter, is_summary_request, make_config, running_gateway

#: What people paste: tables, rules, indentation, a run of one character — text that a
#: real tokenizer counts far below (chars + 3) // 4.
PASTES = [
    "-" * 4_000,
    "| a | b |\n|---|---|\n" + "|   |   |\n" * 300,
    "x" * 6_000,
    "def f(x):\n" + "        return x\n" * 200,
    " " * 5_000 + "end",
]


def cl100k_count(api: str, body: dict[str, Any]) -> int:
    """What OpenAI's cl100k tokenizer counts for a request (3 tokens of framing a message)."""
    encoding = load_encoding("cl100k_base")
    assert encoding is not None, "the test extra brings bpe-openai's cl100k data"
    tokens = 3
    for message in body["messages"]:
        content = message.get("content")
        text = content if isinstance(content, str) else str(content or "")
        tokens += 3 + len(encoding.encode(text, disallowed_special=()))
    if body.get("tools"):
        tokens += len(encoding.encode(str(body["tools"])))
    return tokens


async def test_pastes_a_real_tokenizer_counts_light_are_not_taken_for_a_cut(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.count_tokens = cl100k_count
    config = make_config(tmp_path, fake_llm, model={"context_length": 32_768})
    adapter = RecordingAdapter()
    with caplog.at_level(logging.WARNING, logger="agent"):
        async with running_gateway(config, adapter):
            for count, paste in enumerate(PASTES):
                await adapter.say(paste)
                await adapter.wait_sent(2 * count + 1)
                await adapter.say("and?")
                await adapter.wait_sent(2 * count + 2)
    assert "cut a prompt" not in caplog.text
    assert not (tmp_path / CACHE_FILE_NAME).exists()  # no window learned from a light count
    assert len(fake_llm.requests) == 2 * len(PASTES)  # every turn answered at once


async def test_an_overflow_with_the_servers_numbers_is_answered_with_a_smaller_reply(
    tmp_path: Path,
) -> None:
    # The config is right, but this server counts twice the estimate and cannot be asked
    # (a proxy lists ids only): the first long prompt plus the reply reserve overflows.
    async with FakeVllm(served=4_096, listed=False, tokens=LlamaTokens(latin=0.5)) as vllm:
        vllm.responder = lambda request: Reply("a short answer")
        config = make_config(tmp_path, vllm, model={"name": vllm.model, "context_length": 4_096})
        adapter = RecordingAdapter()
        async with running_gateway(config, adapter):
            await adapter.say("please read this: " + "words of a long text " * 150)
            (reply,) = await adapter.wait_sent(1)
    assert reply == "a short answer"
    refused, answered = vllm.requests
    assert vllm.refusals == 1 and not any(is_summary_request(r) for r in vllm.requests)
    assert answered.messages == refused.messages  # the same prompt, nothing summarized
    assert (
        answered.prompt_tokens + answered.max_tokens
        <= 4_096
        < refused.prompt_tokens + refused.max_tokens
    )


async def test_a_thinking_models_hidden_reasoning_is_not_taken_for_a_cut(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    # Qwen3 or DeepSeek-R1 think before answering: the output count holds the reasoning,
    # which the next prompt does not carry again.
    fake_llm.responder = lambda request: Reply("yes.", usage=(request.prompt_tokens, 3_000))
    config = make_config(tmp_path, fake_llm, model={"context_length": 32_768})
    adapter = RecordingAdapter()
    with caplog.at_level(logging.WARNING, logger="agent"):
        async with running_gateway(config, adapter):
            for count in range(1, 6):
                await adapter.say(f"question {count}: " + "what about this part " * 40)
                await adapter.wait_sent(count)
    assert "cut a prompt" not in caplog.text
    assert adapter.texts() == ["yes."] * 5


async def quiet_turns(
    tmp_path: Path,
    server: FakeVllm | FakeOllama,
    caplog: pytest.LogCaptureFixture,
    turns: int,
    **sections: Any,
) -> list[str]:
    """``turns`` messages to ``server``; asserts nothing was taken for a cut or learned."""
    config = make_config(tmp_path, server, model={"name": server.model}, **sections)
    adapter = RecordingAdapter()
    with caplog.at_level(logging.INFO, logger="agent"):
        async with running_gateway(config, adapter):
            for count in range(1, turns + 1):
                await adapter.say(f"message {count}: " + "what about this part " * 30)
                await adapter.wait_sent(count)
    assert "cut a prompt" not in caplog.text and "from a cut prompt" not in caplog.text
    return adapter.texts()


async def test_a_last_step_without_tools_is_not_taken_for_a_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The last step of a tool loop offers no tools: the server drops their schemas and its
    # template's preamble around them, which no estimate knows the size of.
    tokens = LlamaTokens(tools_preamble=300)  # Qwen's runs to a few hundred tokens
    async with FakeVllm(served=32_768, listed=False, tokens=tokens) as vllm:  # cannot be asked
        vllm.responder = lambda request: (
            Reply(tool_calls=[("current_time", {})]) if request.body.get("tools") else Reply("done")
        )
        texts = await quiet_turns(tmp_path, vllm, caplog, 4, agent={"max_iterations": 3})
    assert texts == ["done"] * 4


async def test_a_thinking_models_reasoning_in_its_stored_replies_is_not_taken_for_a_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # llama.cpp without a reasoning parser leaves <think> in the reply; Qwen3's template
    # drops it from earlier replies when it counts the next prompt.
    thought = "<think>" + "let me weigh every option here carefully " * 60 + "</think>"
    async with FakeVllm(served=32_768, listed=False) as vllm:
        vllm.responder = lambda request: Reply(thought + "fine.")
        await quiet_turns(tmp_path, vllm, caplog, 6)


async def test_an_ollama_that_counts_only_what_its_cache_missed_teaches_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Ollama 0.30.x before ollama/ollama#16428: from the second request on, the prompt
    # count is only what its KV cache did not hold, a fraction of the prompt.
    async with FakeOllama(served=8_192, loaded=True, counts_cached=False) as ollama:
        ollama.responder = lambda request: Reply("fine.")
        await quiet_turns(tmp_path, ollama, caplog, 8)
    assert "is 8192 (from served)" in caplog.text
    assert not ollama.cuts
