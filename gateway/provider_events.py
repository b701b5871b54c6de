"""Every model request on the event bus: ``llm:request`` (docs/design.md#events).

The agent knows nothing of the gateway's events, so the gateway hands it providers
wrapped in :class:`ReportedProvider`, one per kind of request (``chat`` for the agent's
turns, ``summary`` for the context engine's). Each request is timed and emitted with its
outcome and usage; the dashboard and ``/metrics`` count them from the bus. The cost on
the request path is one clock read and one ``emit`` (which only schedules the handlers).

With a :class:`~gateway.cost.meter.CostMeter` it is also the one place every model call
is checked against the budgets before it is made and has its cost stored after it
(docs/cost.md#budgets, #what-is-stored): a store read before, a store write after.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any

from agent.messages import Message, ToolSchema
from agent.providers.base import Completion, Provider, ProviderError, TextCallback
from agent.providers.errors import EMPTY_RESPONSE, JSON_DECODE, STREAM_CLOSED
from agent.served_window import ServedWindow
from gateway.build import Providers
from gateway.config.routes import model_label
from gateway.cost.meter import CostMeter, Held
from gateway.events import EventBus, ModelRequest

#: Failures after the server took the request, which a vendor may bill (the call is kept
#: with an unknown cost): a stream that closed, a reply that did not parse or was empty.
#: A timeout, and any failure after text streamed, count too; a refusal (overflow, auth,
#: rate limit, overload) or an unreachable server does not: nothing was done.
BILLED_DETAILS = frozenset({STREAM_CLOSED, JSON_DECODE, EMPTY_RESPONSE})


def billed(error: ProviderError, streamed: int) -> bool:
    """Whether a failed call was taken by the server (docs/cost.md#what-is-stored)."""
    return bool(streamed) or error.kind == "timeout" or error.detail in BILLED_DETAILS


log = logging.getLogger(__name__)


def described(error: ProviderError) -> str:
    """A failed call in one line for the operator: ``other (HTTP 500): down``."""
    status = f" (HTTP {error.status})" if error.status else ""
    words = " ".join(str(error).split())[:200]
    return f"{error.kind}{status}: {words}" if words else f"{error.kind}{status}"


class ReportedProvider(Provider):
    """``inner``, with each request emitted as ``llm:request`` ({kind, provider, model,
    outcome: "ok" or the error kind, seconds, prompt/completion/cache tokens,
    retry_after})."""

    def __init__(
        self, inner: Provider, kind: str, events: EventBus, meter: CostMeter | None = None
    ) -> None:
        self.inner = inner
        self.kind = kind
        self.events = events
        self.meter = meter
        #: The messages of the previous request: its prefix is likely cached.
        self._previous: list[Message] = []

    # What callers read of a provider is the inner one's, now (a model may change).
    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property
    def model(self) -> str:  # type: ignore[override]
        return self.inner.model

    @property
    def base_url(self) -> str | None:  # type: ignore[override]
        return self.inner.base_url

    @property
    def may_cut_prompts(self) -> bool:
        return self.inner.may_cut_prompts

    async def served_window(self, *, load: bool = False) -> ServedWindow | None:
        return await self.inner.served_window(load=load)

    async def listed_models(self) -> list[str] | None:
        return await self.inner.listed_models()

    @property
    def previous(self) -> list[Message]:
        """The messages of the previous request (its prefix is likely cached)."""
        return self._previous

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
        meter = self.meter
        hold = None
        if meter is not None:  # may raise BudgetRefused: no call is made
            hold = await meter.allow(
                self.kind,
                self.inner,
                messages,
                max_tokens=max_tokens,
                tools=tools,
                cache_ttl=cache_ttl,
                previous=self._previous,
            )
        try:
            return await self._complete(
                messages, max_tokens, tools, on_text, cache_ttl, timeout, hold
            )
        finally:
            if meter is not None:
                await meter.release(hold)

    async def _complete(
        self,
        messages: list[Message],
        max_tokens: int,
        tools: list[ToolSchema] | None,
        on_text: TextCallback | None,
        cache_ttl: str | None,
        timeout: float | None,
        hold: Held | None,
    ) -> Completion:
        """The call, timed and emitted; its cost kept, and ``hold`` let go with it."""
        self._previous = list(messages)
        started = time.perf_counter()
        streamed = 0

        async def counted(delta: str) -> None:
            nonlocal streamed
            streamed += len(delta)
            if on_text is not None:
                await on_text(delta)

        try:
            completion = await self.inner.complete(
                messages,
                max_tokens=max_tokens,
                tools=tools,
                on_text=counted if on_text is not None else None,
                cache_ttl=cache_ttl,
                timeout=timeout,
            )
        except ProviderError as error:
            said = described(error)
            log.warning("%s call to %s failed: %s", self.kind, self.inner.model, said)
            self._emit(started, error.kind, retry_after=error.retry_after, error=said)
            if self.meter is not None and billed(error, streamed):
                await self.meter.failed(self.kind, self.inner, messages, tools, streamed, hold=hold)
            raise
        except asyncio.CancelledError:
            if self.meter is not None:  # cut off mid-call: the server may bill what it did
                await asyncio.shield(
                    self.meter.failed(self.kind, self.inner, messages, tools, streamed, hold=hold)
                )
            raise
        usage = completion.usage
        cost = None
        if self.meter is not None:
            cost = await self.meter.record(self.kind, self.inner, usage, cache_ttl, hold=hold)
        self._emit(
            started,
            "ok",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            cache_read_tokens=usage.cache_read_tokens if usage else 0,
            cost=None if cost is None else str(cost),
        )
        return completion

    def _emit(self, started: float, outcome: str, **fields: Any) -> None:
        self.events.emit(
            ModelRequest(
                kind=self.kind,
                provider=self.inner.name,
                model=self.inner.model,
                outcome=outcome,
                seconds=round(time.perf_counter() - started, 4),
                label=model_label(self.inner.model, self.inner.name, self.inner.base_url),
                **fields,
            )
        )

    async def aclose(self) -> None:
        """Nothing: the inner provider is closed by whoever built it."""


def for_summaries(
    providers: Providers, events: EventBus, meter: CostMeter | None = None
) -> Providers:
    """``providers`` as the context engine gets them: its main and auxiliary models'
    requests are summaries."""
    auxiliary = providers.auxiliary
    return replace(
        providers,
        main=ReportedProvider(providers.main, "summary", events, meter),
        auxiliary=ReportedProvider(auxiliary, "summary", events, meter) if auxiliary else None,
    )
