"""Budgets: the most a call can cost, and whether it may run (docs/cost.md#budgets).

Pure functions. The gateway knows what was spent; here it is only compared: a call is
refused when what was spent in a period plus the most this call can cost would pass
that period's budget. Daily budgets reset at 00:00 UTC, the monthly one on the 1st at
00:00 UTC (docs/cost.md#reset-times).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Literal

from agent.cost.prices import EXACT, MILLION, CacheTTL, Price

BudgetName = Literal["user_daily", "chat_daily", "monthly"]
#: Which budget a refusal names first when several would be passed: the one that
#: resets last (after midnight a spent monthly budget still refuses), then in this order.
ORDER: tuple[BudgetName, ...] = ("monthly", "user_daily", "chat_daily")
#: Each budget as the operator wrote it, which the log and the alerts name it by.
SETTING = {
    "user_daily": "budgets.per_user_daily",
    "chat_daily": "budgets.per_chat_daily",
    "monthly": "budgets.monthly",
}


def budget_words(budget: str, subject: str) -> tuple[str, str]:
    """A budget and whose it is, as the log and the alerts say them:
    ``("budgets.monthly", "the bot")``, ``("budgets.per_user_daily", "telegram:42")``."""
    return SETTING.get(budget, budget), "the bot" if subject == "bot" else subject


def estimate_call(
    prompt_tokens: int,
    cached_prefix_tokens: int,
    max_tokens: int,
    price: Price | None,
    cache_ttl: CacheTTL = "5m",
) -> Decimal | None:
    """The most a call can cost, in USD (docs/cost.md#the-pre-flight-estimate): the
    prompt's uncached tokens at the dearer of the input and cache-write rates (Anthropic
    may write them to the cache), the part a cache likely serves
    (``cached_prefix_tokens``, at most the prompt) at the cached rate, and a reply of
    the full ``max_tokens`` at the output rate. None when the price is unknown."""
    if price is None:
        return None
    cached = min(max(cached_prefix_tokens, 0), max(prompt_tokens, 0))
    uncached = max(prompt_tokens, 0) - cached
    write = price.cache_write_1h if cache_ttl == "1h" else price.cache_write
    with localcontext(EXACT):
        total = (
            uncached * max(price.input, write)
            + cached * price.cached_input
            + max(max_tokens, 0) * price.output
        )
        return total / MILLION


@dataclass(frozen=True)
class Estimate:
    """The most a call can cost, in USD (``most``; None: unknown), and what a refusal
    needs to say what would lower it (docs/cost.md#budgets)."""

    most: Decimal | None
    #: The part of ``most`` that is the reply's room (its full ``max_tokens`` at the
    #: output rate): a shorter conversation does not lower it.
    reply: Decimal = Decimal(0)
    #: What the call is for, as the refusal names it.
    of: Literal["message", "voice note"] = "message"


def estimate_message(
    prompt_tokens: int,
    cached_prefix_tokens: int,
    max_tokens: int,
    price: Price | None,
    cache_ttl: CacheTTL = "5m",
) -> Estimate:
    """:func:`estimate_call` for a chat's call, with the reply's room told apart."""
    most = estimate_call(prompt_tokens, cached_prefix_tokens, max_tokens, price, cache_ttl)
    if most is None or price is None:
        return Estimate(most)
    with localcontext(EXACT):
        return Estimate(most, reply=max(max_tokens, 0) * price.output / MILLION)


@dataclass(frozen=True)
class Budgets:
    """USD per period; None: no budget."""

    per_user_daily: Decimal | None = None
    per_chat_daily: Decimal | None = None
    monthly: Decimal | None = None


@dataclass(frozen=True)
class Spent:
    """What was spent so far: by this user today, in this chat today, by the whole bot
    this month (UTC periods)."""

    user_today: Decimal = Decimal(0)
    chat_today: Decimal = Decimal(0)
    month: Decimal = Decimal(0)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    #: The budget that refused (None when allowed).
    budget: BudgetName | None = None
    limit: Decimal | None = None
    spent: Decimal | None = None
    resets_at: datetime | None = None
    #: The sentence for the person (empty when allowed).
    message: str = ""


def next_daily_reset(now: datetime) -> datetime:
    """The next 00:00 UTC after ``now`` (a naive ``now`` is taken as UTC)."""
    day = _utc(now).replace(hour=0, minute=0, second=0, microsecond=0)
    return day + timedelta(days=1)


def next_monthly_reset(now: datetime) -> datetime:
    """00:00 UTC on the 1st of the month after ``now``'s."""
    now = _utc(now)
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def decide(spent: Spent, budgets: Budgets, estimate: Estimate, now: datetime) -> Verdict:
    """Allowed, or refused with the sentence that names the budget and when it resets.

    A call is refused when spent + ``estimate.most`` would pass a budget. An unknown
    estimate (the model has no price) is not guessed: only a budget already used up
    refuses it (docs/cost.md#unknown-prices). A free call (estimate $0) is never
    refused, not even by a budget spending already went past (a lowered limit, a paid
    model's last reply that cost more than its estimate, then ``/model`` to a free one).
    """
    unknown = estimate.most is None
    most = estimate.most if estimate.most is not None else Decimal(0)
    periods: dict[BudgetName, tuple[Decimal | None, Decimal, datetime]] = {
        "monthly": (budgets.monthly, spent.month, next_monthly_reset(now)),
        "user_daily": (budgets.per_user_daily, spent.user_today, next_daily_reset(now)),
        "chat_daily": (budgets.per_chat_daily, spent.chat_today, next_daily_reset(now)),
    }
    for name in ORDER:
        limit, used, resets_at = periods[name]
        if limit is None:
            continue
        with localcontext(EXACT):
            passes = (most > 0 and used + most > limit) or (unknown and used >= limit)
        if passes:
            message = refusal(name, limit, used, estimate, resets_at, now)
            return Verdict(False, name, limit, used, resets_at, message)
    return Verdict(True)


#: Per budget: used up, what is left "of", and the budget of $0 (no paid call at all).
_WHOSE = {
    "user_daily": (
        "You've used your daily {limit} for this bot",
        "your daily {limit}",
        "for you (your daily budget is $0)",
    ),
    "chat_daily": (
        "This chat has used its daily {limit}",
        "this chat's daily {limit}",
        "in this chat (its daily budget is $0)",
    ),
    "monthly": (
        "This bot has used its {limit} for {month}",
        "the bot's {limit} for {month}",
        "(its monthly budget is $0)",
    ),
}


def refusal(
    name: BudgetName,
    limit: Decimal,
    spent: Decimal,
    estimate: Estimate,
    resets_at: datetime,
    now: datetime,
) -> str:
    """The sentence for a refused call: which budget, how much, when it resets, and
    what would make the call cheaper."""
    month = _utc(now).strftime("%B")
    used_up, share, nothing = (
        text.format(limit=format_limit(limit), month=month) for text in _WHOSE[name]
    )
    if limit == 0:  # not "used its daily $0.00": a budget of nothing allows no paid call
        return f"This bot makes no paid model calls {nothing}."
    when = _reset_words(resets_at, now)
    most = estimate.most or Decimal(0)
    if spent >= limit or most <= 0:
        return f"{used_up}; it resets {when}."
    with localcontext(EXACT):
        left = limit - spent
    return (
        f"This {estimate.of} could cost up to {format_usd(most)}, and {format_usd(left)} is "
        f"left of {share}; it resets {when}.{_cheaper(estimate, left)}"
    )


def _cheaper(estimate: Estimate, left: Decimal) -> str:
    """What would lower the estimate, said only where it is true: /new shortens the
    history, never the reply's room, so it is advice when the history is most of the
    estimate and the reply's room alone fits in what is left; otherwise the reply's
    room is named, with the setting that sizes it. A voice note's cost is its length."""
    if estimate.of != "message" or estimate.most is None:
        return ""
    with localcontext(EXACT):
        reply_decides = estimate.reply * 2 >= estimate.most or estimate.reply >= left
    if not reply_decides:
        return " A shorter conversation (/new) costs less."
    room = format_usd(estimate.reply)
    part = "Nearly all" if room == format_usd(estimate.most) else f"Up to {room}"
    return (
        f" {part} of that is room kept for the reply, which the bot's operator can make"
        " smaller (model.max_output_tokens)."
    )


def _reset_words(resets_at: datetime, now: datetime) -> str:
    resets_at = _utc(resets_at)
    clock = resets_at.strftime("%H:%M UTC")
    if resets_at - _utc(now) <= timedelta(days=1):
        return f"at {clock}"
    return f"on {resets_at.day} {resets_at.strftime('%B')} at {clock}"


def format_limit(limit: Decimal) -> str:
    """A configured budget as it was written when cents would round it ($0.012, not
    $0.01: the sums beside it must add up); else as :func:`format_usd`."""
    with localcontext(EXACT):  # a budget of any size (the default 28 digits stop short)
        exact = limit.normalize()
        if exact == exact.quantize(Decimal("0.01")):
            return format_usd(limit)
    return f"{'-' if exact < 0 else ''}${abs(exact):,f}"


def format_usd(amount: Decimal) -> str:
    """Money for people: cents from a cent up ($0.50, $12.00, $1,250.00); under a cent,
    two significant digits ($0.0042, $0.00013); nothing is $0.00."""
    with localcontext(EXACT):  # an amount of any size (the default 28 digits stop short)
        return _usd(amount)


def _usd(amount: Decimal) -> str:
    if amount == 0:
        return "$0.00"
    sign = "-" if amount < 0 else ""
    amount = abs(amount)
    if amount < Decimal("0.01"):
        small = amount.quantize(Decimal(1).scaleb(amount.adjusted() - 1), ROUND_HALF_UP)
        if small < Decimal("0.01"):  # two significant digits, unless that rounds to a cent
            return f"{sign}${small:f}"
    cents = amount.quantize(Decimal("0.01"), ROUND_HALF_UP)
    return f"{sign}${cents:,.2f}"
