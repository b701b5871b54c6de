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

An allowed call's estimate is held in the store (:class:`~gateway.store.CostHold`) until
its row is written, so calls side by side count each other, on every replica. A refusal
raises :class:`BudgetRefused` (a :class:`ProviderError` of kind ``other`` and detail
``budget``, so the agent ends the turn the way it ends any failed call and a compression
aborts without a fallback), carrying the one sentence for the person. The operator hears
once per budget and period: one WARNING line and a
``budget:reached`` event the dashboard counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from agent.cost.budget import (
    Budgets,
    Estimate,
    Spent,
    Verdict,
    budget_words,
    decide,
    estimate_message,
    format_limit,
    format_usd,
)
from agent.cost.prices import CacheTTL, Price, cost_of, transcription_cost
from agent.messages import Message, ToolSchema
from agent.providers.base import Provider, ProviderError, Usage
from gateway.cost.payer import current
from gateway.cost.pricing import Pricing
from gateway.events import BudgetReached, EventBus, ModelRequest
from gateway.store import CostHold, CostRecord, CostStore, StoreError

log = logging.getLogger(__name__)

#: Tokens an image counts for in the estimate (its bytes are not its tokens).
IMAGE_TOKENS = 1_500
HOUSEKEEPING = ("summary", "flush")


class BudgetStopped(ProviderError):
    """A budget stopped the call before it was made (detail ``budget``: a compression
    aborts without a fallback); ``sentence`` is for the person."""

    #: Why, in a few words (a voice note left untranscribed says it).
    why = "a budget is used up"

    def __init__(self, sentence: str) -> None:
        super().__init__("other", sentence, detail="budget")
        self.sentence = sentence


class BudgetRefused(BudgetStopped):
    """A budget refused the call: the person's message is kept refused."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict


class BudgetUnchecked(BudgetStopped):
    """The budgets could not be checked (the store failed, or another replica held the
    check too long): no call is made that no budget saw, and the message is answered."""

    why = "the budget could not be checked"

    def __init__(self) -> None:
        super().__init__(
            "I couldn't check this bot's spending budget just now, so I didn't ask the "
            "model. Please try again in a minute."
        )


@dataclass(eq=False)
class Held:
    """An allowed call's hold as its caller carries it, to :meth:`CostMeter.release`;
    ``gone`` once it went with the call's cost row."""

    hold: CostHold
    gone: bool = False


def rough_tokens(messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None) -> int:
    """The prompt's size for the estimate: 4 characters a token, an image
    :data:`IMAGE_TOKENS` (docs/cost.md#the-pre-flight-estimate)."""
    return _tokens(map(_chars_and_images, messages), _tools_chars(tools))


def _chars_and_images(message: Message) -> tuple[int, int]:
    chars, images = len(str(message.get("role", ""))) + 4, 0
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
    return chars + len(str(message.get("tool_call_id") or "")), images


def _tools_chars(tools: Sequence[ToolSchema] | None) -> int:
    return len(json.dumps(list(tools))) if tools else 0


def _tokens(sizes: Iterable[tuple[int, int]], extra_chars: int) -> int:
    chars, images = extra_chars, 0
    for message_chars, message_images in sizes:
        chars += message_chars
        images += message_images
    return (chars + 3) // 4 + images * IMAGE_TOKENS


def _ttl(cache_ttl: str | None) -> CacheTTL:
    return "1h" if cache_ttl == "1h" else "5m"


def _paying(kind: str) -> tuple[str | None, str | None]:
    """(chat, person) a call of ``kind`` is for: housekeeping is the chat's alone."""
    payer = current()
    return payer.chat, payer.person if kind not in HOUSEKEEPING else None


def shared_prefix(before: Sequence[Message], now: Sequence[Message]) -> list[Message]:
    """The messages ``now`` starts with that the previous request also started with."""
    same: list[Message] = []
    for old, new in zip(before, now, strict=False):
        if old != new:
            break
        same.append(new)
    return same


