"""What the gateway needs from storage, in four narrow protocols.

Every consumer types against one of these, never against a backend: the conversation
(router, sessions, turn runner, commands), the scheduling (reminders, idle sessions),
the operator (``nightowl sessions``, ``doctor``) and pairing (``nightowl pairing``,
``/pair``, the router). A backend implements all four over one connection; the store's
tests run against these protocols on both backends.

The rules every implementation keeps are in docs/design.md#storage: nothing is deleted
but by :meth:`OperatorStore.forget`; a compression flips flags and copies nothing
(docs/design.md#compression-commit); an inbound message is durable when
:meth:`ConversationStore.enqueue` returns and leaves the inbox in the transaction that
stores its turn (docs/design.md#inbox).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from agent.cost.budget import Spent
from agent.messages import JSON
from gateway.store.cost_records import CostHold, CostLine, CostRecord, Grouping
from gateway.store.dashboard_records import CompressionRecord, SessionOverview, Totals, TurnStat
from gateway.store.records import (
    AlertTold,
    AnchorRecord,
    ApprovedUser,
    Claim,
    CompressionCommit,
    CompressionMark,
    DocumentHit,
    DocumentInfo,
    DocumentSlice,
    DocumentText,
    IdleSession,
    InboxEntry,
    Keep,
    MemoryEntry,
    MemoryOwner,
    NewMemory,
    NewMessage,
    PairingRequest,
    PendingDelivery,
    Reminder,
    SearchHit,
    SessionOrigin,
    SessionRecord,
    SessionSummary,
    StoredMessage,
    UsageTotals,
    Waiting,
)

__all__ = [
    "AlertStore",
    "ChatStore",
    "ConversationStore",
    "CostStore",
    "DashboardStore",
    "DocumentStore",
    "MemoryStore",
    "OperatorStore",
    "PairingStore",
    "SchedulingStore",
]


class ConversationStore(Protocol):
    """Sessions, their rows and the inbox: what a conversation's way through the gateway
    reads and writes."""

    # -- the inbox (docs/design.md#inbox) -------------------------------------------------

    async def enqueue(self, entry: InboxEntry) -> bool:
        """Store an inbound message durably; False when its dedupe key was seen before."""
        ...

    async def remember_inbound(self, dedupe_key: str) -> bool:
        """Record an event handled without an inbox row (a command); False if seen before."""
        ...

    async def inbox(self, session_key: str) -> list[InboxEntry]: ...

    async def waiting(self, session_key: str) -> Waiting:
        """What the session's lane reads when it wakes, in one read: its undelivered
        replies, its inbox and, when the inbox holds anything, the current session and
        its active rows (:class:`~gateway.store.records.Waiting`)."""
        ...

    async def session_keys_with_inbox(self) -> list[str]: ...

    async def forget_seen(self, before: float) -> int:
        """Drop dedupe keys recorded before ``before`` (epoch seconds); how many went."""
        ...

    # -- sessions -------------------------------------------------------------------------

    async def current_session(self, session_key: str) -> SessionRecord | None: ...

    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    async def start_session(
        self,
        origin: SessionOrigin,
        model: str,
        system: NewMessage,
        *,
        parent_id: str | None = None,
    ) -> SessionRecord:
        """Open a new session for ``origin.session_key`` with its system prompt row."""
        ...

    async def end_session(self, session_id: str, reason: str) -> None: ...

    async def save_engine_state(self, session_id: str, state: JSON) -> None: ...

    async def set_anchor(self, session_id: str, anchor: AnchorRecord | None) -> None: ...

    async def chat_model(self, session_key: str) -> str | None:
        """The model the chat chose with /model (docs/design.md#model-choice); None: the
        configured one."""
        ...

    async def choose_model(self, session_key: str, choice: str | None, model: str) -> None:
        """Keep the chat's choice (None: back to the configured model) and, in the same
        transaction, record ``model`` on its current session and clear its usage anchor."""
        ...

    # -- rows -----------------------------------------------------------------------------

    async def load_active(self, session_id: str) -> list[StoredMessage]:
        """The session's active rows in conversation order (docs/design.md#storage). Treat
        the dicts as read-only."""
        ...

    async def commit_turn(
        self,
        session_id: str,
        new: Sequence[NewMessage],
        *,
        consumed_inbox: Sequence[int] = (),
        anchor: AnchorRecord | Keep | None = Keep.KEEP,
        usage: UsageTotals | None = None,
        reminder_sent: int | None = None,
    ) -> list[int]:
        """Append rows, take inbox entries out, move the anchor: one transaction.

        ``reminder_sent`` marks that reminder delivered in the same transaction (its row
        is among ``new``); when it was not pending any more nothing is written and the
        result is empty, so a reminder is recorded at most once.
        """
        ...

    async def archive_and_compress(
        self, session_id: str, compression: CompressionCommit
    ) -> list[int]:
        """Commit a compression in place, in one transaction (docs/design.md#compression-commit)."""
        ...

    async def rotate(
        self,
        session_id: str,
        compacted: Sequence[NewMessage],
        *,
        originals: Sequence[NewMessage] = (),
        absorbed_inbox: Sequence[int] = (),
        engine_state: JSON | None = None,
        mark: CompressionMark | None = None,
    ) -> tuple[SessionRecord, list[int]]:
        """Legacy compression: a child session carries ``compacted`` forward (docs/design.md#rotation).

        ``originals`` (not stored yet) complete the parent's transcript. Raises
        :class:`SessionEnded` if the session ended meanwhile: it is never revived."""
        ...

    async def search(self, session_id: str, query: str, limit: int = 5) -> list[SearchHit]:
        """Full-text search over the conversation, archived rows included, each message once
        (docs/design.md#tools, #compression-commit). The chat's earlier sessions (ended by
        /new, or rotated) count as the same conversation; another chat's never do
        (docs/design.md#search-across-sessions)."""
        ...

    # -- delivery (docs/design.md#delivery-guarantee) -------------------------------------

    async def mark_delivered(self, message_ids: Sequence[int]) -> None: ...

    async def pending_deliveries(self, session_key: str | None = None) -> list[PendingDelivery]:
        """Replies stored but not yet handed to their platform, oldest first; each carries
        the platform id of the user message it answers, to thread it."""
        ...

    async def newest_stored_message_ids(self, platform: str, since: float) -> dict[str, int]:
        """``{chat id: newest platform message id}`` stored since ``since``: where a
        platform's catch-up starts (docs/design.md#delivery-guarantee)."""
        ...


class SchedulingStore(Protocol):
    """Reminders the agent set and the sessions idle compression looks at."""

    async def add_reminder(self, reminder: Reminder) -> Reminder: ...

    async def get_reminder(self, reminder_id: int) -> Reminder | None: ...

    async def pending_reminders(self, session_key: str | None = None) -> list[Reminder]: ...

    async def mark_reminder_sent(self, reminder_id: int) -> bool:
        """Mark a reminder delivered without recording it in a transcript (one recorded in
        a transcript goes through ``ConversationStore.commit_turn(reminder_sent=...)``);
        False when it was not pending any more."""
        ...

    async def idle_sessions(self, idle_since: float, min_tokens: int = 0) -> list[IdleSession]: ...

    async def mark_idle_compressed(self, session_id: str) -> None: ...


class OperatorStore(Protocol):
    """``nightowl sessions`` and ``doctor``: list, export, erase, check."""

    async def list_sessions(self) -> list[SessionSummary]: ...

    async def ended_sessions(self, session_key: str | None = None) -> int: ...

    async def export_rows(self, session_key: str) -> list[tuple[str, StoredMessage]]:
        """Every row of every session ever held under ``session_key``, archived and
        refused ones included (each with its ``refused`` flag read)."""
        ...

    async def forget(self, session_key: str) -> int:
        """Erase everything stored under ``session_key``: the only deletion in nightowl."""
        ...

    async def integrity_check(self) -> str: ...

    async def scrub(self) -> bool:
        """Make erased rows unrecoverable from the file (free pages, WAL, index segments)."""
        ...


class PairingStore(Protocol):
    """Strangers' pairing requests and the users approved through them
    (docs/design.md#pairing). Times are given by the caller (its clock)."""

    async def request(
        self,
        candidate: PairingRequest,
        *,
        limit: int,
        fresh_code: Callable[[], str],
        full_seconds: float | None = None,
    ) -> PairingRequest | None:
        """The pending request of ``candidate``'s user: the one they already have, else
        ``candidate`` stored — with a code from ``fresh_code`` if another pending request
        holds its code — or None when ``limit`` requests are pending on that platform.
        Expired requests are removed first; when ``candidate`` fills the last place, every
        request of the platform expires within ``full_seconds``. One transaction."""
        ...

    async def withdraw(
        self, now: float, platform: str | None = None, user_id: str | None = None
    ) -> list[PairingRequest]:
        """Remove the pending requests of ``user_id`` on ``platform`` (all of a platform, or
        all); the requests removed."""
        ...

    async def approve(self, code: str, by: str, now: float) -> ApprovedUser | None:
        """Turn the request holding ``code`` (unexpired at ``now``) into an approved user,
        in one transaction; None when no such request is pending."""
        ...

    async def deny(self, code: str, now: float) -> PairingRequest | None:
        """Remove the request holding ``code``; the request, or None if none was pending."""
        ...

    async def revoke(self, platform: str, user_id: str) -> bool:
        """Remove an approved user; False when they were not one."""
        ...

    async def pending(self, now: float) -> list[PairingRequest]:
        """Requests unexpired at ``now``, oldest first."""
        ...

    async def approved(self) -> list[ApprovedUser]:
        """Approved users, in the order they were approved."""
        ...

    async def revision(self) -> int:
        """A number that changes whenever the approved users change, in any process."""
        ...


class DocumentStore(Protocol):
    """Documents' text, kept once by content hash, and which chats hold them
    (docs/design.md#documents). A chat reads and finds only the documents it holds."""

    async def keep_document(
        self, session_key: str, name: str, document: DocumentText
    ) -> DocumentInfo:
        """Keep ``document`` (its text stored once, whoever sent it before) and let the
        chat ``session_key`` hold it under ``name``. One transaction."""
        ...

    async def read_document(
        self,
        session_key: str,
        document_id: str,
        *,
        page: int | None = None,
        offset: int = 0,
        max_chars: int = 6000,
    ) -> DocumentSlice | None:
        """At most ``max_chars`` of the text: from ``page`` (1-based, a PDF's), else from
        character ``offset``; None when the chat holds no such document."""
        ...

    async def search_documents(
        self, session_key: str, query: str, limit: int = 5
    ) -> list[DocumentHit]:
        """Full-text search over the chat's documents: each document once."""
        ...

    async def documents_in_messages(self, message_ids: Sequence[int]) -> dict[int, set[str]]:
        """The ids of the documents each of these message rows shows (its headers)."""
        ...


class ChatStore(Protocol):
    """Chats that continue under another id (docs/design.md#chat-moves)."""

    async def move_chat(self, platform: str, old_chat_id: str, new_chat_id: str) -> bool:
        """Move everything kept under the old chat id to the new one, in one transaction:
        sessions (current and ended), waiting inbox entries, reminders, documents, the
        chat's memory notes. False when this move was made before (a second service
        message, a redelivery)."""
        ...

    async def moved_chats(self) -> list[tuple[str, str, str]]:
        """``(platform, old chat id, new chat id)`` of every move, oldest first."""
        ...


class MemoryStore(Protocol):
    """Long-term memory notes (docs/design.md#memory): a person's and a chat's. Nothing
    here is deleted but by :meth:`forget_memory` and :meth:`forget_memories` (a user's
    /forget, the operator's ``nightowl memory forget``) and ``OperatorStore.forget``."""

    async def remember(
        self, note: NewMemory, *, replaces: int | None = None
    ) -> tuple[MemoryEntry, bool]:
        """Keep ``note``, in one transaction; ``(entry, True)`` when it is new.

        An active note of the same owner with the same text (ignoring case) is used again
        instead (its last use moves; ``False``). ``replaces``: an active note of the same
        owner that this one replaces is archived (never deleted)."""
        ...

    async def memories(
        self, owners: Sequence[MemoryOwner] | None = None, *, archived: bool = False
    ) -> list[MemoryEntry]:
        """Active notes of ``owners`` (None: everyone's), most recently used first;
        archived ones too when ``archived``."""
        ...

    async def get_memory(self, memory_id: int) -> MemoryEntry | None: ...

    async def search_memories(
        self, owners: Sequence[MemoryOwner], query: str, limit: int = 5
    ) -> list[MemoryEntry]:
        """Notes of ``owners`` holding every word of ``query``, archived ones included;
        those found count as used."""
        ...

    async def forget_memory(self, memory_id: int) -> int:
        """Delete a note and the older versions it replaced; how many rows went."""
        ...

    async def forget_memories(self, owner: MemoryOwner) -> int:
        """Delete every note of ``owner``, archived included; how many went."""
        ...


class DashboardStore(Protocol):
    """What the operator's dashboard reads (docs/design.md#dashboard); it writes nothing.
    A conversation here is a session with the ones it was rotated from."""

    async def sessions(self) -> list[SessionOverview]:
        """Every current session, most recently active first."""
        ...

    async def turn_history(self, session_id: str, limit: int = 2000) -> list[TurnStat]:
        """The conversation's last ``limit`` turns, oldest first."""
        ...

    async def compressions(
        self, session_id: str, since: float = 0.0
    ) -> list[CompressionRecord]: ...

    async def messages(
        self, session_id: str, *, before: int | None = None, limit: int = 100
    ) -> list[StoredMessage]:
        """The ``limit`` newest rows before row ``before``, archived ones included."""
        ...

    async def totals(self, since: float) -> Totals:
        """Turns, tokens, compressions since ``since``; what waits now."""
        ...


class CostStore(Protocol):
    """What every model call cost, and what was spent against each budget
    (docs/cost.md#what-is-stored). Money is exact: :class:`~decimal.Decimal` USD."""

    async def record(self, entry: CostRecord, *, release: str | None = None) -> None:
        """Keep one call's cost (durable when this returns), and let go the hold named
        ``release`` in the same write."""
        ...

    async def spent(self, person: str | None, chat: str | None, now: float) -> Spent:
        """What was spent by ``person`` and in ``chat`` today, and by the whole bot this
        month (UTC periods, docs/cost.md#reset-times), the estimates of the calls in flight
        included (every replica's); unpriced calls count nothing."""
        ...

    async def hold(self, hold: CostHold, admits: Callable[[Spent], bool]) -> bool:
        """Keep ``hold`` when ``admits`` what was spent at ``hold.at`` (as :meth:`spent`
        says it); False, keeping nothing, when it does not. One check at a time across
        replicas, so two calls never both take the last of a budget."""
        ...

    async def release(self, hold_id: str) -> None:
        """The call's cost is kept, or it failed: its hold no longer counts."""
        ...

    async def drop_holds(self) -> None:
        """Forget every hold: at the start of the only process on the database, the calls
        they held died with the last one."""
        ...

    async def calls(
        self,
        since: float,
        until: float | None = None,
        *,
        chat: str | None = None,
        person: str | None = None,
    ) -> list[CostRecord]:
        """The calls from ``since`` (to ``until``), oldest first, of one chat or person."""
        ...

    async def totals(
        self,
        by: Grouping,
        since: float,
        until: float | None = None,
        *,
        chat: str | None = None,
        person: str | None = None,
    ) -> list[CostLine]:
        """The calls from ``since`` summed per ``by`` group, dearest first (days in order)."""
        ...

    async def keep_refused(
        self, session_id: str, rows: Sequence[NewMessage], consumed_inbox: Sequence[int]
    ) -> list[int]:
        """Store the messages a budget refused and take them out of the inbox, in one
        transaction: kept (``refused = 1``) but not active, so no request and no search
        ever shows them to a model (docs/cost.md#budgets)."""
        ...


class AlertStore(Protocol):
    """What the operator was last told of each alert condition (docs/operations.md#alerts)."""

    async def told(self) -> list[AlertTold]:
        """Every condition's last message, oldest first."""
        ...

    async def claim(self, alert: AlertTold, after: float) -> tuple[Claim, AlertTold | None]:
        """Take the telling of ``alert.state`` (at ``alert.told_at``) unless someone told
        it already or told anything of it within ``after`` seconds; when not taken, the
        stored row that stopped it."""
        ...

    async def extend(self, condition: str, until: float) -> None:
        """A told start that ends by itself ends later than was stored (a budget with a
        later reset joined the one told): a restart meanwhile must not think it over."""
        ...
