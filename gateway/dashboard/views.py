"""What each page shows, as plain data (the JSON a page polls is the same data).

:class:`Views` reads the store through its own read-only view (the dashboard never holds
the gateway's connection for a page) and the live numbers from :class:`LiveState`. A
chat's fullness is the one number ``/status`` and ``/context`` show
(docs/design.md#fullness).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from agent.messages import JSON
from gateway.conversation.commands import describe_cooldown
from gateway.conversation.fullness import Fullness
from gateway.conversation.hygiene import HYGIENE_THRESHOLD
from gateway.dashboard.chart import Limits, render_chart
from gateway.dashboard.live import LiveState
from gateway.dashboard.spend import spend
from gateway.operations import Operations
from gateway.store import Store, StoredMessage
from gateway.store.dashboard_records import SessionOverview

#: How much of a message the list shows; the rest is in ``nightowl sessions export``.
SHOWN_CHARS = 1500
MESSAGES_PER_PAGE = 100
SORT_KEYS = {
    "key": lambda s: s["session_key"],
    "platform": lambda s: (s["platform"], s["session_key"]),
    "rows": lambda s: s["active_messages"],
    "archived": lambda s: s["archived_messages"],
    "tokens": lambda s: s["share"],
    "updated": lambda s: s["updated_at"],
    "compressions": lambda s: s["compressions"],
}


def start_of_today(now: float) -> float:
    """Local midnight: what "today" means on the overview."""
    moment = datetime.fromtimestamp(now)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def cooldown_left(state: JSON, now: float) -> float:
    until = state.get("cooldown_until")
    return max(0.0, float(until) - now) if isinstance(until, int | float) else 0.0


class Views:
    def __init__(self, operations: Operations, reader: Store, live: LiveState) -> None:
        self.operations = operations
        self.reader = reader
        self.live = live

    async def overview(self) -> dict[str, Any]:
        now = time.time()
        totals = await self.reader.dashboard.totals(start_of_today(now))
        sessions = await self.reader.dashboard.sessions()
        latency = self.live.latency_p50()
        waits, waited = self.live.rate_limit_waits()
        return {
            "now": now,
            "started_at": self.live.started_at,
            "platforms": [
                {
                    "name": name,
                    "connected": status.connected,
                    "mode": status.mode,
                    "last_received": self.live.last_received.get(name),
                    "last_sent": self.live.last_sent.get(name),
                    "problem": status.problem,
                    "restarts": status.restarts,
                }
                for name, adapter in sorted(self.operations.platforms.items())
                for status in [adapter.status()]
            ],
            "provider": {
                "model": self.operations.model(),
                "window": self.operations.window(),
                "last_error": self.live.provider.last_error,
                "last_error_at": self.live.provider.last_error_at,
                "latency_p50": latency,
                "rate_limited": waits,
                "rate_limit_seconds": waited,
            },
            "today": {
                "since": totals.since,
                "sessions_active": totals.sessions_active,
                "turns": totals.turns,
                "turns_by_platform": totals.turns_by_platform,
                "prompt_tokens": totals.prompt_tokens,
                "completion_tokens": totals.completion_tokens,
                "cached_tokens": totals.cache_read_tokens,
                "compressions_by_trigger": totals.compressions_by_trigger,
            },
            "compressions": [
                {"trigger": trigger, "outcome": outcome, "count": count}
                for (trigger, outcome), count in sorted(self.live.compressions.items())
            ],
            "waiting": {
                "inbox": totals.inbox_pending,
                "undelivered": totals.undelivered_replies,
                "reminders": totals.reminders_pending,
                "pairing": len(await self.operations.pending_pairings()),
                "alerts": [
                    {
                        "condition": alert.condition,
                        "what": alert.what,
                        "todo": alert.todo,
                        "since": alert.since,
                        "told": alert.reported,
                    }
                    for alert in self.operations.alerts()
                ],
            },
            "spend": await spend(
                self.reader.costs, self.operations.budgets, self.operations.budgets_refusing(), now
            ),
            "cooldowns": [
                {
                    "session_key": s.session_key,
                    "left": cooldown_left(s.engine_state, now),
                    "reason": s.engine_state.get("cooldown_reason") or "a failed summary",
                }
                for s in sessions
                if cooldown_left(s.engine_state, now) > 0
            ],
        }

    async def sessions(self, sort: str = "updated", descending: bool = True) -> dict[str, Any]:
        now = time.time()
        rows = [
            self._session_row(s, now, await self._fullness(s))
            for s in await self.reader.dashboard.sessions()
        ]
        key = SORT_KEYS.get(sort, SORT_KEYS["updated"])
        rows.sort(key=key, reverse=descending)
        return {"now": now, "sessions": rows, "sort": sort, "descending": descending}

    async def _fullness(self, session: SessionOverview) -> Fullness | None:
        """The chat's fullness, when it is open in this gateway; a chat not open since the
        start is not opened for a listing."""
        now = await self.operations.session_now(session.session_key, session.session_id)
        return now.fullness if now is not None else None

    def _session_row(
        self, session: SessionOverview, now: float, fullness: Fullness | None
    ) -> dict[str, Any]:
        if fullness is not None:
            tokens, window = fullness.tokens, fullness.window
        else:  # the stored rows alone, against the configured model's window
            tokens, window = session.active_tokens, self.operations.window()
        return {
            "session_key": session.session_key,
            "platform": session.platform,
            "chat": session.chat_id or "",
            "thread": session.thread_id or "",
            "active_messages": session.active_messages,
            "archived_messages": session.archived_messages,
            "tokens": tokens,
            "window": window,
            "share": tokens / window if window else 0.0,
            "measured": fullness is not None,
            "phrase": fullness.phrase
            if fullness is not None
            else f"{tokens:,} of {window:,} tokens in stored rows",
            "updated_at": session.updated_at,
            "compressions": session.compression_count,
            "cooldown_left": cooldown_left(session.engine_state, now),
            "busy": self.operations.busy(session.session_key),
        }

    async def session(
        self, key: str, *, query: str = "", before: int | None = None
    ) -> dict[str, Any] | None:
        """The session page's data; None when ``key`` has no current session."""
        now = time.time()
        found = [s for s in await self.reader.dashboard.sessions() if s.session_key == key]
        current = await self.operations.session_now(key)
        if not found or current is None:
            return None
        session, fullness = found[0], current.fullness
        window = fullness.window
        limits = Limits(window, int(window * HYGIENE_THRESHOLD), current.compresses_at)
        turns = await self.reader.dashboard.turn_history(session.session_id)
        compressions = await self.reader.dashboard.compressions(
            session.session_id, since=turns[0].at - 3600 if len(turns) >= 2000 else 0.0
        )
        data = {
            "now": now,
            "session": self._session_row(session, now, fullness),
            "model": current.model,
            "context": {
                "parts": fullness.parts,
                "window": window,
                "tokens": fullness.tokens,
                "percent": fullness.percent,
                "phrase": fullness.phrase,
                "counted": fullness.counted,
                "how": fullness.how,
                "threshold": current.compresses_at,
                "hygiene": limits.hygiene,
            },
            "cooldown": describe_cooldown(current.engine_state),
            "chart": render_chart(turns, compressions, limits),
            "turns": len(turns),
            "compressions": [{"at": c.at, **vars(c.mark)} for c in compressions[-20:]],
            "summary": fullness.summary,
            "query": query,
            "reminders": [
                {"due_at": r.due_at, "text": r.text}
                for r in await self.reader.scheduling.pending_reminders(key)
            ],
        }
        data.update(await self._messages(session.session_id, query, before))
        return data

    async def _messages(self, session_id: str, query: str, before: int | None) -> dict[str, Any]:
        if query.strip():
            hits = await self.reader.conversation.search(session_id, query, limit=50)
            return {
                "hits": [
                    {
                        "id": h.message_id,
                        "role": h.role,
                        "text": h.snippet,
                        "at": h.created_at,
                        "archived": h.archived,
                    }
                    for h in hits
                ],
                "messages": [],
                "older": None,
            }
        rows = await self.reader.dashboard.messages(
            session_id, before=before, limit=MESSAGES_PER_PAGE
        )
        return {
            "hits": [],
            "messages": [_message_row(row) for row in rows],
            "older": rows[0].id if len(rows) == MESSAGES_PER_PAGE else None,
        }


def _message_row(row: StoredMessage) -> dict[str, Any]:
    message = row.message
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(
            part.get("text", "") if part.get("type") == "text" else f"[{part.get('type')}]"
            for part in content
            if isinstance(part, dict)
        )
    text = content or ""
    if message.get("tool_calls"):
        names = [c.get("function", {}).get("name", "?") for c in message["tool_calls"]]
        text = (text + "\n" if text else "") + "→ " + ", ".join(names)
    cut = len(text) > SHOWN_CHARS
    return {
        "id": row.id,
        "role": message.get("role", ""),
        "text": text[:SHOWN_CHARS] + ("…" if cut else ""),
        "at": row.created_at,
        "tokens": row.token_count,
        "archived": not row.active,
    }
