"""The overview's spend card (docs/cost.md#what-the-operator-sees): today and this month
(UTC), the top spenders today, the last two weeks by day, the budgets and which of them
refuse calls now. Sums as people read them: unpriced calls beside the dollars."""

from __future__ import annotations

from typing import Any

from agent.cost.budget import Budgets, format_limit
from gateway.cost.report import said, summed_lines
from gateway.store import CostStore
from gateway.store.costs import day_start, month_start

TOP = 5
DAYS = 14


async def spend(
    costs: CostStore, budgets: Budgets, refusing: list[tuple[str, str, float]], now: float
) -> dict[str, Any]:
    today = day_start(now)
    people = await costs.totals("person", today)
    chats = await costs.totals("chat", today)
    month = summed_lines(await costs.totals("kind", month_start(now)))
    days = await costs.totals("day", today - (DAYS - 1) * 86_400)
    most = max((line.cost for line in days), default=0) or 1
    return {
        "today": said(summed_lines(people)),
        "month": said(month),
        "people": [{"who": line.group, "spent": said(line)} for line in people[:TOP]],
        "chats": [{"chat": line.group, "spent": said(line)} for line in chats[:TOP]],
        "days": [
            {"day": line.group, "spent": said(line), "share": float(line.cost / most)}
            for line in days
        ],
        "budgets": [
            {"name": name, "limit": format_limit(limit)}
            for name, limit in (
                ("per person, daily", budgets.per_user_daily),
                ("per chat, daily", budgets.per_chat_daily),
                ("the bot, monthly", budgets.monthly),
            )
            if limit is not None
        ],
        "refusing": [
            {"budget": budget, "subject": subject, "resets_at": resets_at}
            for budget, subject, resets_at in refusing
        ],
    }
