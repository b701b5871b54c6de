"""What lives in memory beside one open session: its context engine, its agent, and the
counts the next turn needs (docs/design.md#token-source)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.context_engine import ContextEngine
from agent.loop import Agent
from gateway.store import AnchorRecord, SessionRecord


@dataclass
class SessionRuntime:
    """In-memory companions of one open session."""

    key: str
    record: SessionRecord
    engine: ContextEngine
    agent: Agent
    #: The provider's prompt count for the last request in THIS process, and how many
    #: active rows existed when it was taken (docs/design.md#token-source: stale once a row is appended).
    last_prompt_tokens: int | None = None
    last_prompt_rows: int = 0
    turns: int = field(default=0)
    #: The user was told a hygiene summary failed; not again until one succeeds (docs/design.md#hygiene).
    hygiene_notice_sent: bool = False
    #: The usage anchor as stored (docs/design.md#usage-anchor), kept current by every commit.
    anchor: AnchorRecord | None = None
    #: The model its chat chose (docs/design.md#model-choice); "default": ``model:``.
    model_choice: str = "default"

    @property
    def id(self) -> str:
        return self.record.id
