"""The records the store takes and hands out, the same for every backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from agent.messages import JSON, Message

#: What ``gateway.store`` hands out (``Waiting`` stays the store's own).
__all__ = [
    "KEEP",
    "AlertTold",
    "AnchorRecord",
    "ApprovedUser",
    "Claim",
    "CompressionCommit",
    "CompressionMark",
    "DatabaseProbe",
    "DatabaseReport",
    "DocumentHit",
    "DocumentInfo",
    "DocumentSlice",
    "DocumentText",
    "IdleSession",
    "InboxEntry",
    "Keep",
    "MemoryEntry",
    "MemoryOwner",
    "NewMemory",
    "NewMessage",
    "PairingRequest",
    "PendingDelivery",
    "Reminder",
    "SearchHit",
    "SessionOrigin",
    "SessionRecord",
    "SessionSummary",
    "StoredMessage",
    "UsageTotals",
]


@dataclass(frozen=True)
class UsageTotals:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    requests: int = 0


@dataclass(frozen=True)
class AnchorRecord:
    """The usage anchor as stored (docs/design.md#usage-anchor): real counts up to ``message_id``."""

    prompt_tokens: int
    completion_tokens: int
    message_id: int
    fingerprint: str
    route: str
    #: How the server counted against the estimate then (docs/design.md#calibration), and
    #: the estimated tokens beside the messages it counted (tool schemas, memory).
    ratio: float | None = None
    overhead: int | None = None


@dataclass(frozen=True)
class SessionRecord:
    id: str
    session_key: str
    platform: str
    chat_id: str | None
    thread_id: str | None
    user_id: str | None
    model: str | None
    parent_session_id: str | None
    created_at: float
    updated_at: float
    ended_at: float | None = None
    end_reason: str | None = None
    anchor: AnchorRecord | None = None
    engine_state: JSON = field(default_factory=dict)
    compression_count: int = 0
    usage: UsageTotals = field(default_factory=UsageTotals)


@dataclass(frozen=True)
class NewMessage:
    """A row to insert: an OpenAI-style message plus what the store keeps beside it."""

    message: Message
    token_count: int
    platform_message_id: str | None = None
    #: A final reply not yet handed to the platform; redelivered after a crash.
    pending_delivery: bool = False


@dataclass(frozen=True)
class CompressionMark:
    """What a compression did, kept beside it for the dashboard's chart
    (docs/design.md#dashboard): what triggered it, how, and the sizes before and after."""

    trigger_source: str
    method: str
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int


@dataclass(frozen=True)
class CompressionCommit:
    """A compression to commit in one transaction (docs/design.md#compression-commit).

    ``active`` is the new active list, in order: the id of a stored row that stays (it
    keeps its id, its time and its place) or a :class:`NewMessage` to insert at that
    place (a summary, a rewritten head row, a message not stored yet). Every other
    active row of the session is archived (``active=0, compacted=1``): flags flip,
    nothing is copied. ``originals`` are messages not stored yet that the summary
    covers; they are inserted archived, so a summary is never their only copy.
    """

    active: Sequence[int | NewMessage]
    originals: Sequence[NewMessage] = ()
    absorbed_inbox: Sequence[int] = ()
    engine_state: JSON | None = None
    #: Recorded in the same transaction (the ``compactions`` table), when given.
    mark: CompressionMark | None = None


class StoredMessage(NamedTuple):
    """A stored row (a tuple: thousands are built per turn, and cheaply)."""

    id: int
    message: Message
    token_count: int
    created_at: float
    platform_message_id: str | None = None
    active: bool = True
    compacted: bool = False
    #: A message a spending budget refused (kept, never active; docs/cost.md). Read by
    #: ``export_rows`` only: the other reads are of active rows, which are never refused.
    refused: bool = False


@dataclass(frozen=True)
class SessionOrigin:
    """Where a session's messages come from and its replies go."""

    session_key: str
    platform: str
    chat_id: str | None = None
    thread_id: str | None = None
    user_id: str | None = None


@dataclass(frozen=True)
class InboxEntry:
    """An inbound message waiting for its session's lane."""

    session_key: str
    platform: str
    chat_id: str
    message: Message  # the user row it becomes
    token_count: int
    addressed: bool
    thread_id: str | None = None
    user_id: str | None = None
    platform_message_id: str | None = None
    dedupe_key: str | None = None
    id: int = 0
    created_at: float = 0.0
    #: A compression already wrote this message into the history; only its turn is owed.
    in_history: bool = False
    #: The platform's kind of chat ("private", "group"...; None when stored before v8):
    #: personal memory shows only in the speaker's private chat (docs/design.md#memory-scopes).
    chat_type: str | None = None


@dataclass(frozen=True)
class PendingDelivery:
    message_id: int
    session_key: str
    platform: str
    chat_id: str | None
    thread_id: str | None
    text: str
    reply_to: str | None = None


@dataclass(frozen=True)
class Waiting:
    """What a session's lane finds when it wakes: replies stored but not delivered
    (oldest first, docs/design.md#delivery-guarantee), the inbox, and — read only when
    the inbox holds anything — the current session (None: there is none) and its active
    rows."""

    replies: list[PendingDelivery]
    inbox: list[InboxEntry]
    session: SessionRecord | None = None
    history: list[StoredMessage] | None = None


@dataclass(frozen=True)
class SearchHit:
    message_id: int
    role: str
    snippet: str
    created_at: float
    archived: bool


@dataclass(frozen=True)
class SessionSummary:
    session_key: str
    session_id: str
    platform: str
    active_messages: int
    archived_messages: int
    active_tokens: int
    updated_at: float
    #: Messages a budget refused: kept, never in the context (docs/cost.md#budgets).
    refused_messages: int = 0


@dataclass(frozen=True)
class Reminder:
    """A message the agent scheduled for a chat (docs/design.md#tools); ``due_at`` is epoch seconds."""

    session_key: str
    platform: str
    chat_id: str
    text: str
    due_at: float
    thread_id: str | None = None
    id: int = 0
    created_at: float = 0.0
    #: When it was delivered; None while pending.
    sent_at: float | None = None


@dataclass(frozen=True)
class IdleSession:
    """A current session nobody wrote to lately, with the size of its active context."""

    session_id: str
    session_key: str
    active_messages: int
    active_tokens: int
    updated_at: float


@dataclass(frozen=True)
class DatabaseReport:
    """A read-only look at a database file (``nightowl doctor``)."""

    schema_version: int
    #: The version this nightowl writes; an older file is upgraded at the next start.
    current_version: int
    #: ``PRAGMA integrity_check`` output: ``["ok"]`` when the file is sound.
    integrity: list[str]

    @property
    def sound(self) -> bool:
        return self.integrity == ["ok"]


@dataclass(frozen=True)
class DatabaseProbe:
    """What a PostgreSQL server says (``nightowl doctor``, docs/design.md#replicas)."""

    #: Where, without the password.
    where: str
    #: The schema version found; None for a database nightowl never used.
    schema_version: int | None
    #: The version this nightowl writes.
    current_version: int
    #: A first connection could take an advisory lock.
    lock_taken: bool
    #: A second connection could take it too (a pooler in transaction mode).
    lock_shared: bool
    #: The database's clock minus this machine's, in seconds, and half the time asking took.
    clock_skew: float
    clock_uncertainty: float


@dataclass(frozen=True)
class PairingRequest:
    """A stranger asking for access (docs/design.md#pairing): who, where to answer, the
    code the owner approves, until when it is valid (epoch seconds). Never their message."""

    platform: str
    user_id: str
    user_name: str
    chat_id: str
    code: str
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class ApprovedUser:
    """A user let in by pairing: allowed beside the config's allowlist until revoked."""

    platform: str
    user_id: str
    user_name: str
    approved_at: float
    #: Who approved: ``cli`` or the owner's ``<platform>:<user id>``.
    approved_by: str


@dataclass(frozen=True)
class AlertTold:
    """What the operator was last told of one alert condition (docs/operations.md#alerts):
    kept in the store, so replicas tell it once and a restart does not tell it again."""

    #: The condition, with ``@<host>`` for one host's own on a shared database.
    condition: str
    #: ``started`` or ``cleared``.
    state: str
    since: float
    told_at: float
    #: What it is, as told (the clearing's message repeats it).
    what: str
    #: When it ends by itself (a budget's reset), if it does.
    until: float | None = None


class Claim(Enum):
    """Whether this process is the one to tell an alert's start or clearing now."""

    #: It is: nobody told it yet, and the last message on it is ``after_seconds`` old.
    TOLD = "told"
    #: Someone did already (another replica, or this gateway before a restart).
    ALREADY = "already"
    #: The last message on it is too recent: look again at the next check.
    WAIT = "wait"


class Keep(Enum):
    """The type of :data:`KEEP`."""

    KEEP = "keep"


#: "Leave the usage anchor as it is" for ``commit_turn``.
KEEP = Keep.KEEP


class MemoryOwner(NamedTuple):
    """Whose a memory note is (docs/design.md#memory-scopes): a person's (``user``,
    ``"<platform>:<user id>"``) or a chat's (``chat``, its session key)."""

    scope: str
    owner: str


@dataclass(frozen=True)
class NewMemory:
    """A memory note to keep, and where it was learned."""

    owner: MemoryOwner
    text: str
    session_id: str | None = None
    #: The platform's id of the message it was learned from, when known.
    platform_message_id: str | None = None
    #: ``tool`` (the model called remember in a turn) or ``flush`` (before a compression).
    learned_by: str = "tool"


@dataclass(frozen=True)
class MemoryEntry:
    """A stored memory note. ``archived_at`` is set once a newer note replaced it
    (``replaced_by``): it stays, searchable, until a user or the operator forgets it."""

    id: int
    owner: MemoryOwner
    text: str
    created_at: float
    last_used_at: float
    session_id: str | None = None
    platform_message_id: str | None = None
    learned_by: str = "tool"
    archived_at: float | None = None
    replaced_by: int | None = None


@dataclass(frozen=True)
class DocumentText:
    """A document's extracted text, to keep once by content hash (docs/design.md#documents).

    ``parts`` are a PDF's pages (``paged``) or a text's chunks, in order; the whole text
    is their concatenation.
    """

    sha256: str
    kind: str  #: "pdf", "docx" or "text"
    mime_type: str
    size: int  #: bytes of the file
    parts: Sequence[str]
    paged: bool = False
    #: What was kept when a reading limit cut the text ("the first 2,000 of 5,000
    #: pages"); None: all of it.
    kept: str | None = None

    @property
    def chars(self) -> int:
        return sum(len(part) for part in self.parts)


@dataclass(frozen=True)
class DocumentInfo:
    """A kept document as one chat knows it: under the name it was sent with there."""

    document_id: str
    name: str
    kind: str
    size: int
    chars: int
    #: Pages of a PDF; None for text, which is read by character offset.
    pages: int | None = None


@dataclass(frozen=True)
class DocumentSlice:
    """Characters ``start``..``end`` of a document's text (on ``page`` of a PDF)."""

    document: DocumentInfo
    start: int
    end: int
    text: str
    page: int | None = None


@dataclass(frozen=True)
class DocumentHit:
    """A document found by full-text search: once per document, at its best page."""

    document: DocumentInfo
    snippet: str
    created_at: float
    page: int | None = None
