"""What people and the operator are shown of costs (docs/cost.md#what-people-see):
``/usage``, ``/status``'s line, ``nightowl usage``.

An unpriced call is never shown as $0: a sum says "+ N unpriced calls" beside the
dollars; a sum of unpriced calls only is "unknown (N unpriced calls)" where it stands
alone (a table's cell, the dashboard) and is said in words inside a sentence
(:func:`spoken`, :func:`conversation_line`).
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import ROUND_DOWN, Decimal

from agent.cost.budget import Budgets, format_limit, format_usd
from gateway.cost.payer import person_of
from gateway.store import CostLine, CostRecord, CostStore
from gateway.store.costs import day_start, month_start


def money(cost: Decimal, unpriced: int, calls: int) -> str:
    """A sum standing alone: dollars, "unknown" when no call of it had a price."""
    if calls and unpriced == calls:  # never $0: nothing of it was priced
        return f"unknown ({_unpriced(unpriced)})"
    text = format_usd(cost)
    if unpriced:
        text += f" + {_unpriced(unpriced)}"
    return text


def _unpriced(calls: int) -> str:
    return f"{calls:,} unpriced call{'s' * (calls != 1)}"


def _priceless(line: CostLine) -> bool:
    return bool(line.calls) and line.unpriced == line.calls


def summed(records: Sequence[CostRecord], group: str = "") -> CostLine:
    line = CostLine(group)
    for record in records:
        line.add(record)
    return line


def said(line: CostLine) -> str:
    return money(line.cost, line.unpriced, line.calls)


def spoken(line: CostLine) -> str:
    """A sum inside a sentence ("This chat: $0.45 today"): calls with no price only
    are counted ("2 unpriced calls today"), never shown as $0."""
    return _unpriced(line.unpriced) if _priceless(line) else said(line)


def conversation_line(spent: CostLine) -> str:
    """``/usage``'s cost of this conversation, and over how many calls."""
    calls = (
        f"{spent.calls:,} model call{'s' * (spent.calls != 1)} (replies, summaries, memory notes)"
    )
    if _priceless(spent):
        return f"Cost of this conversation: unknown — {calls} with no price"
    cost = format_usd(spent.cost)
    if not spent.unpriced:
        return f"Cost of this conversation: {cost} over {calls}"
    have = "have" if spent.unpriced != 1 else "has"
    return (
        f"Cost of this conversation: at least {cost} over {calls};"
        f" {spent.unpriced:,} {have} no price"
    )


def used(spent: Decimal, limit: Decimal) -> str:
    """A budget and what its calls cost so far: ``$0.018 of $0.02 used``, ``$0.02, used
    up``. Short of the limit, never the limit's own figure ($0.018, not $0.02 of $0.02)."""
    if spent >= limit:
        return f"{format_limit(limit)}, used up"
    shown = format_usd(spent)
    if shown == format_limit(limit):
        shown = format_limit(spent.quantize(Decimal("0.0001"), ROUND_DOWN))
    return f"{shown} of {format_limit(limit)} used"


