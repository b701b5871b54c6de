"""OpenAI chat completions: OpenAI itself and any compatible server.

OpenRouter, Ollama, vLLM, llama.cpp, LM Studio and friends all speak this API, each a
little differently, so the provider is conservative about what it sends (whitelisted
message keys, ``max_tokens``) and forgiving about what comes back (missing usage,
missing tool-call ids or indexes, errors inside a 200 response).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, cast

import httpx2
import openai

from agent.messages import JSON, Message, ToolCallPart, ToolSchema
from agent.prompt_caching import apply_anthropic_cache_control, caching_enabled
from agent.providers.base import Completion, ProviderError, TextCallback, ToolCall, Usage
from agent.providers.errors import EMPTY_RESPONSE, JSON_DECODE, classify_failure, local_failure
from agent.providers.sdk import PLACEHOLDER_KEY, SDKProvider
from agent.served_window import ServedWindow, ask_served_window

#: How long asking a server for its window may take (each endpoint tried).
PROBE_TIMEOUT_SECONDS = 5.0

#: Keys a message may carry on the wire; anything else (ids, timestamps, token counts
#: from the store) would make strict servers reject the request.
WIRE_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
}


#: A row with only these keys, its content text, is already its own wire form.
_TEXT_ROW_KEYS = frozenset({"role", "content"})


def to_wire_message(message: Message) -> Message:
    """Keep only the keys the API defines; normalise tool calls; drop empty optionals.

    A plain text row comes back as it is, not copied: most rows of a long chat are, and
    nothing downstream writes to a request's messages (stored rows are read-only)."""
    if message.keys() <= _TEXT_ROW_KEYS and isinstance(message.get("content"), str):
        return message
    wire = cast(Message, {key: value for key, value in message.items() if key in WIRE_MESSAGE_KEYS})
    if "content" not in wire:
        wire["content"] = None if wire.get("tool_calls") else ""
    for key in ("tool_calls", "tool_call_id", "name"):
        if not wire.get(key):
            wire.pop(key, None)  # type: ignore[misc]  # one of the optional keys
    if "tool_calls" in wire:
        wire["tool_calls"] = [_wire_tool_call(call) for call in wire["tool_calls"]]
    return wire


#: Opens the user message that carries the images tool results returned.
TOOL_IMAGES_NOTE = "[images returned by the tool calls above]"


