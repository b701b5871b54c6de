"""What OpenAI-compatible servers really stream, read by the provider
(docs/design.md#slow-models): every chat turn streams, so the stream reader must take
each server's shape as the whole-reply reader did."""

from __future__ import annotations

import json
from typing import Any

from agent.providers import ProviderSettings, make_provider
from tests.fakes.llm_server import FakeLLM, Recorded, Reply

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def sse(*chunks: dict[str, Any]) -> str:
    return "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
            "model": "qwen3:8b", "system_fingerprint": "fp_ollama", "choices": [choice],
            **extra}  # fmt: skip


def call(call_id: str, path: str) -> dict[str, Any]:
    arguments = json.dumps({"path": path})
    return {"id": call_id, "index": 0, "type": "function",
            "function": {"name": "read", "arguments": arguments}}  # fmt: skip


async def ask(fake: FakeLLM, **kwargs: Any) -> Any:
    settings = ProviderSettings("openai", "qwen3:8b", "", fake.openai_base_url, max_retries=0)
    provider = make_provider(settings)
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    try:
        return await provider.complete(
            [{"role": "user", "content": "read both"}],
            max_tokens=100,
            tools=TOOLS,
            on_text=on_text,
            **kwargs,
        ), provider
    finally:
        await provider.aclose()


async def test_ollamas_parallel_calls_all_at_index_0_stay_two_calls(fake_llm: FakeLLM) -> None:
    # Ollama streams each call whole, every one at index 0 with an id of its own, and
    # says "stop" beside them (ollama/ollama#15457).
    usage = {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
    body = sse(
        chunk({"role": "assistant", "content": "", "tool_calls": [call("call_a", "alpha.txt")]}),
        chunk({"role": "assistant", "content": "", "tool_calls": [call("call_b", "beta.txt")]}),
        chunk({"role": "assistant", "content": ""}, "stop"),
        {**chunk({}, None), "choices": [], "usage": usage},
        {**chunk({}, None), "choices": [], "usage": {"prompt_tokens": 0}},  # an empty one
    )
    fake_llm.responder = lambda request: Reply(raw_body=body)
    completion, _ = await ask(fake_llm)
    assert [(c.id, c.arguments) for c in completion.tool_calls] == [
        ("call_a", '{"path": "alpha.txt"}'),
        ("call_b", '{"path": "beta.txt"}'),
    ]
    assert completion.finish_reason == "tool_calls"
    assert completion.usage is not None and completion.usage.prompt_tokens == 40


async def test_a_server_that_will_not_stream_with_tools_is_read_whole_from_then_on(
    fake_llm: FakeLLM,
) -> None:
    # llama.cpp's builds of early 2025: a 500 for a stream that carries tools.
    refusal = {"error": {"code": 500, "message": "Cannot use tools with stream",
                         "type": "server_error"}}  # fmt: skip

    def respond(request: Recorded) -> Reply:
        if request.stream:
            return Reply(status=500, raw_body=json.dumps(refusal))
        return Reply("both read")

    fake_llm.responder = respond
    completion, provider = await ask(fake_llm)
    assert completion.text == "both read"
    assert [r.stream for r in fake_llm.requests] == [True, False]
    assert provider.streams is False  # type: ignore[attr-defined]
