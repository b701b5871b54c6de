"""One session's transcript as a turn sees it, and the one writer of its rows.

:class:`SessionTranscript` is the gateway's implementation of the agent's
:class:`~agent.transcript.Transcript`. Every row a session gets after it is started goes
through it: the turn's own rows, compressions (in-loop, hygiene, ``/compress``, idle),
observed group chatter and reminders the scheduler delivered. The store writes a
session's first row, its system prompt, together with the session itself
(docs/design.md#compression-commit).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from agent.context_engine import CompressionResult
from agent.messages import JSON, Message
from agent.tokens import TokenCounter
from agent.transcript import DocumentPart, SearchResult
from agent.turn_result import TurnResult
from agent.usage_anchor import UsageAnchor
from agent.window import represented_tokens
from gateway.conversation.chat_documents import ChatDocuments
from gateway.events import Compressed, CompressionFailed, EventBus
from gateway.runtime import SessionRuntime
from gateway.store import (
    AnchorRecord,
    CompressionCommit,
    CompressionMark,
    ConversationStore,
    InboxEntry,
    NewMessage,
    StoredMessage,
    UsageTotals,
)

log = logging.getLogger(__name__)

#: Called before every compression is committed with the rows about to leave the active
#: context, the trigger and the newest platform message id among them: the memory flush
#: (docs/design.md#memory-flush). It must not raise.
BeforeCompression = Callable[[SessionRuntime, list[Message], str, str | None], Awaitable[None]]


#: Keeps refused rows: (session id, rows, inbox ids) -> row ids (``CostStore.keep_refused``).
KeepRefused = Callable[[str, list[NewMessage], list[int]], Awaitable[list[int]]]


class MemorySearch(Protocol):
    """The memory notes a turn's search also finds (docs/design.md#memory-scopes)."""

    async def search(self, query: str, limit: int) -> list[SearchResult]: ...


