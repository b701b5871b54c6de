"""What every provider built on an official SDK client shares.

The OpenAI and Anthropic SDKs are shaped alike: a client built from a key, a base URL, a
timeout and a retry count; a create call and a streaming call; one exception hierarchy.
:class:`SDKProvider` owns that shape once — the client, the translation of every SDK
failure into one :class:`ProviderError` (the way python-telegram-bot's ``BaseRequest``
owns status mapping), the streaming read loop and closing — so a provider states only
what differs: how a request is built, how a response is read.
"""

from __future__ import annotations

import json
import logging
import ssl
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable
from types import ModuleType
from typing import Any, ClassVar, TypeVar

import httpx2

from agent.messages import JSON, Message, ToolSchema
from agent.providers.base import (
    Completion,
    Provider,
    ProviderError,
    ProviderSettings,
    TextCallback,
)
from agent.providers.errors import STREAM_CLOSED, local_failure, transport_failure
from agent.tls import tls_context

log = logging.getLogger(__name__)

#: A keyless client cannot even build a request (the SDKs refuse); this one gets an honest
#: 401 from a server that wants a key, and nothing at all from a local one that does not.
PLACEHOLDER_KEY = "no-key-configured"
#: How long the model listing may take (asked at start, beside it, not before it).
LISTING_SECONDS = 10.0

T = TypeVar("T")


class SDKProvider(Provider):
    """A :class:`Provider` over an official SDK client (see the module docstring)."""

    #: The SDK module (``openai`` or ``anthropic``): its exception classes are used.
    sdk: ModuleType
    #: The SDK's async client class and the root of its exceptions.
    client_class: type
    sdk_error: type[BaseException]
    #: The provider's own API's host.
    default_host: str
    #: False once the server refused a stream it would answer whole.
    streams: bool = True

    def __init__(self, settings: ProviderSettings) -> None:
        self.model = settings.model
        self.base_url = settings.base_url
        #: Seconds a request may wait for its next bytes: both SDKs hand the number to
        #: httpx2 as connect, write and read timeouts, and a read timeout bounds each wait
        #: on the socket, not the whole request (docs/design.md#slow-models). A model that
        #: loads on demand is silent until loaded: this must cover that too.
        self.timeout = settings.timeout
        self._secret = settings.api_key
        # JSON errors too: a malformed body or stream event raises them from inside the SDK;
        # and the transport's, which the anthropic SDK lets out of a stream unwrapped.
        self._failures: tuple[type[BaseException], ...] = (
            self.sdk_error,
            json.JSONDecodeError,
            httpx2.RequestError,  # a transport's failure, a body that will not decode
            ssl.SSLError,
        )
        self._client: Any = self.client_class(
            api_key=settings.api_key or PLACEHOLDER_KEY,
            base_url=settings.base_url,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            default_headers=settings.extra_headers or None,
            # The SDK's own default client (its limits, redirects), on the shared context.
            http_client=self.sdk.DefaultAsyncHttpxClient(verify=tls_context()),
        )

    #: The model listing, under the client's base URL, and its query.
    models_path = "/models"
    models_query: ClassVar[dict[str, int]] = {}

    async def listed_models(self) -> list[str] | None:
        listing = self._client.get(
            self.models_path,
            cast_to=httpx2.Response,
            options={"params": self.models_query, "timeout": LISTING_SECONDS, "max_retries": 0},
        )
        try:
            response = await self._sdk(listing)
        except ProviderError as exc:
            if exc.status in (404, 405):  # no listing there
                return None
            raise
        try:
            data = response.json().get("data")
        except (ValueError, AttributeError):  # not the listing's JSON: nothing said
            return None
        if not isinstance(data, list):
            return None
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]

    # -- what a provider states ------------------------------------------------------------

    @abstractmethod
    def build_request(
        self,
        messages: list[Message],
        *,
        max_tokens: int,
        tools: list[ToolSchema] | None = None,
        cache_ttl: str | None = None,
    ) -> JSON:
        """The request body as sent (minus streaming options)."""

    @abstractmethod
    async def _create(self, body: JSON, timeout: float | None) -> Completion:
        """One non-streaming call (through :meth:`_sdk`), read into a Completion."""

    @abstractmethod
    async def _stream(self, body: JSON, timeout: float | None, on_text: TextCallback) -> Completion:
        """One streaming call, calling ``on_text`` per text delta (reads via :meth:`_next`)."""

    @abstractmethod
    def _status_failure(self, exc: BaseException) -> ProviderError | None:
        """An SDK error that carries the server's own error (status, type, message)."""

    # -- shared ----------------------------------------------------------------------------

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
        body = self.build_request(messages, max_tokens=max_tokens, tools=tools, cache_ttl=cache_ttl)
        if on_text is None or not self.streams:
            return await self._create(body, timeout)
        try:
            return await self._stream(body, timeout, on_text)
        except ProviderError as exc:
            if not refuses_streaming(exc):
                raise
            # It answers, only not as a stream (an older llama.cpp with tools, a proxy
            # that knows no stream_options): from now on it is read whole.
            log.warning("%s does not stream (%s): reading its replies whole", self.name, exc)
            self.streams = False
            return await self._create(body, timeout)

    async def _sdk(self, call: Awaitable[T], *, stream_started: bool = False) -> T:
        """Await an SDK call; whatever the SDK raises leaves as one ProviderError."""
        try:
            return await call
        except self._failures as exc:
            raise self.translate(exc, stream_started=stream_started) from exc

    async def _next(self, items: AsyncIterator[T]) -> T | None:
        """The next streamed item, or None at the end. Only the SDK's read is translated:
        an exception from the caller's ``on_text`` propagates unchanged."""
        return await self._sdk(anext(items, None), stream_started=True)

    def stream_closed(self) -> ProviderError:
        return local_failure(
            self.name, "other", "the stream ended before the reply finished", detail=STREAM_CLOSED
        )

    def translate(self, exc: BaseException, *, stream_started: bool) -> ProviderError:
        """Any SDK failure as a :class:`ProviderError` (secrets redacted)."""
        transport = transport_failure(
            self.name,
            exc,
            sdk=self.sdk,
            stream_started=stream_started,
            # The host the SDK really asked: its own variable (OPENAI_BASE_URL...) may
            # point elsewhere when no base URL is configured.
            target=self.base_url or self._client.base_url.host or self.default_host,
            secret=self._secret,
        )
        if transport is not None:
            return transport
        described = self._status_failure(exc)
        if described is not None:
            return described
        return local_failure(
            self.name, "other", str(exc) or type(exc).__name__, secret=self._secret
        )

    async def aclose(self) -> None:
        await self._client.close()


def refuses_streaming(exc: ProviderError) -> bool:
    """A refusal of the stream itself, not of the request: llama.cpp's 500 "Cannot use
    tools with stream" (its builds of early 2025), a gateway's 400 "Unknown parameter:
    'stream_options'"."""
    return exc.status in (400, 500) and exc.kind != "overflow" and "stream" in str(exc).lower()
