"""The fake LLM server's own contract, which later tests rely on."""

from __future__ import annotations

import asyncio

import anthropic
import openai
import pytest

from tests.fakes.llm_server import FakeLLM, Recorded, Reply, estimate_request_tokens
from tests.waiting import CEILING


def clients(llm: FakeLLM) -> tuple[openai.AsyncOpenAI, anthropic.AsyncAnthropic]:
    return (
        openai.AsyncOpenAI(api_key="k", base_url=llm.openai_base_url, max_retries=0),
        anthropic.AsyncAnthropic(api_key="k", base_url=llm.anthropic_base_url, max_retries=0),
    )


async def test_models_endpoint_serves_both_sdks(fake_llm: FakeLLM) -> None:
    oai, ant = clients(fake_llm)
    try:
        openai_ids = [m.id async for m in oai.models.list()]
        anthropic_ids = [m.id async for m in ant.models.list()]
    finally:
        await oai.close()
        await ant.close()

    assert openai_ids == anthropic_ids == ["fake-model"]


async def test_script_is_consumed_before_the_responder(fake_llm: FakeLLM) -> None:
    seen: list[str] = []

    async def responder(request: Recorded) -> Reply:
        seen.append(request.last_user_text)
        return Reply(f"dynamic {len(seen)}")

    fake_llm.responder = responder
    fake_llm.script(Reply("first"), Reply("second"))
    oai, _ = clients(fake_llm)
    texts = []
    try:
        for question in ("a", "b", "c"):
            reply = await oai.chat.completions.create(
                model="m", max_tokens=5, messages=[{"role": "user", "content": question}]
            )
            texts.append(reply.choices[0].message.content)
    finally:
        await oai.close()

    assert texts == ["first", "second", "dynamic 1"]
    assert seen == ["c"]


async def test_last_user_text_skips_tool_results_in_both_shapes() -> None:
    anthropic_body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "question"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
        ]
    }
    openai_body = {"messages": [{"role": "user", "content": "question"}]}

    assert Recorded("anthropic", anthropic_body, {}, 0).last_user_text == "question"
    assert Recorded("openai", openai_body, {}, 0).last_user_text == "question"


def test_prompt_estimate_counts_text_and_flat_images() -> None:
    text_only = {"messages": [{"role": "user", "content": "x" * 400}]}
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 90000}}
    with_image = {"messages": [{"role": "user", "content": [image]}]}

    assert estimate_request_tokens("openai", text_only) == (404 + 3) // 4
    assert estimate_request_tokens("openai", with_image) == 1 + 1500


async def test_wait_for_requests_wakes_on_arrival(fake_llm: FakeLLM) -> None:
    oai, _ = clients(fake_llm)
    try:
        waiter = asyncio.create_task(fake_llm.wait_for_requests(1))
        await oai.chat.completions.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
        requests = await waiter
    finally:
        await oai.close()

    assert requests[0].api == "openai"
    with pytest.raises(TimeoutError):
        await fake_llm.wait_for_requests(2, within=0.05)


async def test_stop_does_not_wait_for_a_hanging_request() -> None:
    llm = await FakeLLM().start()
    llm.script(Reply(hang=True))
    _, ant = clients(llm)
    pending = asyncio.create_task(
        ant.messages.create(
            model="m",
            max_tokens=5,
            messages=[{"role": "user", "content": "hi"}],
            timeout=4 * CEILING,  # far beyond the waits below: only stop() can end it
        )
    )
    await llm.wait_for_requests(1)

    await asyncio.wait_for(llm.stop(), timeout=CEILING)

    with pytest.raises(anthropic.APIError):
        await asyncio.wait_for(pending, timeout=CEILING)
    await ant.close()


async def test_context_window_counts_max_tokens(fake_llm: FakeLLM) -> None:
    oai, _ = clients(fake_llm)
    fake_llm.context_window = 100
    messages = [{"role": "user", "content": "x" * 200}]  # about 51 tokens
    try:
        ok = await oai.chat.completions.create(model="m", max_tokens=40, messages=messages)
        with pytest.raises(openai.BadRequestError) as caught:
            await oai.chat.completions.create(model="m", max_tokens=60, messages=messages)
    finally:
        await oai.close()

    assert ok.usage is not None and ok.usage.prompt_tokens == fake_llm.requests[0].prompt_tokens
    assert caught.value.code == "context_length_exceeded"
    assert "maximum context length is 100 tokens" in str(caught.value)


async def test_record_limit_keeps_the_latest_requests() -> None:
    async with FakeLLM(record_limit=2) as llm:
        oai, _ = clients(llm)
        try:
            for question in ("a", "b", "c"):
                await oai.chat.completions.create(
                    model="m", max_tokens=5, messages=[{"role": "user", "content": question}]
                )
        finally:
            await oai.close()

    assert llm.request_count == 3
    assert [r.last_user_text for r in llm.requests] == ["b", "c"]
