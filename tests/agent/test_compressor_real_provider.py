"""The summary call through the real providers and SDKs, against the fake LLM server.

These pin the wire-level half of the failure table (SPEC C8): what an HTTP 529, a hang,
an overflow refusal or a truncated reply from a real server turns into.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent.compression.settings import CompressionSettings
from agent.context_compressor import ContextCompressor
from agent.providers.anthropic import AnthropicProvider
from agent.providers.base import ProviderSettings
from agent.providers.openai import OpenAIProvider
from tests.agent.scripted_summarizer import Clock, conversation
from tests.fakes.llm_server import FakeLLM, Reply


def openai_provider(llm: FakeLLM, model: str = "fake-model") -> OpenAIProvider:
    return OpenAIProvider(
        ProviderSettings(
            provider="openai", model=model, api_key="k", base_url=llm.openai_base_url, max_retries=0
        )
    )


def anthropic_provider(llm: FakeLLM) -> AnthropicProvider:
    return AnthropicProvider(
        ProviderSettings(
            provider="anthropic",
            model="claude-haiku-4-5",
            api_key="k",
            base_url=llm.anthropic_base_url,
            max_retries=0,
        )
    )


@pytest.fixture
async def main(fake_llm: FakeLLM) -> AsyncIterator[OpenAIProvider]:
    """The main model: the openai provider against the fake, closed after the test."""
    provider = openai_provider(fake_llm)
    yield provider
    await provider.aclose()


def engine_with(main, auxiliary=None, **settings) -> ContextCompressor:
    return ContextCompressor(
        main=main,
        auxiliary=auxiliary,
        context_length=128_000,
        settings=CompressionSettings(**settings),
        clock=Clock(),
        session_id="real-provider",
    )


def chat() -> list[dict]:
    messages = conversation(150, chars=1_500)
    messages[3]["content"] = "remember: the deploy key lives in vault path kv/deploy"
    return messages


async def test_a_real_openai_summary_call_commits(fake_llm, main):
    fake_llm.script(Reply("## Goal\nShip the release.\n\n## Critical Context\n- kv/deploy"))
    result = await engine_with(main).compress(chat())
    assert (result.commit_status, result.method) == ("committed", "llm_summary")
    assert result.summary.startswith("## Goal\nShip the release.")
    request = fake_llm.requests[-1]
    assert request.max_tokens == 6_400
    assert "remember: the deploy key lives in vault path kv/deploy" in request.all_text
    assert "## Constraints & Preferences" in request.all_text


async def test_real_overload_is_retried_once_then_aborts(fake_llm, main):
    fake_llm.script(Reply(status=529), Reply(status=529))
    messages = chat()
    result = await engine_with(main).compress(messages)
    assert (result.commit_status, result.failure_class) == ("aborted", "summary_overload_failure")
    assert result.messages is messages
    assert fake_llm.request_count == 2


async def test_a_hanging_server_times_out_and_aborts(fake_llm, main):
    fake_llm.script(Reply(hang=True))
    engine = engine_with(main, context_timeout_seconds=0.3)
    result = await engine.compress(chat())
    assert (result.commit_status, result.failure_class) == ("aborted", "summary_timeout")
    assert engine.cooldown_remaining() == 60


async def test_a_length_cut_summary_is_retried_with_more_room_then_committed(fake_llm, main):
    fake_llm.script(
        Reply("## Goal\nhalf a summ", finish_reason="length"), Reply("## Goal\nthe whole summary")
    )
    result = await engine_with(main).compress(chat())
    assert (result.commit_status, result.method) == ("committed", "llm_summary")
    first, retry = fake_llm.requests
    assert retry.max_tokens > first.max_tokens


async def test_a_summary_cut_twice_by_its_length_aborts(fake_llm, main):
    cut = Reply("## Goal\nhalf a summ", finish_reason="length")
    fake_llm.script(cut, cut)
    result = await engine_with(main).compress(chat())
    assert (result.commit_status, result.failure_class) == ("aborted", "summary_length")
    assert len(fake_llm.requests) == 2


async def test_a_summary_sized_for_a_window_the_server_lacks_is_asked_again_to_fit(fake_llm, main):
    """Configured 128K, served 8K: the refusal says the window, and the summary is asked
    again within it — reading less and writing at most a quarter of it."""
    fake_llm.context_window = 8_192
    result = await engine_with(main).compress(chat())
    assert (result.commit_status, result.method) == ("committed", "llm_summary")
    first, again = fake_llm.requests
    assert first.prompt_tokens + first.max_tokens > 8_192
    assert again.prompt_tokens + again.max_tokens <= 8_192 and again.max_tokens <= 2_048


async def test_a_summary_model_with_a_too_small_window_gets_the_fallback(fake_llm, main):
    fake_llm.context_window = 700  # too small for the instructions and a summary at all
    result = await engine_with(main).compress(chat())
    assert (result.commit_status, result.method) == ("committed", "deterministic_fallback")
    assert "remember: the deploy key lives in vault path kv/deploy" in result.summary


async def test_broken_anthropic_auxiliary_falls_back_to_the_main_model(fake_llm, main):
    fake_llm.script(Reply(status=401))  # the anthropic aux model's key is wrong
    fake_llm.script(Reply("## Goal\nwritten by the main model"))
    aux = anthropic_provider(fake_llm)
    try:
        result = await engine_with(main, auxiliary=aux).compress(chat())
    finally:
        await aux.aclose()
    assert [r.api for r in fake_llm.requests] == ["anthropic", "openai"]
    assert (result.method, result.failure_class) == ("aux_fallback_main", "aux_model_fallback")
    assert result.summary == "## Goal\nwritten by the main model"
    assert result.notice and "auxiliary.compression" in result.notice