def images_after_tool_results(wire: list[Message]) -> list[Message]:
    """A tool message may carry only text here: the images of a run of tool results
    (an MCP tool's, docs/design.md#mcp-results) follow the run in one user message."""
    out: list[Message] = []
    images: list[Any] = []
    for message in wire:
        if message.get("role") != "tool" and images:
            out.append(
                {"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_NOTE}, *images]}
            )
            images = []
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, list):
            texts = [
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            ]
            images += [p for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
            message = {**message, "content": "\n".join(t for t in texts if t)}
        out.append(message)
    if images:
        out.append(
            {"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_NOTE}, *images]}
        )
    return out


def _wire_tool_call(call: Mapping[str, Any]) -> ToolCallPart:
    """A stored call as the API wants it (rows of older versions may hold a dict of
    arguments, or no id)."""
    function = call.get("function") or {}
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return {
        "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {"name": function.get("name", ""), "arguments": arguments},
    }


def _field(value: Any, name: str) -> Any:
    """A field of a reply or a stream chunk read as JSON; None where the server sent
    something else than an object there (forgiving, like the rest of this module)."""
    return value.get(name) if isinstance(value, dict) else None


def _usage_from(raw: Any) -> Usage | None:
    """Usage as reported; a zero prompt counts as no report (no real request is empty,
    and a zero anchor would make the transcript look tiny)."""
    prompt = int(_field(raw, "prompt_tokens") or 0) if raw is not None else 0
    if prompt == 0:
        return None
    details = _field(raw, "prompt_tokens_details")
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=int(_field(raw, "completion_tokens") or 0),
        cache_read_tokens=int(_field(details, "cached_tokens") or 0) if details else 0,
        cache_write_tokens=int(_field(details, "cache_write_tokens") or 0) if details else 0,
    )


def _options(timeout: float | None) -> JSON:
    """Request options for the client's POST: a timeout only when the call sets one."""
    return {"timeout": timeout} if timeout is not None else {}


def _finish_reason(raw: str | None, has_tool_calls: bool) -> str:
    # Some servers (older Ollama among them) say "stop", or nothing, next to tool calls.
    if raw in (None, "stop") and has_tool_calls:
        return "tool_calls"
    return FINISH_REASONS.get(raw or "stop", "other")


class _StreamedReply:
    """Accumulates a streamed reply: text, tool calls by index, finish reason, usage."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        #: The call each of the server's indexes now fills.
        self._slot_of: dict[int, int] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.model = ""

    def add_tool_delta(self, delta: Any) -> None:
        index = _field(delta, "index")
        call_id = _field(delta, "id")
        if not isinstance(index, int):  # some servers omit it: a new id starts a new call
            known = {c["id"] for c in self.calls.values()}
            starts_new = not self.calls or (call_id and call_id not in known)
            slot = len(self.calls) if starts_new else max(self.calls)
        else:
            slot = self._slot_of.get(index, -1)
            held = self.calls.get(slot, {}).get("id")
            # Ollama streams parallel calls whole, each at index 0 with an id of its own
            # (ollama/ollama#15457): another id at a known index is another call.
            if slot < 0 or (call_id and held and held != str(call_id)):
                slot = self._slot_of[index] = len(self.calls)
        entry = self.calls.setdefault(slot, {"id": "", "name": "", "arguments": ""})
        if call_id:
            entry["id"] = str(call_id)
        function = _field(delta, "function")
        if function is not None:
            name = _field(function, "name")
            if name and not entry["name"]:
                entry["name"] = str(name)
            arguments = _field(function, "arguments")
            entry["arguments"] += arguments if isinstance(arguments, str) else ""

    def completion(self) -> Completion:
        calls = tuple(
            ToolCall(c["id"] or f"call_{uuid.uuid4().hex[:12]}", c["name"], c["arguments"])
            for _, c in sorted(self.calls.items())
        )
        return Completion(
            text="".join(self.text),
            tool_calls=calls,
            usage=self.usage,
            finish_reason=_finish_reason(self.finish_reason, bool(calls)),
            model=self.model,
        )


class OpenAIProvider(SDKProvider):
    """Any OpenAI-compatible chat-completions endpoint, through the official SDK."""

    name = "openai"
    sdk = openai
    client_class = openai.AsyncOpenAI
    sdk_error = openai.OpenAIError
    default_host = "api.openai.com"

    @property
    def may_cut_prompts(self) -> bool:
        """Any server but OpenAI's own: Ollama cuts silently, and who knows what a proxy
        in front of a model does."""
        return bool(self.base_url) and self.default_host not in (self.base_url or "")

    async def served_window(self, *, load: bool = False) -> ServedWindow | None:
        """Ask a self-hosted server (any base URL but OpenAI's own) what it serves."""
        if not self.may_cut_prompts or self.base_url is None:
            return None
        key = self._secret if self._secret and self._secret != PLACEHOLDER_KEY else None
        return await ask_served_window(
            self.base_url,
            self.model,
            api_key=key,
            timeout=PROBE_TIMEOUT_SECONDS,
            load_timeout=self.timeout if load else None,
        )

    @property
    def caches_prompts(self) -> bool:
        """Whether ``cache_ttl`` adds markers here (Claude through OpenRouter)."""
        return caching_enabled(self.name, self.model, self.base_url)

    def build_request(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        tools: list[ToolSchema] | None = None,
        cache_ttl: str | None = None,
    ) -> JSON:
        wire = images_after_tool_results([to_wire_message(m) for m in messages])
        if cache_ttl and self.caches_prompts:
            wire = apply_anthropic_cache_control(wire, cache_ttl, native_anthropic=False)
        # max_tokens, not max_completion_tokens: OpenAI still accepts it for chat models
        # and it is the one field every compatible server (vLLM, llama.cpp, Ollama) knows.
        params: JSON = {"model": self.model, "messages": wire, "max_tokens": max_tokens}
        if tools:
            params["tools"] = tools
        return params

    async def _create(self, body: JSON, timeout: float | None) -> Completion:
        # Through the client's own POST, the SDK's documented door to any endpoint: its
        # auth, retries and errors, without create()'s walk over every parameter and the
        # typed objects it builds of a reply we read five fields of (half a millisecond
        # of the event loop per call, on these machines).
        post = self._client.post(
            "/chat/completions", cast_to=httpx2.Response, body=body, options=_options(timeout)
        )
        response = await self._sdk(post)
        try:
            data = response.json()
        except ValueError as exc:  # not JSON, or not even text (a proxy's error page)
            raise local_failure(
                self.name, "other", f"malformed response: {exc}", detail=JSON_DECODE
            ) from exc
        return self._parse_response(data)

    async def _stream(self, body: JSON, timeout: float | None, on_text: TextCallback) -> Completion:
        reply = _StreamedReply()
        # The same door, streaming: each chunk comes as the JSON it was (``cast_to=object``),
        # not as typed objects built per token (three quarters of a stream's cost on the
        # event loop otherwise: 0.2 ms a chunk here, and every turn streams,
        # docs/design.md#slow-models). The SDK still reads the SSE, its errors and [DONE].
        stream = await self._sdk(
            self._client.post(
                "/chat/completions",
                cast_to=object,
                body={**body, "stream": True, "stream_options": {"include_usage": True}},
                options=_options(timeout),
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
        )
        async with stream:
            chunks = aiter(stream)
            while (chunk := await self._next(chunks)) is not None:
                await self._take_chunk(chunk, reply, on_text)
        if reply.finish_reason is None:
            raise self.stream_closed()
        return reply.completion()

    async def _take_chunk(self, chunk: Any, reply: _StreamedReply, on_text: TextCallback) -> None:
        reply.model = str(_field(chunk, "model") or reply.model)
        usage = _usage_from(_field(chunk, "usage"))
        if usage is not None:  # a later chunk's empty usage keeps the real one
            reply.usage = usage
        for choice in _field(chunk, "choices") or []:
            delta = _field(choice, "delta")
            content = _field(delta, "content") if delta is not None else None
            if isinstance(content, str) and content:
                reply.text.append(content)
                await on_text(content)
            for call in (_field(delta, "tool_calls") if delta is not None else None) or []:
                reply.add_tool_delta(call)
            if _field(choice, "finish_reason"):
                reply.finish_reason = str(_field(choice, "finish_reason"))

    def _parse_response(self, data: Any) -> Completion:
        """A chat completion read as JSON, forgiving about what is missing."""
        reply = data if isinstance(data, dict) else {}
        error = reply.get("error")
        if error:  # OpenRouter reports some upstream failures inside a 200 body
            raise self._described_failure(None, error)
        choices = reply.get("choices") or [{}]
        choice = choices[0] if isinstance(choices, list) and isinstance(choices[0], dict) else {}
        message = choice.get("message")
        if not isinstance(message, dict):
            raise local_failure(
                self.name, "other", "the server returned no message", detail=EMPTY_RESPONSE
            )
        calls = tuple(
            ToolCall(
                call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                str(call["function"].get("name") or ""),
                call["function"].get("arguments") or "",
            )
            for call in (message.get("tool_calls") or [])
            if isinstance(call, dict) and isinstance(call.get("function"), dict)
        )
        return Completion(
            text=message.get("content") or "",
            tool_calls=calls,
            usage=_usage_from(reply.get("usage")),
            finish_reason=_finish_reason(choice.get("finish_reason"), bool(calls)),
            model=reply.get("model") or self.model,
        )

    def _described_failure(
        self, status: int | None, error: Any, headers: Any = None
    ) -> ProviderError:
        if isinstance(error, dict):
            message = str(error.get("message") or error)
            code = error.get("code")
            if status is None and isinstance(code, int | str) and str(code).isdigit():
                status = int(code)  # OpenRouter puts the HTTP status of mid-stream errors here
            return classify_failure(
                self.name,
                status=status,
                error_type=error.get("type"),
                code=str(code) if code is not None else None,
                message=message,
                headers=headers,
                body=error,
                secret=self._secret,
            )
        return classify_failure(
            self.name,
            status=status,
            error_type=None,
            code=None,
            message=str(error or f"HTTP {status}"),
            headers=headers,
            secret=self._secret,
        )

    def _status_failure(self, exc: BaseException) -> ProviderError | None:
        if isinstance(exc, openai.APIStatusError):
            return self._described_failure(exc.status_code, exc.body, exc.response.headers)
        if isinstance(exc, openai.APIResponseValidationError):
            return local_failure(self.name, "other", "the response did not match the API schema")
        if isinstance(exc, openai.APIError):  # an error event inside a stream
            body = exc.body if isinstance(exc.body, dict) else {"message": exc.message}
            return self._described_failure(None, body)
        return None
