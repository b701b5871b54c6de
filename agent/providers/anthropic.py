"""The native Anthropic Messages API, through the official SDK.

Messages are converted at this edge (:mod:`agent.providers.anthropic_format`); usage is
normalised so ``prompt_tokens`` is the whole input, cached parts included; streaming uses
the SDK's ``messages.stream`` helper.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anthropic

from agent.prompt_caching import apply_anthropic_cache_control
from agent.providers.anthropic_format import convert_messages, convert_tools
from agent.providers.base import (
    Completion,
    Provider,
    ProviderError,
    ProviderSettings,
    TextCallback,
    ToolCall,
    Usage,
)
from agent.providers.errors import (
    EMPTY_RESPONSE,
    STREAM_CLOSED,
    classify_failure,
    local_failure,
    transport_failure,
)

#: A keyless client cannot even build a request; this one gets an honest 401 instead.
PLACEHOLDER_KEY = "no-key-configured"
SDK_FAILURES = (anthropic.AnthropicError, json.JSONDecodeError)
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


class AnthropicProvider(Provider):
    """Claude through the native Messages API."""

    name = "anthropic"

    def __init__(self, settings: ProviderSettings) -> None:
        self.model = settings.model
        self.base_url = settings.base_url
        self._secret = settings.api_key
        self._client = anthropic.AsyncAnthropic(
            api_key=settings.api_key or PLACEHOLDER_KEY,
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            default_headers=settings.extra_headers or None,
        )

    def build_request(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        tools: list[dict[str, Any]] | None = None,
        cache_ttl: str | None = None,
    ) -> dict[str, Any]:
        """The request body as sent (minus streaming)."""
        if cache_ttl:
            messages = apply_anthropic_cache_control(messages, cache_ttl, native_anthropic=True)
        system, turns = convert_messages(messages)
        params: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": turns}
        if system:
            params["system"] = system
        if tools:
            params["tools"] = convert_tools(tools)
        return params

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        tools: list[dict[str, Any]] | None = None,
        on_text: TextCallback | None = None,
        cache_ttl: str | None = None,
        timeout: float | None = None,
    ) -> Completion:
        params = self.build_request(
            messages, max_tokens=max_tokens, tools=tools, cache_ttl=cache_ttl
        )
        if timeout is not None:
            params["timeout"] = timeout
        if on_text is not None:
            return await self._stream(params, on_text)
        try:
            message = await self._client.messages.create(**params)
        except SDK_FAILURES as exc:
            raise self._translate(exc, stream_started=False) from exc
        if not getattr(message, "content", None) and getattr(message, "stop_reason", None) is None:
            raise local_failure(
                self.name, "other", "the server returned an empty message", detail=EMPTY_RESPONSE
            )
        return completion_from_message(message, self.model)

    async def _stream(self, params: dict[str, Any], on_text: TextCallback) -> Completion:
        async with contextlib.AsyncExitStack() as stack:
            try:
                stream = await stack.enter_async_context(self._client.messages.stream(**params))
            except SDK_FAILURES as exc:
                raise self._translate(exc, stream_started=False) from exc
            events = aiter(stream)
            finished = False
            while True:
                # Only the SDK's reads are translated: an exception from on_text is the
                # caller's own and propagates unchanged.
                try:
                    event = await anext(events, None)
                except SDK_FAILURES as exc:
                    raise self._translate(exc, stream_started=True) from exc
                if event is None:
                    break
                if event.type == "text" and event.text:
                    await on_text(event.text)
                elif event.type == "message_stop":
                    finished = True
            if not finished:
                raise local_failure(
                    self.name,
                    "other",
                    "the stream ended before the reply finished",
                    detail=STREAM_CLOSED,
                )
            message = await stream.get_final_message()
        return completion_from_message(message, self.model)

    def _translate(self, exc: Exception, *, stream_started: bool) -> ProviderError:
        transport = transport_failure(
            self.name,
            exc,
            sdk=anthropic,
            stream_started=stream_started,
            target=self.base_url or "api.anthropic.com",
            secret=self._secret,
        )
        if transport is not None:
            return transport
        if isinstance(exc, anthropic.APIStatusError):
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
        return local_failure(
            self.name, "other", str(exc) or type(exc).__name__, secret=self._secret
        )

    async def aclose(self) -> None:
        await self._client.close()


def _body_text(body: Any) -> str:
    if isinstance(body, str):
        return body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return ""
