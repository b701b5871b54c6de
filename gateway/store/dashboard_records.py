"""The records the dashboard's view of the store hands out (docs/design.md#dashboard),
the same for every backend."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.messages import JSON
from gateway.store.records import CompressionMark, UsageTotals


@dataclass(frozen=True)
class TurnStat:
    """One turn, as its commit recorded it."""

    session_id: str
    at: float
    #: The prompt size the model saw at the turn's last request (the usage anchor's);
    #: None when the provider reported no usage.
    prompt_tokens: int | None
    usage: UsageTotals = field(default_factory=UsageTotals)


@dataclass(frozen=True)
class CompressionRecord:
    """One committed compression of a conversation, as its commit recorded it."""

    session_id: str
    at: float
    mark: CompressionMark


@dataclass(frozen=True)
class SessionOverview:
    """A current session as the dashboard lists it."""

    session_key: str
    session_id: str
    platform: str
    chat_id: str | None
    thread_id: str | None
    model: str | None
    created_at: float
    updated_at: float
    active_messages: int
    archived_messages: int
    #: The stored per-row counts of the active rows (docs/design.md#tokens).
    active_tokens: int
    #: The provider's count at the last turn (the usage anchor), if there is one.
    anchor_tokens: int | None
    compression_count: int
    engine_state: JSON
    usage: UsageTotals


@dataclass(frozen=True)
class Totals:
    """Counts across the whole store since a moment (the overview's "today")."""

    since: float
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    #: Turns per platform since then.
    turns_by_platform: dict[str, int] = field(default_factory=dict)
    sessions_active: int = 0
    compressions_by_trigger: dict[str, int] = field(default_factory=dict)
    inbox_pending: int = 0
    undelivered_replies: int = 0
    reminders_pending: int = 0
