"""A fake LLM server speaking both the OpenAI chat-completions and Anthropic messages APIs.

One aiohttp app on ``127.0.0.1`` and a random free port serves the real SDKs:

- ``POST /v1/chat/completions`` (OpenAI; streaming and not, ``stream_options.include_usage``;
  also under ``/openrouter/api/v1`` so a base URL can look like OpenRouter's)
- ``POST /v1/messages`` (Anthropic; streaming and not)
- ``GET /v1/models`` (both list shapes at once, for reachability checks)
- ``POST /v1/audio/transcriptions`` (``llm.transcriptions``: tests/fakes/transcription.py)

Usage::

    async with FakeLLM() as llm:              # or the ``fake_llm`` fixture
        llm.script(Reply("hi"), Reply(tool_calls=[("current_time", {})]))
        AsyncOpenAI(base_url=llm.openai_base_url, api_key="k", max_retries=0)
        AsyncAnthropic(base_url=llm.anthropic_base_url, api_key="k", max_retries=0)
        llm.requests[-1].body                 # what the SDK sent
        await llm.wait_for_requests(3)        # no sleeps: wait for arrivals

``FakeLLM(responder=None, context_window=None, api_key=None, models=("fake-model",),
record_limit=None)``; attributes ``requests``, ``request_count``, ``responder``,
``context_window``, ``api_key``, ``count_tokens``, ``openai_base_url``,
``openrouter_base_url``, ``anthropic_base_url``, ``port``.

Replies come from the :meth:`FakeLLM.script` queue first, then from ``responder`` (a
function of the :class:`Recorded` request returning a :class:`Reply`, sync or async;
the default echoes the last user text). ``Reply`` shapes errors per API: give
``status`` (400/401/403/429/500/503/529...) and optionally ``error_type``,
``error_message``, ``error_code``, ``retry_after``; ``stream_error`` fails a streamed
reply after its first text chunk (Anthropic ``event: error``, OpenAI ``data: {"error"}``);
a non-streamed request with ``stream_error`` gets it as a plain error response
(529 for ``overloaded_error``, else 500). ``hang=True`` never answers (until stop);
``truncate=True`` ends a stream cleanly but before it finished; ``raw_body`` is sent
verbatim (malformed JSON, an HTML 502 from a proxy, another server's error shape).

**A slow model** (``tokens_per_second``) and **a stalled one** (``stall_after``) behave
as the local servers do. Each streams one chunk per token and nothing between them: no
keep-alive, no progress while the model loads or reads the prompt. vLLM sends its first
chunk (the role) with the first generated token, then one chunk per token
(``vllm/entrypoints/openai/chat_completion/serving.py``,
``chat_completion_stream_generator``); llama.cpp's server "stays silent until the first
token is generated" (ggml-org/llama.cpp#21952) unless a request asks for
``return_progress`` (ggml-org/llama.cpp#15827), and answers 503 "Loading model" while it
loads (mostlygeek/llama-swap#146); Ollama loads the model (``scheduleRunner`` in
``server/routes.go``'s ChatHandler) before it writes anything, even headers, then sends a
chunk per token (load progress in the stream is a proposal for its native API only,
ollama/ollama#11315). Without streaming each answers once the whole reply is generated.
So here: ``delay`` is the silence before the first token (a model loading, a long
prompt); the reply's words then go out one per chunk, ``1 / tokens_per_second`` apart,
and a non-streamed request gets its answer when the last of them would have gone.
``stall_after=N`` sends N tokens and then nothing more, the connection open, until the
client gives up or the fake stops (a non-streamed request is never answered). When each
token left is in ``Recorded.tokens`` (``time.monotonic()``, text), and when a whole
answer left in ``Recorded.answered_at``: the fake Telegram server stamps its messages on
the same clock.

Prompt tokens are estimated like SPEC T1: ``(chars + 3) // 4`` over roles, text, tool
call names/arguments, tool ids, the system prompt and the tools JSON, with a flat 1500
tokens per image (``FakeLLM.count_tokens`` can be replaced). With ``context_window``
set, a request whose estimate + max_tokens exceeds it is refused with that API's real
overflow error (OpenAI ``context_length_exceeded``, Anthropic "prompt is too long" /
"input length and `max_tokens` exceed context limit"), stating the window. Such
refusals (and the 401 for a wrong ``api_key``) come before the script is consulted, so
scripted replies go to requests that fit.
Usage ``"auto"`` reports that estimate and ``len(text) // 4 + 1`` completion tokens;
a ``(prompt, completion)`` tuple is the normalised prompt total (Anthropic's
``input_tokens`` is sent as prompt minus ``cache_read`` minus ``cache_write``); ``None``
sends no usage at all (Anthropic streams, which the SDK cannot read without usage, get
zeros instead).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import re
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import web

from tests.fakes.transcription import FakeTranscriptions
from tests.waiting import CEILING

IMAGE_TOKENS = 1500

DEFAULT_ERROR_TYPES = {
    "openai": {
        400: "invalid_request_error",
        401: "invalid_request_error",
        403: "permission_error",
        404: "invalid_request_error",
        429: "rate_limit_exceeded",
        500: "server_error",
        503: "server_error",
        529: "overloaded_error",
    },
    "anthropic": {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        503: "api_error",
        529: "overloaded_error",
    },
}
DEFAULT_ERROR_MESSAGES = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "You do not have permission to use this model.",
    404: "Not found.",
    429: "Rate limit reached. Please try again later.",
    500: "The server had an error while processing your request.",
    503: "The engine is currently overloaded, please try again later.",
    529: "Overloaded",
}


@dataclass
class Reply:
    """One scripted answer. Everything defaults to a plain 200 text reply."""

    text: str = "ok"
    #: (name, arguments) pairs; arguments may be a JSON string (sent verbatim, OpenAI only).
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    #: "stop" | "length" | "tool_calls"; None picks "tool_calls" when there are calls.
    finish_reason: str | None = None
    usage: tuple[int, int] | Literal["auto"] | None = "auto"
    cache_read: int = 0
    cache_write: int = 0
    status: int = 200
    error_type: str | None = None
    error_message: str | None = None
    error_code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    retry_after: float | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    hang: bool = False
    #: Pace: one token (a word) per chunk, this many a second (see the module docstring).
    tokens_per_second: float | None = None
    #: Tokens sent before the stream goes silent for good (see the module docstring).
    stall_after: int | None = None
    stream_error: str | None = None
    truncate: bool = False
    #: Sent verbatim with ``status`` (as an SSE body for a 200 stream): malformed replies.
    raw_body: str | bytes | None = None  # bytes: sent as they are, not even UTF-8
    model: str | None = None

    @property
    def resolved_finish_reason(self) -> str:
        return self.finish_reason or ("tool_calls" if self.tool_calls else "stop")

    @property
    def per_token(self) -> bool:
        """Streamed one token per chunk, as a local server does (paced or stalling)."""
        return self.tokens_per_second is not None or self.stall_after is not None

    def pieces(self) -> list[str]:
        """The text deltas of a stream: a token (a word) each when ``per_token``, else a
        few (bounded, so long replies stay cheap)."""
        if not self.per_token:
            return _text_pieces(self.text)
        words = re.findall(r"\s*\S+", self.text)
        if not words:
            return [self.text] if self.text else []
        return [*words[:-1], words[-1] + self.text[len("".join(words)) :]]


@dataclass
class Recorded:
    """One request as the fake received it."""

    api: Literal["openai", "anthropic"]
    body: dict[str, Any]
    headers: dict[str, str]
    prompt_tokens: int
    #: The prompt's tokens as sent, when the server cut it (tests/fakes/local_servers.py):
    #: then ``body`` is what the model saw and ``prompt_tokens`` what it reported.
    sent_tokens: int | None = None
    #: (``time.monotonic()``, text) of each streamed text delta, when it was written.
    tokens: list[tuple[float, str]] = field(default_factory=list)
    #: When the whole answer (a non-streamed body, a stream's last event) was written.
    answered_at: float | None = None

    @property
    def cut(self) -> bool:
        return self.sent_tokens is not None

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages") or []

    @property
    def max_tokens(self) -> int:
        return int(self.body.get("max_tokens") or self.body.get("max_completion_tokens") or 0)

    @property
    def api_key(self) -> str | None:
        auth = self.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:]
        return self.headers.get("x-api-key")

    @property
    def last_user_text(self) -> str:
        """Text of the last user message (tool results excluded), either API's shape."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                text = _text_of(message.get("content"), include_tool_results=False)
                if text:
                    return text
        return ""

    @property
    def all_text(self) -> str:
        """Every piece of text in the request (system, messages), newline-joined."""
        parts = [_text_of(self.body.get("system"))]
        parts += [_text_of(m.get("content")) for m in self.messages]
        return "\n".join(p for p in parts if p)


