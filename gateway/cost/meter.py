"""The budget check before a model call and the cost record after it
(docs/cost.md#budgets, #what-is-stored).

Every model call passes :class:`gateway.provider_events.ReportedProvider`, which asks
:meth:`CostMeter.allow` first and calls :meth:`CostMeter.record` with the usage after.
Whose call it is comes from :mod:`gateway.cost.payer`.

- A turn's call (``chat``) is checked against all three budgets: the person's day, the
  chat's day, the bot's month, with the most the call can cost
  (:func:`agent.cost.budget.estimate_call`).
- Housekeeping (``summary``, ``flush``) belongs to the chat and no person: it still runs
  for a person over budget, and stops only when the chat's day or the bot's month is
  used up (an unknown estimate: :func:`~agent.cost.budget.decide` refuses it only then).

A refusal raises :class:`BudgetRefused` (a :class:`ProviderError` of kind ``other``, so
the agent ends the turn the way it ends any failed call), carrying the one sentence for
the person. The operator hears once per budget and period: one WARNING line and a
``budget:reached`` event the dashboard counts.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal

from agent.cost.budget import Budgets, Verdict, decide, estimate_call, format_usd
from agent.cost.prices import CacheTTL, Price, cost_of, transcription_cost
from agent.messages import Message, ToolSchema
from agent.providers.base import Provider, ProviderError, Usage
from gateway.cost.payer import current
from gateway.cost.pricing import Pricing
from gateway.events import BudgetReached, EventBus, ModelRequest
from gateway.store import CostRecord, CostStore, StoreError

log = logging.getLogger(__name__)

#: Tokens an image counts for in the estimate (its bytes are not its tokens).
IMAGE_TOKENS = 1_500
HOUSEKEEPING = ("summary", "flush")


class BudgetRefused(ProviderError):
    """A budget refused the call before it was made; ``sentence`` is for the person."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__("other", verdict.message, detail="budget")
        self.verdict = verdict
        self.sentence = verdict.message


def rough_tokens(messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None) -> int:
    """The prompt's size for the estimate: 4 characters a token, an image
    :data:`IMAGE_TOKENS` (docs/cost.md#the-pre-flight-estimate)."""
    chars, images = 0, 0
    for message in messages:
        chars += len(str(message.get("role", ""))) + 4
        content = message.get("content")
        if isinstance(content, list):
            for part in content:
                if part.get("type") == "image_url":
                    images += 1
                else:
                    chars += len(str(part.get("text", "")))
        elif content:
            chars += len(str(content))
        if message.get("tool_calls"):
            chars += len(json.dumps(message["tool_calls"]))
        chars += len(str(message.get("tool_call_id") or ""))
    if tools:
        chars += len(json.dumps(list(tools)))
    return (chars + 3) // 4 + images * IMAGE_TOKENS


def shared_prefix(before: Sequence[Message], now: Sequence[Message]) -> list[Message]:
    """The messages ``now`` starts with that the previous request also started with."""
    same: list[Message] = []
    for old, new in zip(before, now, strict=False):
        if old != new:
            break
        same.append(new)
    return same


class CostMeter:
    """Budgets before, records after, for every model call of one gateway."""

    def __init__(
        self,
        costs: CostStore,
        pricing: Pricing,
        events: EventBus,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.costs = costs
        self.pricing = pricing
        self.events = events
        self.clock = clock
        #: (budget, subject, period) already told to the operator.
        self._told: set[tuple[str, str, str]] = set()

    @property
    def budgets(self) -> Budgets:
        return self.pricing.budgets

    def price(self, provider: Provider) -> Price | None:
        return self.pricing.price(provider.name, provider.model, provider.base_url)

    async def allow(
        self,
        kind: str,
        provider: Provider,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        tools: Sequence[ToolSchema] | None,
        cache_ttl: str | None,
        previous: Sequence[Message],
    ) -> None:
        """Raise :class:`BudgetRefused` when the call would pass a budget."""
        limits = self.budgets
        if limits == Budgets():
            return
        payer = current()
        now = self.clock()
        if kind in HOUSEKEEPING:
            limits = Budgets(per_chat_daily=limits.per_chat_daily, monthly=limits.monthly)
            estimate: Decimal | None = None
            person = None
        else:
            prompt = rough_tokens(messages, tools)
            prefix = shared_prefix(previous, messages)
            cached = rough_tokens(prefix, tools) if prefix else 0
            ttl: CacheTTL = "1h" if cache_ttl == "1h" else "5m"
            estimate = estimate_call(prompt, cached, max_tokens, self.price(provider), ttl)
            person = payer.person
        spent = await self.costs.spent(person, payer.chat, now)
        verdict = decide(spent, limits, estimate, datetime.fromtimestamp(now, UTC))
        if verdict.allowed:
            return
        self._tell_operator(verdict, person, payer.chat, now)
        raise BudgetRefused(verdict)

    def _tell_operator(
        self, verdict: Verdict, person: str | None, chat: str | None, now: float
    ) -> None:
        budget = verdict.budget or ""
        subject = {"user_daily": person, "chat_daily": chat}.get(budget) or "bot"
        moment = datetime.fromtimestamp(now, UTC)
        period = moment.strftime("%Y-%m" if budget == "monthly" else "%Y-%m-%d")
        if (budget, subject, period) in self._told:
            return
        self._told.add((budget, subject, period))
        limit = verdict.limit if verdict.limit is not None else Decimal(0)
        resets = verdict.resets_at.timestamp() if verdict.resets_at else now
        log.warning(
            "budget %s refused a call of %s (%s spent of %s); it resets at %s",
            budget,
            subject,
            format_usd(verdict.spent or Decimal(0)),
            format_usd(limit),
            datetime.fromtimestamp(resets, UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
        self.events.emit(BudgetReached(budget, subject, str(limit), resets))

    async def record(
        self, kind: str, provider: Provider, usage: Usage | None, cache_ttl: str | None
    ) -> Decimal | None:
        """Keep what the call cost (None: unknown). A store failure is logged, never
        the caller's: the answer matters more than its bill."""
        ttl: CacheTTL = "1h" if cache_ttl == "1h" else "5m"
        cost = cost_of(usage, self.price(provider), ttl)
        payer = current()
        entry = CostRecord(
            at=self.clock(),
            session_key=payer.chat,
            person=payer.person if kind not in HOUSEKEEPING else None,
            kind=kind,
            model=provider.model,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            cache_read_tokens=usage.cache_read_tokens if usage else 0,
            cache_write_tokens=usage.cache_write_tokens if usage else 0,
            cost=cost,
        )
        await self.keep(entry)
        return cost

    async def transcribed(
        self,
        model: str,
        base_url: str | None,
        seconds: float | None,
        chat: str,
        person: str | None,
    ) -> None:
        """Keep a transcription's cost: its minutes at the route's per-minute price
        (None when the price or the duration is unknown; docs/cost.md#transcription)."""
        per_minute = self.pricing.per_minute(model, base_url, self.pricing.transcription)
        cost = None if seconds is None else transcription_cost(seconds, per_minute)
        at = self.clock()
        await self.keep(CostRecord(at, chat, person, "transcription", model, cost=cost))
        self.events.emit(
            ModelRequest(
                kind="transcription",
                provider="openai",
                model=model,
                outcome="ok",
                seconds=0.0,
                cost=None if cost is None else str(cost),
            )
        )

    async def keep(self, entry: CostRecord) -> None:
        try:
            await self.costs.record(entry)
        except StoreError as exc:
            log.warning("the cost of a %s call could not be stored: %s", entry.kind, exc)
