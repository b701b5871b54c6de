"""What the agent needs from the place a conversation is kept.

The agent never touches storage: the gateway implements :class:`Transcript` on its
store and hands one to each turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agent.context_engine import CompressionResult
from agent.messages import JSON, Message


@dataclass(frozen=True)
class SearchResult:
    role: str
    snippet: str
    created_at: float  # epoch seconds
    archived: bool  # summarized away, no longer in the active context
    #: Where a hit outside the messages is: a document, its id and page.
    source: str = ""


@dataclass(frozen=True)
class DocumentPart:
    """Characters ``start``..``end`` of a document a chat holds (docs/design.md#documents)."""

    document_id: str
    name: str
    chars: int  # of the whole text
    start: int
    end: int
    text: str
    pages: int | None = None  # a PDF's; None for text, read by offset
    page: int | None = None  # where ``start`` is


class Transcript(Protocol):
    @property
    def session_id(self) -> str: ...

    async def commit_compression(
        self, result: CompressionResult, original: list[Message]
    ) -> list[Message]:
        """Make ``result.messages`` the active conversation, in one transaction.

        ``original`` is the list that was compressed. Every message of it is kept —
        archived and searchable — including ones not stored yet (the turn's own rows),
        never deleted. Returns the list to continue the turn with (the same messages).
        """
        ...

    async def save_engine_state(self, state: JSON) -> None:
        """Persist the context engine's state (cooldowns, counters) with the session."""
        ...

    async def search(self, query: str, limit: int) -> list[SearchResult]:
        """Full-text search over this conversation, archived rows included, and the
        chat's earlier sessions (docs/design.md#search-across-sessions)."""
        ...

    async def read_document(
        self, document_id: str, *, page: int | None, offset: int, max_chars: int
    ) -> DocumentPart | None:
        """Part of a document this chat holds: from ``page`` (a PDF's, 1-based), else
        from character ``offset``; None when the chat holds no such document."""
        ...