Responder = Callable[[Recorded], "Reply | Awaitable[Reply]"]


def echo_responder(request: Recorded) -> Reply:
    """The default: a short text reply quoting the last user message."""
    return Reply(text=f"echo: {request.last_user_text[:200]}")


def _text_of(content: Any, include_tool_results: bool = True) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    pieces: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            pieces.append(block.get("text", ""))
        elif block.get("type") == "tool_result" and include_tool_results:
            pieces.append(_text_of(block.get("content")))
    return "\n".join(p for p in pieces if p)


def estimate_request_tokens(api: str, body: dict[str, Any]) -> int:
    """(chars + 3) // 4 over what a tokenizer would see; images count a flat 1500."""
    chars = 0
    images = 0
    stack: list[Any] = [body.get("system") or "", body.get("messages") or []]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            kind = item.get("type")
            if kind in ("image", "image_url"):
                images += 1
                continue
            for key, value in item.items():
                if key in ("cache_control", "type", "index"):
                    continue
                if key == "input" and isinstance(value, dict):
                    chars += len(json.dumps(value))
                else:
                    stack.append(value)
    if body.get("tools"):
        chars += len(json.dumps(body["tools"]))
    return (chars + 3) // 4 + images * IMAGE_TOKENS


class FakeLLM:
    """Both LLM APIs on one local port. See the module docstring for the whole contract."""

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        context_window: int | None = None,
        api_key: str | None = None,
        models: tuple[str, ...] = ("fake-model",),
        record_limit: int | None = None,
    ) -> None:
        self.responder: Responder = responder or echo_responder
        self.context_window = context_window
        #: When set, requests carrying another key get each API's 401.
        self.api_key = api_key
        self.models = models
        self.count_tokens: Callable[[str, dict[str, Any]], int] = estimate_request_tokens
        #: The requests received, oldest first (only the last ``record_limit`` when set,
        #: so a thousand-request simulation does not hold every transcript in memory).
        self.requests: list[Recorded] = []
        self.record_limit = record_limit
        #: How many requests arrived in total, whatever ``record_limit`` kept.
        self.request_count = 0
        #: How many were refused as too long for the window.
        self.refusals = 0
        self.port = 0
        self._queue: list[Reply] = []
        self._ids = itertools.count(1)
        self._arrived = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._runner: web.AppRunner | None = None
        #: ``POST /v1/audio/transcriptions`` (tests/fakes/transcription.py).
        self.transcriptions = FakeTranscriptions()

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def openrouter_base_url(self) -> str:
        """An OpenAI route whose URL says "openrouter" (enables OpenRouter-only behaviour)."""
        return f"http://127.0.0.1:{self.port}/openrouter/api/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        """Queue replies, consumed in order before the responder is asked."""
        self._queue.extend(replies)

    async def wait_for_requests(self, count: int, within: float = CEILING) -> list[Recorded]:
        """Wait until at least ``count`` requests have arrived (raises TimeoutError)."""
        async with self._arrived:
            await asyncio.wait_for(
                self._arrived.wait_for(lambda: self.request_count >= count), within
            )
        return self.requests

    async def start(self) -> FakeLLM:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle_openai)
        app.router.add_post("/openrouter/api/v1/chat/completions", self._handle_openai)
        app.router.add_post("/v1/messages", self._handle_anthropic)
        app.router.add_get("/v1/models", self._handle_models)
        self.transcriptions.install(app)
        self.install(app)
        # A small shutdown_timeout so stop() never waits out a hanging or streaming reply.
        self._runner = web.AppRunner(
            app, shutdown_timeout=0.2, handler_cancellation=True, access_log=None
        )
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()
        return self

    def install(self, app: web.Application) -> None:
        """More routes, for a fake of one particular server (tests/fakes/local_servers.py)."""

    def admit(self, recorded: Recorded) -> Recorded:
        """What the model sees of a request: here all of it; a server that cuts prompts
        silently returns the cut one (tests/fakes/local_servers.py)."""
        return recorded

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeLLM:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- request handling ------------------------------------------------------------

    async def _handle_openai(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "openai")

    async def _handle_anthropic(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, "anthropic")

    async def _handle_models(self, request: web.Request) -> web.StreamResponse:
        # Both APIs want the key for their listing too, and refuse another with the 401
        # their other endpoints give (platform.openai.com/docs/api-reference/models/list,
        # docs.anthropic.com/en/api/models-list): the listing is how a refused key is
        # found before a message costs anything.
        api: Literal["openai", "anthropic"] = (
            "anthropic" if "anthropic-version" in request.headers else "openai"
        )
        headers = {k.lower(): v for k, v in request.headers.items()}
        if self.api_key is not None and Recorded(api, {}, headers, 0).api_key != self.api_key:
            return _error_response(api, Reply(status=401))
        data = [
            {"id": m, "object": "model", "type": "model", "display_name": m, "created": 0}
            | {"created_at": "2025-01-01T00:00:00Z", "owned_by": "fake"}
            for m in self.models
        ]
        return web.json_response(
            {"object": "list", "data": data, "has_more": False, "first_id": None}
        )

    async def _handle(self, request: web.Request, api: str) -> web.StreamResponse:
        body = await request.json()
        headers = {k.lower(): v for k, v in request.headers.items()}
        recorded = self.admit(Recorded(api, body, headers, self.count_tokens(api, body)))  # type: ignore[arg-type]
        async with self._arrived:
            self.requests.append(recorded)
            self.request_count += 1
            if self.record_limit is not None and len(self.requests) > self.record_limit:
                del self.requests[: len(self.requests) - self.record_limit]
            self._arrived.notify_all()
        # Refusals a real server makes before generating leave the script untouched.
        if self.api_key is not None and recorded.api_key != self.api_key:
            return _error_response(api, Reply(status=401))
        overflow = self._missing_model_reply(recorded) or self._overflow_reply(recorded)
        if overflow is not None:
            self.refusals += 1
            if overflow.raw_body is not None:  # another server's own error shape
                return await self._respond(request, recorded, overflow)
            return _error_response(api, overflow)
        reply = await self._next_reply(recorded)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.hang:
            await self._stopping.wait()
            return web.Response(status=503, text="shutting down")
        return await self._respond(request, recorded, reply)

    async def _respond(
        self, request: web.Request, recorded: Recorded, reply: Reply
    ) -> web.StreamResponse:
        api = recorded.api
        if reply.raw_body is not None:
            streamed = recorded.stream and reply.status == 200
            return web.Response(
                status=reply.status,
                body=raw if isinstance(raw := reply.raw_body, bytes) else raw.encode(),
                content_type="text/event-stream" if streamed else "application/json",
                headers=reply.headers,
            )
        if reply.status != 200:
            return _error_response(api, reply)
        if reply.stream_error and not recorded.stream:
            status = 529 if reply.stream_error == "overloaded_error" else 500
            return _error_response(api, Reply(status=status, error_type=reply.stream_error))
        usage = self._usage(recorded, reply)
        wire = OpenAIWire if api == "openai" else AnthropicWire
        shaper = wire(reply, recorded, usage, next(self._ids))
        if not recorded.stream:
            await self._until_generated(reply)
            recorded.answered_at = time.monotonic()
            return web.json_response(shaper.message(), headers=reply.headers)
        return await self._stream(request, shaper, reply, recorded)

    async def _until_generated(self, reply: Reply) -> None:
        """A non-streamed answer leaves when its last token is generated; a stalled
        generation never ends."""
        if reply.stall_after is not None:
            await self._stopping.wait()
        elif reply.tokens_per_second:
            await asyncio.sleep((len(reply.pieces()) - 1) / reply.tokens_per_second)

    async def _next_reply(self, recorded: Recorded) -> Reply:
        if self._queue:
            return self._queue.pop(0)
        reply = self.responder(recorded)
        if inspect.isawaitable(reply):
            reply = await reply
        return reply

    def _missing_model_reply(self, recorded: Recorded) -> Reply | None:
        """A refusal of a model the server does not have (the local servers'; this fake
        answers any name)."""
        return None

    def _overflow_reply(self, recorded: Recorded) -> Reply | None:
        window = self.context_window
        if window is None:
            return None
        prompt, out = recorded.prompt_tokens, recorded.max_tokens
        if prompt + out <= window:
            return None
        if recorded.api == "anthropic":
            if prompt > window:
                text = f"prompt is too long: {prompt} tokens > {window} maximum"
            else:
                text = (
                    f"input length and `max_tokens` exceed context limit: {prompt} + {out} "
                    f"> {window}, decrease input length or `max_tokens` and try again"
                )
            return Reply(status=400, error_message=text)
        text = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + out} tokens ({prompt} in the messages, {out} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return Reply(status=400, error_message=text, error_code="context_length_exceeded")

    def _usage(self, recorded: Recorded, reply: Reply) -> tuple[int, int] | None:
        if reply.usage == "auto":
            completion = len(reply.text) // 4 + 1
            completion += sum(len(json.dumps(args)) // 4 for _, args in reply.tool_calls)
            return (recorded.prompt_tokens, completion)
        return reply.usage

    async def _stream(
        self,
        request: web.Request,
        shaper: OpenAIWire | AnthropicWire,
        reply: Reply,
        recorded: Recorded,
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            | reply.headers
        )
        await response.prepare(request)
        events = shaper.events()
        last_token = max((i for i, e in enumerate(events) if isinstance(e, Token)), default=-1)
        for index, event in enumerate(events):
            if reply.chunk_delay and index:
                await asyncio.sleep(reply.chunk_delay)
            if (
                reply.stall_after is not None
                and len(recorded.tokens) >= reply.stall_after
                and (isinstance(event, Token) or index > last_token)
            ):
                await self._stopping.wait()  # silence, the connection open
                return response
            if isinstance(event, Token) and recorded.tokens and reply.tokens_per_second:
                await asyncio.sleep(1 / reply.tokens_per_second)
            await response.write(event.encode())
            if isinstance(event, Token):
                recorded.tokens.append((time.monotonic(), event.text))
        await response.write_eof()
        recorded.answered_at = time.monotonic()
        return response


def _error_response(api: str, reply: Reply) -> web.Response:
    status = reply.status
    error_type = reply.error_type or DEFAULT_ERROR_TYPES[api].get(
        status, "api_error" if api == "anthropic" else "server_error"
    )
    message = reply.error_message or DEFAULT_ERROR_MESSAGES.get(status, f"HTTP {status}")
    headers = dict(reply.headers)
    if reply.retry_after is not None:
        headers.setdefault("retry-after", f"{reply.retry_after:g}")
    if api == "anthropic":
        payload: dict[str, Any] = {
            "type": "error",
            "error": {"type": error_type, "message": message},
        }
    else:
        code = reply.error_code
        if code is None and status == 401:
            code = "invalid_api_key"
        payload = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return web.json_response(payload, status=status, headers=headers)


class Token(str):
    """An SSE event carrying one text delta of the reply: paced, stalled and timed."""

    text: str

    def __new__(cls, event: str, text: str) -> Token:
        token = super().__new__(cls, event)
        token.text = text
        return token


def _sse(data: dict[str, Any], event: str | None = None) -> str:
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {json.dumps(data)}\n\n"


def _text_pieces(text: str, max_pieces: int = 8) -> list[str]:
    """Split text into a few word-aligned deltas (bounded, so long replies stay cheap)."""
    words = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    size = max(1, -(-len(words) // max_pieces))
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def _args_text(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args)


class OpenAIWire:
    """OpenAI chat.completions payloads for one reply."""

    def __init__(self, reply: Reply, request: Recorded, usage: tuple[int, int] | None, n: int):
        self.reply, self.request, self.usage = reply, request, usage
        self.id = f"chatcmpl-fake{n}"
        self.model = reply.model or request.body.get("model", "fake-model")
        self.calls = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": name, "arguments": _args_text(args)},
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]

    def _usage(self) -> dict[str, Any] | None:
        if self.usage is None:
            return None
        prompt, completion = self.usage
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": self.reply.cache_read},
        }

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text or None}
        if self.calls:
            message["tool_calls"] = self.calls
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": self.reply.resolved_finish_reason}
            ],
        }
        if self.usage is not None:
            payload["usage"] = self._usage()
        return payload

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse(self._envelope([choice]))

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": choices,
        }

    def events(self) -> list[str]:
        reply = self.reply
        out = [self._chunk({"role": "assistant", "content": ""})]
        for piece in reply.pieces()[:1] if reply.stream_error else reply.pieces():
            out.append(Token(self._chunk({"content": piece}), piece))
        if reply.stream_error:
            error = {"message": reply.error_message or "Overloaded", "type": reply.stream_error}
            return [*out, _sse({"error": error | {"code": reply.error_code}})]
        for i, call in enumerate(self.calls):
            head = {"index": i, "id": call["id"], "type": "function"}
            out.append(
                self._chunk(
                    {
                        "tool_calls": [
                            head | {"function": {"name": call["function"]["name"], "arguments": ""}}
                        ]
                    }
                )
            )
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            for part in (arguments[:half], arguments[half:]):
                out.append(
                    self._chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]})
                )
        if reply.truncate:
            return out
        out.append(self._chunk({}, reply.resolved_finish_reason))
        include_usage = (self.request.body.get("stream_options") or {}).get("include_usage")
        if include_usage and self.usage is not None:
            out.append(_sse(self._envelope([]) | {"usage": self._usage()}))
        out.append("data: [DONE]\n\n")
        return out


ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


class AnthropicWire:
    """Anthropic messages payloads for one reply."""

    def __init__(self, reply: Reply, request: Recorded, usage: tuple[int, int] | None, n: int):
        self.reply, self.request, self.usage = reply, request, usage
        self.id = f"msg_fake{n}"
        self.model = reply.model or request.body.get("model", "fake-model")
        self.calls = [
            {
                "type": "tool_use",
                "id": f"toolu_{n}_{i}",
                "name": name,
                "input": json.loads(args) if isinstance(args, str) else args,
            }
            for i, (name, args) in enumerate(reply.tool_calls)
        ]
        self.stop_reason = ANTHROPIC_STOP.get(reply.resolved_finish_reason, "end_turn")

    def _usage(self) -> dict[str, Any] | None:
        if self.usage is None:
            return None
        prompt, completion = self.usage
        read, write = self.reply.cache_read, self.reply.cache_write
        return {
            "input_tokens": max(0, prompt - read - write),
            "output_tokens": completion,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
        }

    def _message(self, content: list[dict[str, Any]], stop_reason: str | None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
        }
        usage = self._usage()
        if usage is not None:
            payload["usage"] = usage
        return payload

    def message(self) -> dict[str, Any]:
        text = [{"type": "text", "text": self.reply.text}] if self.reply.text else []
        return self._message(text + self.calls, self.stop_reason)

    def events(self) -> list[str]:
        reply = self.reply
        start = self._message([], None)
        # The SDK cannot assemble a stream without usage (the real API always sends it),
        # so "no usage" is streamed as zeros.
        start["usage"] = start.get("usage", {"input_tokens": 0}) | {"output_tokens": 1}
        out = [_sse({"type": "message_start", "message": start}, "message_start")]
        out.append(_sse({"type": "ping"}, "ping"))
        index = 0
        if reply.text:
            block = {"type": "text", "text": ""}
            out.append(
                _sse(
                    {"type": "content_block_start", "index": 0, "content_block": block},
                    "content_block_start",
                )
            )
            pieces = reply.pieces()
            for piece in pieces[:1] if reply.stream_error else pieces:
                delta = {"type": "text_delta", "text": piece}
                event = {"type": "content_block_delta", "index": 0, "delta": delta}
                out.append(Token(_sse(event, "content_block_delta"), piece))
        if reply.stream_error:
            error = {"type": reply.stream_error, "message": reply.error_message or "Overloaded"}
            return [*out, _sse({"type": "error", "error": error}, "error")]
        if reply.text:
            out.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
            index = 1
        for offset, call in enumerate(self.calls):
            i = index + offset
            block = call | {"input": {}}
            out.append(
                _sse(
                    {"type": "content_block_start", "index": i, "content_block": block},
                    "content_block_start",
                )
            )
            arguments = json.dumps(call["input"])
            delta = {"type": "input_json_delta", "partial_json": arguments}
            out.append(
                _sse(
                    {"type": "content_block_delta", "index": i, "delta": delta},
                    "content_block_delta",
                )
            )
            out.append(_sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
        if reply.truncate:
            return out
        delta_event: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
        }
        delta_event["usage"] = {"output_tokens": self.usage[1] if self.usage else 0}
        out.append(_sse(delta_event, "message_delta"))
        out.append(_sse({"type": "message_stop"}, "message_stop"))
        return out