class SessionTranscript:
    """One turn's view of a session: the active rows plus the inbox entries it answers."""

    def __init__(
        self,
        store: ConversationStore,
        runtime: SessionRuntime,
        history: list[StoredMessage],
        entries: list[InboxEntry],
        counter: TokenCounter,
        events: EventBus,
        *,
        in_place: bool = True,
        before_compression: BeforeCompression | None = None,
    ) -> None:
        self.store = store
        self.runtime = runtime
        self.counter = counter
        self.events = events
        self.in_place = in_place
        self.before_compression = before_compression
        #: The turn's memory, searched with the conversation; the memory block's tokens,
        #: counted with it (docs/design.md#memory-block). Set by the turn runner.
        self.memory: MemorySearch | None = None
        self.memory_tokens = 0
        #: The chat's documents (docs/design.md#documents). Set by the session registry.
        self.documents: ChatDocuments | None = None
        waiting = [entry for entry in entries if not entry.in_history]
        self.messages: list[Message] = [row.message for row in history]
        self.messages += [entry.message for entry in waiting]
        # What we know of each message object (its stored count, its platform id), so
        # rows carried unchanged into a compressed list are not counted again. The object
        # is kept in the value: an id() is only unique while its object lives. The
        # waiting messages' at once; the history's when first asked for (most turns never
        # ask: the usage anchor sizes the context, and a turn's new rows are not history).
        self._known: dict[int, tuple[Message, int, str | None]] = {
            id(entry.message): (entry.message, entry.token_count, entry.platform_message_id)
            for entry in waiting
        }
        self._history_unknown: list[StoredMessage] | None = history  # not in _known yet
        self._row_ids: list[int] = [row.id for row in history]
        self._persisted = len(history)
        # Every entry is owed its turn; all leave the inbox when the turn is stored.
        self._inbox_ids = [entry.id for entry in entries]

    def _all_known(self) -> dict[int, tuple[Message, int, str | None]]:
        """``_known`` with the history's rows in it too (what is already there wins)."""
        if self._history_unknown is not None:
            for row in self._history_unknown:
                entry = (row.message, row.token_count, row.platform_message_id)
                self._known.setdefault(id(row.message), entry)
            self._history_unknown = None
        return self._known

    # -- agent.transcript.Transcript --------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self.runtime.record.id

    async def commit_compression(
        self, result: CompressionResult, original: list[Message]
    ) -> list[Message]:
        if self.before_compression is not None:
            # Every trigger commits here, so every compression is flushed once, first.
            span, newest = self._leaving(original, result.messages)
            await self.before_compression(self.runtime, span, result.trigger_source, newest)
        old = self.runtime.record
        if self.in_place:
            ids = await self.store.archive_and_compress(old.id, self._compression(result, original))
        else:
            # Rotation (docs/design.md#rotation) starts a child session: the list is written there whole.
            child, ids = await self.store.rotate(
                old.id,
                [self.row(m) for m in result.messages],
                originals=[self.row(m) for m in original[self._persisted :]],
                absorbed_inbox=self._inbox_ids,
                engine_state=self.runtime.engine.export_state(),
                mark=compression_mark(result),
            )
            self.runtime.record = child
            self.runtime.engine.on_session_start(child.id)
        self._row_ids = ids
        self._persisted = len(ids)
        self.messages = list(result.messages)
        self.runtime.last_prompt_tokens = None
        self.runtime.anchor = None
        self.events.emit(
            Compressed(
                session_id=self.runtime.record.id,
                session_key=self.runtime.key,
                in_place=self.in_place,
                old_session_id="" if self.in_place else old.id,
                trigger_source=result.trigger_source,
                method=result.method,
                messages_before=result.messages_before,
                messages_after=result.messages_after,
                tokens_before=result.tokens_before,
                tokens_after=result.tokens_after,
            )
        )
        return self.messages

    def _compression(self, result: CompressionResult, original: list[Message]) -> CompressionCommit:
        """What to commit: stored rows the new list keeps stay as they are (same id,
        same time); everything else in it is new; messages not stored yet that the
        summary covers are kept as archived originals (docs/design.md#compression-commit)."""
        kept = kept_positions(original, result.messages)
        active: list[int | NewMessage] = []
        for message, position in zip(result.messages, kept, strict=True):
            if position is not None and position < self._persisted:
                active.append(self._row_ids[position])
            else:
                active.append(self.row(message))
        carried = {p for p in kept if p is not None}
        originals = [
            self.row(m) for p, m in enumerate(original) if p >= self._persisted and p not in carried
        ]
        for item in active:
            if isinstance(item, NewMessage):  # counted once, not again on every later turn
                self._known[id(item.message)] = (
                    item.message,
                    item.token_count,
                    item.platform_message_id,
                )
        return CompressionCommit(
            active=active,
            originals=originals,
            absorbed_inbox=self._inbox_ids,
            engine_state=self.runtime.engine.export_state(),
            mark=compression_mark(result),
        )

    def _leaving(
        self, original: list[Message], compacted: list[Message]
    ) -> tuple[list[Message], str | None]:
        """The messages of ``original`` a compression leaves out, and the newest platform
        message id among them (where a note they give was learned)."""
        kept = {p for p in kept_positions(original, compacted) if p is not None}
        span = [m for p, m in enumerate(original) if p not in kept]
        known = self._all_known()
        ids = [entry[2] for m in span if (entry := known.get(id(m))) and entry[2]]
        return span, ids[-1] if ids else None

    async def save_engine_state(self, state: JSON) -> None:
        await self.store.save_engine_state(self.session_id, state)

    async def compress(
        self, *, trigger_source: str, focus: str | None = None, force: bool = False
    ) -> CompressionResult:
        """Run the session's engine over the transcript and commit what it produced.

        The gateway's own compressions (hygiene, /compress, idle) all come through here;
        the agent's in-loop ones come through :meth:`commit_compression` directly.
        """
        engine = self.runtime.engine
        result = await engine.compress(
            self.messages, focus=focus, force=force, trigger_source=trigger_source
        )
        await self.save_engine_state(engine.export_state())
        if result.committed:
            await self.commit_compression(result, self.messages)
            self.runtime.hygiene_notice_sent = False
        else:
            report_failed_compression(self.events, self.runtime, result)
        return result

    async def search(self, query: str, limit: int) -> list[SearchResult]:
        hits = await self.store.search(self.session_id, query, limit)
        found = [SearchResult(h.role, h.snippet, h.created_at, h.archived) for h in hits]
        if self.memory is not None:
            found = [*await self.memory.search(query, limit), *found]
        if self.documents is not None:
            found = await self.documents.search(query, limit, hits, found)
        return found

    async def read_document(
        self, document_id: str, *, page: int | None, offset: int, max_chars: int
    ) -> DocumentPart | None:
        if self.documents is None:
            return None
        return await self.documents.read(document_id, page=page, offset=offset, max_chars=max_chars)

    # -- the gateway's side -----------------------------------------------------------------

    def count(self, message: Message) -> int:
        known = self._all_known().get(id(message))
        return known[1] if known is not None else self.counter.count(message)

    def row(
        self, message: Message, *, pending_delivery: bool = False, new: bool = False
    ) -> NewMessage:
        """``message`` as a row to store, with its known count and platform id; ``new``:
        it is not a history row (one of this turn's)."""
        known = (self._known if new else self._all_known()).get(id(message))
        if known is None:
            return NewMessage(message, self.counter.count(message), None, pending_delivery)
        return NewMessage(message, known[1], known[2], pending_delivery)

    def token_total(self) -> int:
        """The context as a request shows it, from the stored per-row counts (no
        re-tokenizing, docs/design.md#token-source): a row too big to show whole counts as its excerpt."""
        counts = [self.count(m) for m in self.messages]
        window = self.runtime.agent.window
        return represented_tokens(self.messages, window, counts) + window.real(self.memory_tokens)

    def restore_anchor(self) -> UsageAnchor | None:
        """The persisted usage anchor, if the row it ends at is still active (docs/design.md#usage-anchor)."""
        stored = self.runtime.anchor
        if stored is None:
            return None
        try:
            covered = self._row_ids.index(stored.message_id) + 1
        except ValueError:
            return None  # the transcript was rewritten since: fail closed
        return UsageAnchor(
            prompt_tokens=stored.prompt_tokens,
            completion_tokens=stored.completion_tokens,
            covered=covered,
            fingerprint=stored.fingerprint,
            route=stored.route,
            ratio=stored.ratio or 1.0,
            overhead=stored.overhead,
        )

    async def store_observed(self) -> None:
        """Store the waiting messages as rows, one per message, and take them out of the
        inbox: observed group chatter, which starts no turn (docs/design.md#groups)."""
        await self._append([self.row(m) for m in self.messages[self._persisted :]])

    async def record_reminder(self, reminder_id: int, text: str) -> bool:
        """Record a delivered reminder as an assistant row (so the model knows it reminded)
        and mark it sent, in one transaction; False when it was not pending any more."""
        message: Message = {"role": "assistant", "content": text}
        ids = await self._append([self.row(message)], reminder_sent=reminder_id)
        if ids:
            self.messages.append(message)
        return bool(ids)

    async def _append(self, rows: list[NewMessage], **extra: Any) -> list[int]:
        ids = await self.store.commit_turn(
            self.session_id, rows, consumed_inbox=self._inbox_ids, **extra
        )
        self._inbox_ids = []
        self._row_ids += ids
        self._persisted = len(self._row_ids)
        return ids

    async def commit_refused(self, keep: KeepRefused, entries: Sequence[InboxEntry]) -> list[int]:
        """Store the messages of ``entries``, which a budget refused, out of the active
        rows, and take them out of the inbox (docs/cost.md#budgets). The other waiting
        messages stay waiting: the turn answers them, or :meth:`store_observed` keeps them."""
        refused = {id(entry.message) for entry in entries if not entry.in_history}
        waiting = self.messages[self._persisted :]
        rows = [self.row(m, new=True) for m in waiting if id(m) in refused]
        taken = {entry.id for entry in entries}
        ids = await keep(self.session_id, rows, [i for i in self._inbox_ids if i in taken])
        self._inbox_ids = [i for i in self._inbox_ids if i not in taken]
        self.messages = self.messages[: self._persisted] + [
            m for m in waiting if id(m) not in refused
        ]
        return ids

    @property
    def waiting(self) -> bool:
        """Whether messages or inbox entries are still to be stored."""
        return len(self.messages) > self._persisted or bool(self._inbox_ids)

    async def commit_turn(self, result: TurnResult, *, reply_pending: bool) -> list[int]:
        """Store the turn's rows, take its inbox entries, move the anchor: one transaction."""
        self.messages = result.messages
        new = result.messages[self._persisted :]
        rows = [self.row(m, new=True) for m in new]  # after the rows stored: this turn's
        if reply_pending and rows and rows[-1].message.get("role") == "assistant":
            rows[-1] = self.row(rows[-1].message, pending_delivery=True, new=True)
        anchor = self._anchor_record(result.anchor, len(new))
        ids = await self.store.commit_turn(
            self.session_id,
            rows,
            consumed_inbox=self._inbox_ids,
            anchor=anchor,
            usage=UsageTotals(
                result.usage.prompt_tokens,
                result.usage.completion_tokens,
                result.usage.cache_read_tokens,
                result.usage.cache_write_tokens,
                result.requests,
            ),
        )
        self._inbox_ids = []
        self._row_ids += ids
        self._persisted = len(self._row_ids)
        if anchor is not None and anchor.message_id < 0:
            anchor = replace(anchor, message_id=ids[anchor.message_id])
        self.runtime.anchor = anchor
        return ids

    def _anchor_record(self, anchor: UsageAnchor | None, new_rows: int) -> AnchorRecord | None:
        if anchor is None or anchor.covered < 1:
            return None
        boundary = anchor.covered - 1
        if boundary >= self._persisted:
            message_id = boundary - self._persisted - new_rows  # negative: among the new rows
        else:
            message_id = self._row_ids[boundary]
        return AnchorRecord(
            anchor.prompt_tokens,
            anchor.completion_tokens,
            message_id,
            anchor.fingerprint,
            anchor.route,
            anchor.ratio,
            anchor.overhead,
        )