async def usage_lines(
    costs: CostStore,
    chat: str,
    platform: str,
    user_id: str,
    *,
    group: bool,
    conversation_since: float | None,
    budgets: Budgets,
    now: float | None = None,
) -> list[str]:
    """``/usage``'s cost lines: this conversation, this chat today and this month, and
    in a group the person's own share; the budgets that apply."""
    now = time.time() if now is None else now
    month = await costs.calls(month_start(now), chat=chat)
    today = [record for record in month if record.at >= day_start(now)]
    lines = []
    if conversation_since is not None:
        conversation = [record for record in month if record.at >= conversation_since]
        if conversation_since < month_start(now):
            conversation = await costs.calls(conversation_since, chat=chat)
        lines.append(conversation_line(summed(conversation)))
    chat_today = summed(today)
    lines.append(
        f"This chat: {spoken(chat_today)} today · {spoken(summed(month))} this month (UTC)"
    )
    person = person_of(platform, user_id)
    # A person's budget counts every chat of theirs, read once for the line and the budget.
    yours = None
    if person is not None and budgets.per_user_daily is not None:
        yours = summed(await costs.calls(day_start(now), person=person))
    if group and person is not None:
        mine = summed([record for record in today if record.person == person])
        mine_month = summed([record for record in month if record.person == person])
        lines.append(f"Your share: {spoken(mine)} today · {spoken(mine_month)} this month")
    elif yours is not None:  # here they see what their budget counts
        lines.append(f"You, in all chats: {spoken(yours)} today")
    # What each budget counts of the calls made (not of replies under way, whose
    # estimates a budget also holds while they run).
    bot_month = None
    if budgets.monthly is not None:
        bot_month = summed(await costs.calls(month_start(now))).cost
    limits = [
        f"{name} {used(so_far or Decimal(0), limit)}"
        for name, limit, so_far in (
            ("you, daily", budgets.per_user_daily, yours.cost if yours else None),
            ("this chat, daily", budgets.per_chat_daily, chat_today.cost),
            ("the bot, monthly", budgets.monthly, bot_month),
        )
        if limit is not None
    ]
    if limits:
        lines.append("Budgets: " + " · ".join(limits))
        if any(record.cost is None for record in month):
            lines.append("Unpriced calls are not counted against budgets.")
    return lines


async def today_line(costs: CostStore, chat: str, now: float | None = None) -> str:
    """``/status``'s line: what this chat spent today."""
    now = time.time() if now is None else now
    today = summed(await costs.calls(day_start(now), chat=chat))
    if _priceless(today):
        return f"Spent today in this chat: unknown ({_unpriced(today.unpriced)})"
    return f"Spent today: {said(today)} in this chat"


def table(lines: Sequence[CostLine], by: str) -> str:
    """``nightowl usage``'s table."""
    header = f"{by:<28} {'calls':>6} {'prompt':>10} {'cached':>10} {'output':>9}  cost"
    rows = [header]
    for line in lines:
        rows.append(
            f"{line.group[:28]:<28} {line.calls:>6} {line.prompt_tokens:>10,} "
            f"{line.cache_read_tokens:>10,} {line.completion_tokens:>9,}  {said(line)}"
        )
    total = summed_lines(lines)
    rows.append(
        f"{'total':<28} {total.calls:>6} {total.prompt_tokens:>10,} "
        f"{total.cache_read_tokens:>10,} {total.completion_tokens:>9,}  {said(total)}"
    )
    return "\n".join(rows)


def summed_lines(lines: Sequence[CostLine]) -> CostLine:
    total = CostLine("total")
    for line in lines:
        total.calls += line.calls
        total.prompt_tokens += line.prompt_tokens
        total.completion_tokens += line.completion_tokens
        total.cache_read_tokens += line.cache_read_tokens
        total.cache_write_tokens += line.cache_write_tokens
        total.cost += line.cost
        total.unpriced += line.unpriced
    return total


def as_csv(lines: Sequence[CostLine], by: str) -> str:
    """The same as CSV: exact USD (empty when every call was unpriced)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [by, "calls", "prompt_tokens", "cache_read_tokens", "cache_write_tokens"]
        + ["completion_tokens", "cost_usd", "unpriced_calls"]
    )
    for line in lines:
        known = not (line.calls and line.unpriced == line.calls)
        writer.writerow(
            [
                line.group,
                line.calls,
                line.prompt_tokens,
                line.cache_read_tokens,
                line.cache_write_tokens,
                line.completion_tokens,
                f"{line.cost.normalize():f}" if known else "",
                line.unpriced,
            ]
        )
    return out.getvalue()


def utc_day(text: str) -> float:
    """``YYYY-MM-DD`` as the epoch of its 00:00 UTC."""
    return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
