"""The agent's tool loop against the real OpenAI SDK and the fake server: gates,
reactive overflow recovery (C10), the output reserve (T5), bounded iterations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.context_compressor import CompressionSettings, ContextCompressor
from agent.context_engine import CompressionResult
from agent.loop import Agent
from agent.memory import MemoryBlock
from agent.model_metadata import ContextLengthResolver
from agent.providers import ProviderError, ProviderSettings, make_provider
from agent.providers.errors import NO_ROOM
from agent.tokens import estimate_messages_tokens_rough
from agent.tools import BUILTIN_TOOLS, ToolBox
from agent.transcript import SearchResult
from agent.turn_result import CompressionExhausted
from gateway.conversation.turns import describe_provider_error
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.harness import is_summary_request, summarizing


class MemoryTranscript:
    """The agent's Transcript protocol kept in memory (the gateway's is tested elsewhere)."""

    session_id = "s1"

    def __init__(self) -> None:
        self.commits: list[CompressionResult] = []
        self.states: list[dict[str, Any]] = []

    async def commit_compression(
        self, result: CompressionResult, original: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        self.commits.append(result)
        return list(result.messages)

    async def save_engine_state(self, state: dict[str, Any]) -> None:
        self.states.append(state)

    async def search(self, query: str, limit: int) -> list[SearchResult]:
        return [SearchResult("user", f"«{query}» was mentioned", 0.0, True)]


@pytest.fixture
async def agents():
    """Builds agents on the fake; closes their SDK clients after the test."""
    built: list[Agent] = []

    def build(llm: FakeLLM, tmp_path: Path, **kw: Any) -> Agent:
        built.append(build_agent(llm, tmp_path, **kw))
        return built[-1]

    yield build
    for agent in built:
        await agent.provider.aclose()


def build_agent(
    llm: FakeLLM, tmp_path: Path, *, window: int, max_output: int = 1024, **kw: Any
) -> Agent:
    provider = make_provider(
        ProviderSettings(
            "openai", "fake-model", api_key="k", base_url=llm.openai_base_url, max_retries=0
        )
    )
    settings = CompressionSettings(max_output_tokens=max_output, protect_last_n=4)
    engine = ContextCompressor(
        main=provider,
        context_length=window,
        settings=settings,
        model="fake-model",
        provider="openai",
    )
    return Agent(
        provider,
        engine,
        ToolBox.of(BUILTIN_TOOLS),
        max_output_tokens=max_output,
        windows=ContextLengthResolver(tmp_path),
        **kw,
    )


def chat(exchanges: int, chars: int = 2_000) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are helpful."}]
    for i in range(exchanges):
        messages.append({"role": "user", "content": f"question {i} " + "q" * chars})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * chars})
    messages.append({"role": "user", "content": "and now?"})
    return messages


def chat_requests(llm: FakeLLM) -> list[Recorded]:
    return [r for r in llm.requests if not is_summary_request(r)]


async def test_an_overflow_compresses_learns_the_window_and_retries(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    fake_llm.context_window = 16_000  # the server's real window; the agent believes 100K
    fake_llm.responder = summarizing()
    agent = agents(fake_llm, tmp_path, window=100_000)
    transcript = MemoryTranscript()
    result = await agent.run_turn(chat(20), transcript)

    assert result.error is None and result.reply == "ok"
    assert [c.trigger_source for c in transcript.commits] == ["overflow"]
    assert agent.engine.context_length == 16_000
    assert (
        ContextLengthResolver(tmp_path).resolve("fake-model", "openai", fake_llm.openai_base_url)
        == 16_000
    )
    final = chat_requests(fake_llm)[-1]
    assert final.prompt_tokens + final.max_tokens <= 16_000
    assert result.messages[-1] == {"role": "assistant", "content": "ok"}


async def test_a_pass_that_cannot_shrink_stops_with_a_clear_error(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    fake_llm.script(Reply(status=400, error_code="context_length_exceeded"))
    agent = agents(fake_llm, tmp_path, window=100_000)
    result = await agent.run_turn(chat(0), MemoryTranscript())  # nothing to compress
    assert result.error is not None and result.error.kind == "overflow"
    assert len(fake_llm.requests) == 1


async def test_overflow_recovery_is_bounded(fake_llm: FakeLLM, tmp_path: Path, agents) -> None:
    overflow = Reply(status=400, error_code="context_length_exceeded")

    def always_overflow(request: Recorded) -> Reply:
        return Reply("## Goal\nx") if is_summary_request(request) else overflow

    fake_llm.responder = always_overflow
    agent = agents(fake_llm, tmp_path, window=400_000, max_compression_attempts=2)
    transcript = MemoryTranscript()
    result = await agent.run_turn(chat(200, chars=1_000), transcript)
    assert isinstance(result.error, CompressionExhausted)  # ours to report, not the provider's
    assert not isinstance(result.error, ProviderError)
    assert len(chat_requests(fake_llm)) <= 3  # the first try + at most two retries
    assert len(transcript.commits) <= 2


async def test_a_window_what_travels_beside_the_rows_fills_sends_nothing_and_says_so(
    fake_llm: FakeLLM, tmp_path: Path, agents, caplog: pytest.LogCaptureFixture
) -> None:
    """A memory block that fills the window: the rows would all be cut to nothing, so no
    request is sent (a paid model would answer an empty prompt) and no summary is asked
    for (no summary of the conversation makes room)."""
    agent = agents(fake_llm, tmp_path, window=1_024, max_output=256)
    memory = MemoryBlock("Ann likes tea. " * 250, shown=1)
    messages = [{"role": "system", "content": "You are helpful."}, chat(0)[-1]]
    transcript = MemoryTranscript()
    result = await agent.run_turn(messages, transcript, memory=memory)
    assert result.error is not None and result.error.detail == NO_ROOM
    assert result.error.kind == "overflow" and not result.requests
    assert fake_llm.requests == [] and transcript.commits == []
    assert "a window of 1,024 tokens leaves no room for the conversation" in caplog.text
    assert "too small for this bot's instructions, tools and" in describe_provider_error(
        result.error
    )


async def test_a_long_conversation_on_a_model_never_counted_is_still_asked(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    """Before the server's first count the reply's room is kept smaller (prompt_miss):
    that caution shrinks a reply, it never refuses the request (no count would come)."""
    agent = agents(fake_llm, tmp_path, window=32_768, max_output=4_096)
    assert agent.calibration.samples == 0
    result = await agent.run_turn(chat(40), MemoryTranscript())  # more than the window
    assert result.error is None, result.error
    assert len(chat_requests(fake_llm)) == 1


async def test_a_window_too_small_for_the_tools_answers_without_them(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    """The tools are what a starved request loses first: the reply comes without them."""
    agent = agents(fake_llm, tmp_path, window=280, max_output=256)
    agent.lean_share = 1.0  # every schema sent whole (~200 tokens), as a larger window would
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "hi"},
    ]
    result = await agent.run_turn(messages, MemoryTranscript())
    assert result.error is None, result.error
    [request] = fake_llm.requests
    assert "tools" not in request.body
    assert request.body["messages"][-1] == {"role": "user", "content": "hi"}


async def test_requests_never_ask_for_more_than_the_window_holds(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    fake_llm.context_window = 12_000
    fake_llm.responder = summarizing()
    agent = agents(fake_llm, tmp_path, window=12_000, max_output=4_000)
    messages = chat(0)
    transcript = MemoryTranscript()
    anchor = None
    for turn in range(25):
        result = await agent.run_turn(messages, transcript, anchor=anchor)
        anchor = result.anchor
        assert result.error is None, result.error
        messages = result.messages + [{"role": "user", "content": f"next {turn} " + "z" * 3_000}]
    assert transcript.commits, "a 12K window must have needed compression"
    for request in fake_llm.requests:
        assert request.prompt_tokens + request.max_tokens <= 12_000


async def test_an_estimate_over_the_threshold_waits_for_real_usage(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    # The server reports a small real prompt; the rough estimate alone says "compress".
    fake_llm.responder = summarizing(lambda request: Reply("fine", usage=(2_000, 10)))
    agent = agents(fake_llm, tmp_path, window=40_000)
    transcript = MemoryTranscript()
    messages = chat(16, chars=4_000)
    assert agent.engine.should_compress(estimate_messages_tokens_rough(messages))  # the premise
    result = await agent.run_turn(messages, transcript)
    assert result.error is None
    assert transcript.commits == []  # deferred: the provider's count decides, and it says no
    assert result.anchor is not None and result.anchor.prompt_tokens == 2_000


async def test_real_usage_over_the_threshold_compresses_after_tools(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    answers = iter([Reply(tool_calls=[("current_time", {})], usage=(39_000, 20)), Reply("done")])
    fake_llm.responder = summarizing(lambda request: next(answers))
    agent = agents(fake_llm, tmp_path, window=40_000)
    transcript = MemoryTranscript()
    result = await agent.run_turn(chat(12, chars=1_000), transcript)
    assert result.reply == "done"
    assert [c.trigger_source for c in transcript.commits] == ["post_tool"]


async def test_tool_loop_is_bounded_and_the_last_step_offers_no_tools(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    fake_llm.script(*[Reply(tool_calls=[("current_time", {})])] * 2, Reply("finally, text"))
    agent = agents(fake_llm, tmp_path, window=100_000, max_iterations=3)
    result = await agent.run_turn(chat(1), MemoryTranscript())
    assert result.reply == "finally, text"
    assert [bool(r.body.get("tools")) for r in fake_llm.requests] == [True, True, False]
    tool_rows = [m for m in result.messages if m["role"] == "tool"]
    assert len(tool_rows) == 2 and "UTC" in tool_rows[0]["content"]


async def test_tool_errors_reach_the_model_as_text(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    fake_llm.script(
        Reply(
            tool_calls=[
                ("no_such_tool", {}),
                ("current_time", {"timezone": "Mars/Olympus"}),
                ("session_search", {"query": "cat"}),
            ]
        ),
        Reply("sorted"),
    )
    agent = agents(fake_llm, tmp_path, window=100_000)
    result = await agent.run_turn(chat(1), MemoryTranscript())
    outputs = [m["content"] for m in result.messages if m["role"] == "tool"]
    assert outputs[0].startswith("Error: there is no tool")
    assert "unknown time zone" in outputs[1]
    assert "«cat»" in outputs[2] and "(archived)" in outputs[2]
    assert result.reply == "sorted"


@pytest.mark.parametrize(
    "status,kind", [(429, "rate_limit"), (529, "overloaded"), (401, "auth"), (500, "other")]
)
async def test_provider_failures_end_the_turn_with_a_typed_error(
    fake_llm: FakeLLM, tmp_path: Path, agents, status: int, kind: str
) -> None:
    fake_llm.script(Reply(status=status))
    agent = agents(fake_llm, tmp_path, window=100_000)
    messages = chat(1)
    result = await agent.run_turn(messages, MemoryTranscript())
    assert result.error is not None and result.error.kind == kind
    assert result.messages == messages  # nothing invented, nothing dropped


async def test_turns_stream_from_the_model_shown_or_not_and_summaries_do_not(
    fake_llm: FakeLLM, tmp_path: Path, agents
) -> None:
    # Nothing shows this turn (no on_text), yet its requests stream: that is what lets
    # the timeout tell a slow model from a stalled one (docs/design.md#slow-models).
    fake_llm.context_window = 16_000
    fake_llm.responder = summarizing()
    agent = agents(fake_llm, tmp_path, window=100_000)
    result = await agent.run_turn(chat(20), MemoryTranscript())

    assert result.error is None and result.reply == "ok"
    summaries = [r for r in fake_llm.requests if is_summary_request(r)]
    assert summaries and not any(r.stream for r in summaries)
    assert all(r.stream for r in chat_requests(fake_llm))