def compression_mark(result: CompressionResult) -> CompressionMark:
    """What the store keeps beside a compression for the dashboard (docs/design.md#dashboard)."""
    return CompressionMark(
        trigger_source=result.trigger_source,
        method=result.method,
        tokens_before=result.tokens_before,
        tokens_after=result.tokens_after,
        messages_before=result.messages_before,
        messages_after=result.messages_after,
    )


def report_failed_compression(
    events: EventBus, runtime: SessionRuntime, result: CompressionResult
) -> None:
    """``session:compress_failed`` for an attempt that was aborted or failed (a summary
    call that did not come back; skipped and blocked attempts are not failures)."""
    if result.commit_status not in ("aborted", "failed"):
        return
    events.emit(
        CompressionFailed(
            session_id=runtime.id,
            session_key=runtime.key,
            trigger_source=result.trigger_source,
            commit_status=result.commit_status,
            failure_class=result.failure_class or "",
        )
    )


def kept_positions(original: list[Message], compacted: list[Message]) -> list[int | None]:
    """For each message of ``compacted``, its position in ``original`` if it is one of them.

    The built-in engine hands back the very objects it keeps; an engine that returns
    copies is matched by equality, in order. Anything else (a summary, a head row it
    rewrote) is new.
    """
    by_identity = {id(message): index for index, message in enumerate(original)}
    positions: list[int | None] = []
    cursor = 0
    for message in compacted:
        found = by_identity.get(id(message))
        if found is None or found < cursor:
            found = next((i for i in range(cursor, len(original)) if original[i] == message), None)
        positions.append(found)
        if found is not None:
            cursor = found + 1
    return positions