#: How long a hold counts when its process died before letting it go: longer than a
#: call takes (a call that outlives it counts only from its cost's row on).
HOLD_SECONDS = 900.0


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
        #: (budget, subject, period) already told to the operator; pruned to this period.
        self._told: set[tuple[str, str, str]] = set()

    @property
    def budgets(self) -> Budgets:
        return self.pricing.budgets

    def warn_unpriced(self) -> None:
        """At start, when budgets are set: one WARNING when some model has no price, whose
        calls no budget can stop (docs/cost.md#unknown-prices); one when a model the
        table prices is served by a local endpoint, which counts as free — a proxy in
        front of a paid API would spend past every budget."""
        if self.budgets == Budgets():
            return
        for free in self.pricing.free_but_sold():
            log.warning(
                "budgets are set, but %s counts as free (a local server): if it passes calls"
                " on to a paid API (a proxy such as LiteLLM), give the model a price in"
                " config.yaml, or no budget stops them",
                free,
            )
        unpriced = self.pricing.unpriced()
        if unpriced:
            log.warning(
                "budgets are set, but %s %s no price: %s calls are not counted against"
                " budgets and no budget stops them; give %s a price in config.yaml",
                ", ".join(unpriced),
                "has" if len(unpriced) == 1 else "have",
                "its" if len(unpriced) == 1 else "their",
                "it" if len(unpriced) == 1 else "them",
            )

    def price(self, provider: Provider) -> Price | None:
        return self.pricing.price(provider.name, provider.model, provider.base_url)

    def estimate(
        self,
        kind: str,
        provider: Provider,
        messages: Sequence[Message],
        *,
        max_tokens: int,
        tools: Sequence[ToolSchema] | None,
        cache_ttl: str | None,
        previous: Sequence[Message],
        most_prompt_tokens: int | None = None,
        extra_prompt_tokens: int = 0,
        reply_room: Callable[[int], int] | None = None,
    ) -> Estimate:
        """The most a call can cost (unknown always for housekeeping, which only a
        used-up budget stops). ``most_prompt_tokens``: the prompt is cut to fit
        (a window); ``extra_prompt_tokens``: what the request adds (a memory block);
        ``reply_room``: what a reply after a prompt of so many tokens may take at most
        (the window's room, as the request will ask), instead of ``max_tokens``."""
        if kind in HOUSEKEEPING:
            return Estimate(None)
        # Each message and the tools measured once, for the prompt and its cached prefix.
        sizes, tools_chars = [_chars_and_images(m) for m in messages], _tools_chars(tools)
        prompt = _tokens(sizes, tools_chars) + extra_prompt_tokens
        if most_prompt_tokens is not None:
            prompt = min(prompt, most_prompt_tokens)
        if reply_room is not None:
            max_tokens = min(max_tokens, reply_room(prompt))
        prefix = shared_prefix(previous, messages)
        cached = _tokens(sizes[: len(prefix)], tools_chars) if prefix else 0
        ttl = _ttl(cache_ttl)
        return estimate_message(prompt, cached, max_tokens, self.price(provider), ttl)

    async def allow(
        self, kind: str, provider: Provider, messages: Sequence[Message], **request: Any
    ) -> Held | None:
        """Raise :class:`BudgetRefused` when the call would pass a budget; otherwise the
        call's hold (None: nothing held), to :meth:`release` once its row is written or it
        failed. ``request``: :meth:`estimate`'s keywords, read only when a budget is set."""
        if self.budgets == Budgets():
            return None
        estimate = self.estimate(kind, provider, messages, **request)
        chat, person = _paying(kind)
        return await self.judge(person, chat, estimate, housekeeping=kind in HOUSEKEEPING)

    async def judge(
        self,
        person: str | None,
        chat: str | None,
        estimate: Estimate,
        *,
        housekeeping: bool = False,
        hold: bool = True,
    ) -> Held | None:
        """Decide for a call of ``person`` (None: no person's budget applies) in ``chat``
        that may cost ``estimate``: raise :class:`BudgetRefused`, or hold the estimate
        (``hold=False``: only say whether it would pass now)."""
        limits = self.budgets
        if limits == Budgets():
            return None
        if housekeeping or person is None:
            limits = Budgets(per_chat_daily=limits.per_chat_daily, monthly=limits.monthly)
        now = self.clock()
        moment = datetime.fromtimestamp(now, UTC)
        if not hold or not estimate.most:  # nothing to hold: a look is enough
            verdict = decide(await self.costs.spent(person, chat, now), limits, estimate, moment)
            if verdict.allowed:
                return None
            self._tell_operator(verdict, person, chat, now)
            raise BudgetRefused(verdict)
        row = CostHold(uuid.uuid4().hex, now, chat, person, estimate.most, now + HOLD_SECONDS)
        verdicts: list[Verdict] = []

        def admits(spent: Spent) -> bool:
            verdicts.append(decide(spent, limits, estimate, moment))
            return verdicts[-1].allowed

        # The check may keep its hold after its caller is gone (a trip to SQLite's thread,
        # a COMMIT sent, ends all the same): a cancelled caller waits for it (however
        # often it is cancelled meanwhile), to let go of what it kept.
        checking = asyncio.ensure_future(self.costs.hold(row, admits))
        try:
            allowed = await asyncio.shield(checking)
        except asyncio.CancelledError:
            while not checking.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(checking)
            if not checking.cancelled() and checking.exception() is None and checking.result():
                await self.release(Held(row))
            raise
        except StoreError as exc:  # fails closed: no call is made that no budget saw
            log.warning("a budget check could not use the store, so no call is made: %s", exc)
            raise BudgetUnchecked() from exc
        if allowed:
            return Held(row)
        self._tell_operator(verdicts[-1], person, chat, now)
        raise BudgetRefused(verdicts[-1])

    async def release(self, held: Held | None) -> None:
        """The call failed without a row (or its row could not be written): its estimate
        no longer counts. A hold that went with its cost's row (:meth:`record`'s
        ``hold``) is gone already. A store that fails to let it go is logged; the hold
        then ends by expiring."""
        if held is None or held.gone:
            return
        try:
            await asyncio.shield(self.costs.release(held.hold.id))
        except StoreError as exc:
            log.warning("a budget's hold could not be let go (it expires by itself): %s", exc)

    def _tell_operator(
        self, verdict: Verdict, person: str | None, chat: str | None, now: float
    ) -> None:
        budget = verdict.budget or ""
        subject = {"user_daily": person, "chat_daily": chat}.get(budget) or "bot"
        moment = datetime.fromtimestamp(now, UTC)
        period = moment.strftime("%Y-%m" if budget == "monthly" else "%Y-%m-%d")
        if (budget, subject, period) in self._told:
            return
        # What was told of a past period is never asked again: keep this period's only.
        month = moment.strftime("%Y-%m")
        today = moment.strftime("%Y-%m-%d")
        self._told = {told for told in self._told if told[2] in (month, today)}
        self._told.add((budget, subject, period))
        limit = verdict.limit if verdict.limit is not None else Decimal(0)
        resets = verdict.resets_at.timestamp() if verdict.resets_at else now
        log.warning(
            "%s refused a call of %s (%s spent of %s); it resets at %s",
            *budget_words(budget, subject),
            format_usd(verdict.spent or Decimal(0)),
            format_limit(limit),
            datetime.fromtimestamp(resets, UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
        self.events.emit(BudgetReached(budget, subject, str(limit), resets))

    async def record(
        self,
        kind: str,
        provider: Provider,
        usage: Usage | None,
        cache_ttl: str | None,
        hold: Held | None = None,
    ) -> Decimal | None:
        """Keep what the call cost (None: unknown), letting its ``hold`` go in the same
        write. A store failure is logged, never the caller's: the answer matters more
        than its bill."""
        ttl = _ttl(cache_ttl)
        cost = cost_of(usage, self.price(provider), ttl)
        await self.keep(
            hold,
            self._entry(
                kind,
                provider,
                cost,
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
                cache_read_tokens=usage.cache_read_tokens if usage else 0,
                cache_write_tokens=usage.cache_write_tokens if usage else 0,
            ),
        )
        return cost

    async def failed(
        self,
        kind: str,
        provider: Provider,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None,
        streamed_chars: int,
        hold: Held | None = None,
    ) -> None:
        """Keep a call the server took and then failed or was cut off (the vendor may
        bill it, docs/cost.md#what-is-stored): its cost unknown (a free model's $0), its
        tokens estimated: the prompt's, and what streamed before it ended."""
        price = self.price(provider)
        await self.keep(
            hold,
            self._entry(
                kind,
                provider,
                Decimal(0) if price is not None and price.free else None,
                prompt_tokens=rough_tokens(messages, tools),
                completion_tokens=(streamed_chars + 3) // 4,
            ),
        )

    def _entry(
        self, kind: str, provider: Provider, cost: Decimal | None, **tokens: int
    ) -> CostRecord:
        """A call's row, now, paid by whoever the turn is for (housekeeping: the chat)."""
        chat, person = _paying(kind)
        return CostRecord(self.clock(), chat, person, kind, provider.model, cost=cost, **tokens)

    async def allow_transcription(
        self, model: str, base_url: str | None, seconds: float, chat: str, person: str | None
    ) -> Held | None:
        """The budget check before a transcription: ``seconds`` of audio (the longest it
        may be when its length is not known) at the route's per-minute price. Raises
        :class:`BudgetRefused`; ``person`` None: the chat's and the bot's budgets only."""
        if self.budgets == Budgets():
            return None
        per_minute = self.pricing.per_minute(model, base_url, self.pricing.transcription)
        cost = transcription_cost(seconds, per_minute)
        return await self.judge(person, chat, Estimate(cost, of="voice note"))

    async def transcribed(
        self,
        model: str,
        base_url: str | None,
        seconds: float | None,
        chat: str,
        person: str | None,
        hold: Held | None = None,
    ) -> None:
        """Keep a transcription's cost: its minutes at the route's per-minute price
        (None when the price or the duration is unknown; docs/cost.md#transcription)."""
        per_minute = self.pricing.per_minute(model, base_url, self.pricing.transcription)
        cost = None if seconds is None else transcription_cost(seconds, per_minute)
        at = self.clock()
        await self.keep(hold, CostRecord(at, chat, person, "transcription", model, cost=cost))
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

    async def keep(self, held: Held | None, entry: CostRecord) -> None:
        """Write ``entry``, and let ``held`` go in the same write (then :meth:`release`
        has nothing left to do)."""
        try:
            await self.costs.record(entry, release=held.hold.id if held else None)
        except StoreError as exc:
            log.warning("the cost of a %s call could not be stored: %s", entry.kind, exc)
            return
        if held is not None:
            held.gone = True
