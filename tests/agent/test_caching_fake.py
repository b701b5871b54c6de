"""The caching fake's contract (tests/fakes/caching_llm.py), driven by the real openai
SDK: OpenAI's automatic prefix caching as its docs describe it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import openai
import pytest

from agent.cost.prices import Price, cost_of
from agent.providers import ProviderSettings, make_provider
from tests.fakes.caching_llm import CachingLLM
from tests.fakes.llm_server import Reply

#: OpenAI's numbers (its prompt caching guide), not the fake's: the fake must match them.
MINIMUM = 1024
BLOCK = 128
SYSTEM = "You are a careful assistant. " * 300  # ~2,100 tokens at 4 characters a token


@pytest.fixture
async def llm() -> AsyncIterator[CachingLLM]:
    async with CachingLLM() as server:
        yield server


@pytest.fixture
async def client(llm: CachingLLM) -> AsyncIterator[openai.AsyncOpenAI]:
    sdk = openai.AsyncOpenAI(api_key="k", base_url=llm.openai_base_url, max_retries=0)
    yield sdk
    await sdk.close()


def conversation(*turns: str, system: str = SYSTEM) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return messages


async def ask(
    client: openai.AsyncOpenAI, messages: list[dict[str, Any]], **extra: Any
) -> tuple[int, int]:
    """(prompt_tokens, cached_tokens) as the SDK read them."""
    reply = await client.chat.completions.create(
        model=extra.pop("model", "fake-model"), messages=messages, max_tokens=64, **extra
    )  # type: ignore[call-overload]
    usage = reply.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    return usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0


def floor_block(tokens: int) -> int:
    return tokens // BLOCK * BLOCK


async def test_a_repeated_prompt_is_served_from_cache_in_128_token_blocks(
    client: openai.AsyncOpenAI,
) -> None:
    first_prompt, first_cached = await ask(client, conversation("hello"))
    prompt, cached = await ask(client, conversation("hello"))

    assert first_cached == 0  # nothing was cached before
    assert prompt == first_prompt > 2 * MINIMUM
    assert cached == floor_block(prompt) and cached % BLOCK == 0
    assert cached <= prompt  # a part of prompt_tokens, not added to it


async def test_a_conversation_reads_the_previous_turn_s_prompt_from_cache(
    client: openai.AsyncOpenAI,
) -> None:
    turn_1, _ = await ask(client, conversation("What is a cache?"))
    prompt, cached = await ask(client, conversation("What is a cache?", "A store.", "And?"))

    assert prompt > turn_1
    assert cached == floor_block(turn_1)


async def test_nothing_is_cached_below_1024_tokens(client: openai.AsyncOpenAI) -> None:
    short = conversation("hi", system="x" * 4000)  # ~1,003 tokens
    prompt, _ = await ask(client, short)
    _, cached = await ask(client, short)

    assert 900 < prompt < MINIMUM
    assert cached == 0


async def test_the_first_cached_hit_is_1024_tokens(client: openai.AsyncOpenAI) -> None:
    base = conversation("hi", system="y" * 4 * 1100)  # just past the minimum
    prompt, _ = await ask(client, base)
    _, cached = await ask(client, base)

    assert MINIMUM < prompt < MINIMUM + BLOCK
    assert cached == MINIMUM


async def test_a_changed_system_prompt_or_tool_list_misses_everything_after_it(
    client: openai.AsyncOpenAI,
) -> None:
    tool = {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}
    await ask(client, conversation("hello"), tools=[tool])

    _, other_system = await ask(
        client, conversation("hello", system="Z" + SYSTEM[1:]), tools=[tool]
    )
    renamed = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}
    _, other_tools = await ask(client, conversation("hello"), tools=[renamed])
    _, same = await ask(client, conversation("hello"), tools=[tool])

    assert other_system == 0
    assert other_tools == 0  # tools come before the system prompt
    assert same > 0


async def test_the_cache_is_per_model_and_remembers_more_than_the_last_prompt(
    client: openai.AsyncOpenAI, llm: CachingLLM
) -> None:
    first = conversation("a long question " * 200)
    prompt, _ = await ask(client, first)
    await ask(client, conversation("something else entirely " * 200))

    _, other_model = await ask(client, first, model="other-model")
    _, again = await ask(client, first)
    llm.cache.clear()
    _, evicted = await ask(client, first)

    assert other_model == 0
    assert again == floor_block(prompt)
    assert evicted == 0


async def test_a_stream_reports_cached_tokens_when_it_asks_for_usage(
    client: openai.AsyncOpenAI,
) -> None:
    messages = conversation("stream me")
    await ask(client, messages)
    stream = await client.chat.completions.create(
        model="fake-model",
        messages=messages,  # type: ignore[arg-type]
        max_tokens=64,
        stream=True,
        stream_options={"include_usage": True},
    )
    usages = [chunk.usage async for chunk in stream if chunk.usage is not None]

    assert len(usages) == 1
    details = usages[0].prompt_tokens_details
    assert details is not None and details.cached_tokens == floor_block(usages[0].prompt_tokens)


async def test_through_our_provider_the_cost_matches_the_fake_s_implied_bill(
    llm: CachingLLM,
) -> None:
    """A dozen turns through agent.providers' openai provider: the cost computed from
    the normalised Usage equals what the fake's own reports imply, to the last digit."""
    provider = make_provider(
        ProviderSettings("openai", "gpt-4o-mini", api_key="k", base_url=llm.openai_base_url)
    )
    price = Price.per_million("0.15", "0.60", cached_input="0.075")
    messages = conversation()
    total = Decimal(0)
    for turn in range(12):
        messages.append({"role": "user", "content": f"question {turn}: " + "why? " * 40})
        completion = await provider.complete(messages, max_tokens=64)
        cost = cost_of(completion.usage, price)
        assert cost is not None
        total += cost
        messages.append(completion.as_message())

    implied = sum(
        (r.cost(Decimal("0.15"), Decimal("0.075"), Decimal("0.60")) for r in llm.reports),
        Decimal(0),
    )
    cached_share = sum(r.cached_tokens for r in llm.reports) / sum(
        r.prompt_tokens for r in llm.reports
    )
    assert len(llm.reports) == 12
    assert total == implied
    assert cached_share > 0.8  # every turn after the first reads its predecessor


async def test_fakellm_s_own_behaviour_stays(client: openai.AsyncOpenAI, llm: CachingLLM) -> None:
    """Scripts, errors and explicit usage work as in FakeLLM; a refused request leaves
    nothing in the cache (no prompt was read)."""
    messages = conversation("hello")
    llm.script(Reply(status=500))
    with pytest.raises(openai.InternalServerError):
        await ask(client, messages)
    _, after_error = await ask(client, messages)
    llm.script(Reply("scripted", usage=(5_000, 7), cache_read=256))
    scripted = await ask(client, messages)

    assert after_error == 0  # the refused request left nothing cached
    assert scripted == (5_000, 256)  # explicit usage is sent as written
    assert len(llm.reports) == 1  # only "auto" usage is the fake's own report


async def test_an_overflow_is_judged_by_the_same_token_count(llm: CachingLLM) -> None:
    llm.context_window = 2_000
    sdk = openai.AsyncOpenAI(api_key="k", base_url=llm.openai_base_url, max_retries=0)
    try:
        with pytest.raises(openai.BadRequestError) as refused:
            await ask(sdk, conversation("hello"))
    finally:
        await sdk.close()

    assert "context length is 2000 tokens" in str(refused.value)
    assert llm.requests[-1].prompt_tokens > 2_000 - 64
    assert not llm.reports
