"""What the ``costs`` table holds (docs/cost.md#what-is-stored): one
:class:`CostRecord` per model call, and the sums reports read (:class:`CostLine`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Literal

#: What a model call was for: a turn's answer, a compression's summary, the memory flush
#: before a compression, a voice note's transcription.
CostKind = Literal["chat", "summary", "flush", "transcription"]
#: How a report groups calls.
Grouping = Literal["day", "chat", "person", "model", "kind"]


@dataclass(frozen=True)
class CostRecord:
    """One model call: when, in which chat (its session key; None outside any chat), for
    whom (``platform:user_id`` of the person whose message started the turn; None for
    housekeeping), its usage, and what it cost in USD (None: the price is unknown)."""

    at: float
    session_key: str | None
    person: str | None
    kind: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: Decimal | None = None


@dataclass(frozen=True)
class CostHold:
    """An allowed call's estimate, counted as spent from ``at`` until its cost is kept or
    it failed (docs/cost.md#calls-side-by-side), by every replica of one database; the
    hold of a process that died counts until ``expires_at``."""

    id: str
    at: float
    session_key: str | None
    person: str | None
    amount: Decimal
    expires_at: float


@dataclass
class CostLine:
    """The calls of one group (a UTC day ``YYYY-MM-DD``, a chat, a person, a model, a
    kind): how many, their tokens, what the priced ones cost, and how many had no price."""

    group: str
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: Decimal = field(default_factory=Decimal)
    unpriced: int = 0

    def add(self, record: CostRecord) -> None:
        self.calls += 1
        self.prompt_tokens += record.prompt_tokens
        self.completion_tokens += record.completion_tokens
        self.cache_read_tokens += record.cache_read_tokens
        self.cache_write_tokens += record.cache_write_tokens
        if record.cost is None:
            self.unpriced += 1
        else:
            self.cost += record.cost
