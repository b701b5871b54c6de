"""The one interface every LLM provider implements.

Messages going in are OpenAI-style dicts (``role``, ``content``, ``tool_calls``,
``tool_call_id``, ``name``); tool schemas are OpenAI function schemas. Each provider
converts at its own edge and hands back a :class:`Completion`. Every failure leaves a
provider as one :class:`ProviderError` whose ``kind`` says what the caller can do about it.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from agent.messages import JSON, Message, ToolSchema
from nightowl_errors import NightowlError

if TYPE_CHECKING:
    from agent.served_window import ServedWindow

ErrorKind = Literal["overflow", "rate_limit", "overloaded", "auth", "timeout", "network", "other"]

#: Called with each piece of streamed reply text as it arrives.
TextCallback = Callable[[str], Awaitable[None]]


class ProviderError(NightowlError):
    """A provider call failed. ``kind`` is what callers branch on, never the message text.

    ``retry_after`` is set for rate limits when the server said how long to wait;
    ``context_limit`` is set for overflows when the error stated the window, and
    ``prompt_tokens`` when it stated the prompt's size as the server counted it
    (docs/design.md#overflow-errors).
    ``detail`` refines a kind where callers need it (see :mod:`agent.providers.errors`):
    ``stream_closed``, ``json_decode``, ``empty_response`` and ``no_such_model`` (kind
    ``other``), ``quota``
    (kind ``auth``); empty otherwise.
    The message never contains credentials: it is built from the server's error text.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
        context_limit: int | None = None,
        prompt_tokens: int | None = None,
        provider: str = "",
        detail: str = "",
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.status = status
        self.retry_after = retry_after
        self.context_limit = context_limit
        self.prompt_tokens = prompt_tokens
        self.provider = provider
        self.detail = detail

    def __repr__(self) -> str:
        return f"ProviderError(kind={self.kind!r}, status={self.status!r}, message={str(self)!r})"


@dataclass(frozen=True)
class Usage:
    """Token usage normalised across providers.

    ``prompt_tokens`` is the whole input the model saw, cached parts included (Anthropic
    reports them separately; the provider adds them back so the number means the same
    thing everywhere).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as the model produced it

    def parsed_arguments(self) -> JSON:
        """The arguments as a dict; malformed JSON from the model becomes ``{}``."""
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Completion:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish_reason: str = "stop"  # normalised: stop | length | tool_calls | other
    model: str = ""

    def as_message(self) -> Message:
        """The assistant message to append to the transcript (OpenAI style)."""
        message: Message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


@dataclass(frozen=True)
class ProviderSettings:
    """What it takes to build a provider; the gateway fills it from config."""

    provider: str  # "openai" | "anthropic"
    model: str
    api_key: str | None = None
    base_url: str | None = None
    timeout: float = 120.0
    max_retries: int = 2  # handed to the SDK, which does the retrying
    extra_headers: dict[str, str] = field(default_factory=dict)


class Provider(ABC):
    """An LLM endpoint. Implementations: ``openai`` (any compatible server), ``anthropic``."""

    #: The route name used in config keys, telemetry and anchors ("openai", "anthropic").
    name: str
    model: str
    base_url: str | None

    @abstractmethod
    async def complete(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        tools: list[ToolSchema] | None = None,
        on_text: TextCallback | None = None,
        cache_ttl: str | None = None,
        timeout: float | None = None,
    ) -> Completion:
        """Send one request. Streams when ``on_text`` is given, calling it per text delta.

        ``cache_ttl`` ("5m" or "1h") asks for prompt-caching breakpoints where the route
        supports them (docs/design.md#prompt-caching); ``None`` sends no markers.
        Raises :class:`ProviderError` on any failure.
        """

    @property
    def may_cut_prompts(self) -> bool:
        """Whether this server might cut a prompt too long for it and answer anyway
        (docs/design.md#silent-truncation); hosted APIs refuse instead."""
        return False

    async def served_window(self, *, load: bool = False) -> ServedWindow | None:
        """What the server says about this model's window (docs/design.md#served-window);
        None where it cannot be asked (a hosted API: the static table knows it). ``load``:
        a server that loads models on demand loads it first, to say what it serves."""
        return None

    async def listed_models(self) -> list[str] | None:
        """The model ids the API lists for this key: a GET that costs no tokens, so a
        refused key or an API that does not answer is known before anyone writes
        (docs/design.md#hosted-api-at-start). None: no listing. Raises
        :class:`ProviderError`."""
        return None

    @property
    def route(self) -> str:
        """Identifies the model route for usage anchors: a change means old counts are void."""
        return f"{self.name}:{self.base_url or 'default'}:{self.model}"

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most providers hold no resources
        """Release network resources."""
