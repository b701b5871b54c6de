"""The native Anthropic Messages API, through the official SDK.

Messages are converted at this edge (:mod:`agent.providers.anthropic_format`); usage is
normalised so ``prompt_tokens`` is the whole input, cached parts included; streaming uses
the SDK's ``messages.stream`` helper.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, ClassVar

import anthropic

from agent.messages import JSON, Message, ToolSchema
from agent.prompt_caching import apply_anthropic_cache_control
from agent.providers.anthropic_format import convert_messages, convert_tools
from agent.providers.base import Completion, ProviderError, TextCallback, ToolCall, Usage
from agent.providers.errors import EMPTY_RESPONSE, classify_failure, local_failure
from agent.providers.sdk import SDKProvider

STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
}


def normalise_usage(raw: Any) -> Usage | None:
    """Anthropic reports cached input apart; add it back so prompt means the whole input.

    A report of zero input is treated as no report: no real request is empty, and a zero
    would make every later token count look tiny.
    """
    if raw is None:
        return None
    read = int(getattr(raw, "cache_read_input_tokens", 0) or 0)
    write = int(getattr(raw, "cache_creation_input_tokens", 0) or 0)
    prompt = int(getattr(raw, "input_tokens", 0) or 0) + read + write
    if prompt == 0:
        return None
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=int(getattr(raw, "output_tokens", 0) or 0),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def completion_from_message(message: Any, fallback_model: str) -> Completion:
    """A :class:`Completion` from an SDK ``Message`` (streamed or not)."""
    text: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content or []:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(block.id, block.name, json.dumps(block.input or {})))
    stop = message.stop_reason
    return Completion(
        text="".join(text),
        tool_calls=tuple(calls),
        usage=normalise_usage(getattr(message, "usage", None)),
        finish_reason=STOP_REASONS.get(stop, "other") if stop else "stop",
        model=message.model or fallback_model,
    )


class AnthropicProvider(SDKProvider):
    """Claude through the native Messages API."""

    name = "anthropic"
    sdk = anthropic
    client_class = anthropic.AsyncAnthropic
    sdk_error = anthropic.AnthropicError
    default_host = "api.anthropic.com"
    # Twenty a page unless asked for more; a thousand is the most one page holds.
    models_path = "/v1/models"
    models_query: ClassVar[dict[str, int]] = {"limit": 1000}

    def build_request(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        tools: list[ToolSchema] | None = None,
        cache_ttl: str | None = None,
    ) -> JSON:
        if cache_ttl:
            messages = apply_anthropic_cache_control(messages, cache_ttl, native_anthropic=True)
        system, turns = convert_messages(messages)
        params: JSON = {"model": self.model, "max_tokens": max_tokens, "messages": turns}
        if system:
            params["system"] = system
        if tools:
            params["tools"] = convert_tools(tools)
        return params

    async def _create(self, body: JSON, timeout: float | None) -> Completion:
        message = await self._sdk(self._client.messages.create(**_with_timeout(body, timeout)))
        if not getattr(message, "content", None) and getattr(message, "stop_reason", None) is None:
            raise local_failure(
                self.name, "other", "the server returned an empty message", detail=EMPTY_RESPONSE
            )
        return completion_from_message(message, self.model)

    async def _stream(self, body: JSON, timeout: float | None, on_text: TextCallback) -> Completion:
        async with contextlib.AsyncExitStack() as stack:
            stream = await self._sdk(
                stack.enter_async_context(
                    self._client.messages.stream(**_with_timeout(body, timeout))
                )
            )
            events = aiter(stream)
            finished = False
            while (event := await self._next(events)) is not None:
                if event.type == "text" and event.text:
                    await on_text(event.text)
                elif event.type == "message_stop":
                    finished = True
            if not finished:
                raise self.stream_closed()
            message = await stream.get_final_message()
        return completion_from_message(message, self.model)

    def _status_failure(self, exc: BaseException) -> ProviderError | None:
        if not isinstance(exc, anthropic.APIStatusError):
            return None
        # Mid-stream `event: error` arrives as a status error carrying the stream's 200.
        message = exc.api_message or _body_text(exc.body) or f"HTTP {exc.status_code}"
        return classify_failure(
            self.name,
            status=exc.status_code if exc.status_code != 200 else None,
            error_type=exc.type,
            code=getattr(exc, "error_code", None),
            message=message,
            headers=exc.response.headers,
            body=exc.body,
            secret=self._secret,
        )


def _with_timeout(body: JSON, timeout: float | None) -> JSON:
    return body if timeout is None else {**body, "timeout": timeout}


def _body_text(body: Any) -> str:
    if isinstance(body, str):
        return body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return ""
