"""What people and the operator are shown of costs (docs/cost.md#what-people-see):
``/usage``, ``/status``'s line, ``nightowl usage``.

An unpriced call is never shown as $0: a sum says "+ N unpriced" beside the dollars,
and a sum of unpriced calls only is "unknown".
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal

from agent.cost.budget import Budgets, format_usd
from gateway.cost.payer import person_of
from gateway.store import CostLine, CostRecord, CostStore
from gateway.store.costs import day_start, month_start


def money(cost: Decimal, unpriced: int, calls: int) -> str:
    """A sum for people: dollars, "unknown" when no call of it had a price."""
    if calls and unpriced == calls:
        return f"unknown ({unpriced} unpriced call{'s' * (unpriced != 1)})"
    text = format_usd(cost)
    if unpriced:
        text += f" + {unpriced} unpriced call{'s' * (unpriced != 1)}"
    return text


def summed(records: Sequence[CostRecord], group: str = "") -> CostLine:
    line = CostLine(group)
    for record in records:
        line.add(record)
    return line


def said(line: CostLine) -> str:
    return money(line.cost, line.unpriced, line.calls)


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
        spent = summed(conversation)
        lines.append(
            f"Cost of this conversation: {said(spent)} over {spent.calls:,} model"
            f" call{'s' if spent.calls != 1 else ''} (replies, summaries, memory notes)"
        )
    lines.append(f"This chat: {said(summed(today))} today · {said(summed(month))} this month (UTC)")
    person = person_of(platform, user_id)
    if group and person is not None:
        mine = summed([record for record in today if record.person == person])
        mine_month = summed([record for record in month if record.person == person])
        lines.append(f"Your share: {said(mine)} today · {said(mine_month)} this month")
    elif person is not None and budgets.per_user_daily is not None:
        # A person's budget counts every chat of theirs: here they see what it counts.
        yours = await costs.calls(day_start(now), person=person)
        lines.append(f"You, in all chats: {said(summed(yours))} today")
    limits = [
        f"{name} {format_usd(limit)}"
        for name, limit in (
            ("you, daily", budgets.per_user_daily),
            ("this chat, daily", budgets.per_chat_daily),
            ("the bot, monthly", budgets.monthly),
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
    today = await costs.calls(day_start(now), chat=chat)
    return f"Spent today: {said(summed(today))} in this chat"


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
