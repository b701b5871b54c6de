"""Live sessions: each open session's context engine and agent, opened from the store
and kept for reuse.

A turn reads and writes a session through :class:`~gateway.conversation.transcript.SessionTranscript`,
which :meth:`SessionRegistry.transcript` hands out.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable

from agent.messages import Message
from agent.tokens import TokenCounter
from gateway.conversation.chat_documents import ChatDocuments
from gateway.conversation.transcript import BeforeCompression, SessionTranscript
from gateway.events import EventBus, SessionReset, SessionStarted
from gateway.runtime import SessionRuntime
from gateway.store import (
    ConversationStore,
    DocumentStore,
    InboxEntry,
    NewMessage,
    SessionOrigin,
    SessionRecord,
    StoredMessage,
)

log = logging.getLogger(__name__)


#: Runtimes kept open (least recently used go first; docs/design.md#memory-footprint).
#: One that goes is built again from the store on its chat's next turn: all a runtime
#: holds that matters (anchor, calibration, the engine's state) is stored with each turn.
OPEN_RUNTIMES = 256

#: Builds a session's runtime for the model its chat chose (None: the configured one).
RuntimeFactory = Callable[[SessionRecord, str | None], SessionRuntime]


class SessionRegistry:
    """Opens sessions (current or new) and keeps their runtimes for reuse."""

    def __init__(
        self,
        store: ConversationStore,
        events: EventBus,
        build_runtime: RuntimeFactory,
        system_prompt: str,
        model: str,
        counter: TokenCounter,
        *,
        in_place: bool = True,
        window: Callable[[SessionRuntime], int] | None = None,
        model_name: Callable[[str | None], str] | None = None,
        before_compression: BeforeCompression | None = None,
    ) -> None:
        self.store = store
        #: The memory flush every compression goes through first (docs/design.md#memory-flush).
        self.before_compression = before_compression
        #: A session's model's window now; a limit learned in one session reaches the others.
        self.window = window
        #: The model name a chat's choice stands for, recorded on its new sessions.
        self.model_name = model_name or (lambda choice: model)
        self.events = events
        self.build_runtime = build_runtime
        self.system_prompt = system_prompt
        self.model = model
        self.counter = counter
        self.in_place = in_place
        #: The chats' documents, for their transcripts (docs/design.md#documents).
        self.documents: DocumentStore | None = None
        self._open: OrderedDict[str, SessionRuntime] = OrderedDict()
        #: How many runtimes are kept open at most.
        self.limit = OPEN_RUNTIMES

    def cached(self, key: str) -> SessionRuntime | None:
        return self._open.get(key)

    async def open(self, origin: SessionOrigin) -> SessionRuntime:
        """The runtime of the key's current session, opening (or starting) it if needed.

        The store decides which session is current, so a session ended or erased from
        outside (``nightowl sessions forget`` on a live gateway) is never written to again.
        """
        return await self.open_current(origin, await self.store.current_session(origin.session_key))

    async def open_current(
        self, origin: SessionOrigin, record: SessionRecord | None
    ) -> SessionRuntime:
        """:meth:`open`, with the current session's record (None: none) just read."""
        runtime = self._open.get(origin.session_key)
        if runtime is not None and record is not None and runtime.id == record.id:
            self._open.move_to_end(origin.session_key)
            self.follow_window(runtime)
            return runtime
        created = record is None
        choice = await self.store.chat_model(origin.session_key)  # docs/design.md#model-choice
        if record is None:
            system: Message = {"role": "system", "content": self.system_prompt}
            record = await self.store.start_session(
                origin, self.model_name(choice), NewMessage(system, self.counter.count(system))
            )
        runtime = self.build_runtime(record, choice)
        runtime.anchor = record.anchor
        runtime.engine.restore_state(record.engine_state)
        runtime.engine.on_session_start(record.id)
        self._open[origin.session_key] = runtime
        self._open.move_to_end(origin.session_key)
        while len(self._open) > self.limit:
            self._open.popitem(last=False)  # a turn still running keeps its own reference
        if created:
            self.events.emit(SessionStarted(record.id, origin.session_key))
        return runtime

    def follow_window(self, runtime: SessionRuntime) -> None:
        """The window the model's server serves now applies to ``runtime``: a smaller one
        learned in another session (an overflow there) before this session's next request,
        not after an overflow of its own; a larger one a server said it serves since."""
        window = self.window(runtime) if self.window is not None else runtime.engine.context_length
        if window != runtime.engine.context_length:
            provider = runtime.agent.provider
            runtime.engine.update_model(provider.model, window, provider.name)

    def drop(self, key: str) -> None:
        """Forget ``key``'s runtime: the next open builds it again (a model switch)."""
        self._open.pop(key, None)

    async def transcript(
        self,
        runtime: SessionRuntime,
        entries: list[InboxEntry] | None = None,
        history: list[StoredMessage] | None = None,
    ) -> SessionTranscript:
        """The session's active rows (plus ``entries`` waiting to join), ready to write to;
        ``history``: the rows, when they were just read."""
        if history is None:
            history = await self.store.load_active(runtime.id)
        transcript = SessionTranscript(
            self.store,
            runtime,
            history,
            entries or [],
            self.counter,
            self.events,
            in_place=self.in_place,
            before_compression=self.before_compression,
        )
        if self.documents is not None:
            transcript.documents = ChatDocuments(self.documents, runtime.key)
        return transcript

    async def existing(self, key: str) -> SessionRuntime | None:
        """The runtime of ``key``'s current session, without creating a session."""
        record = await self.store.current_session(key)
        if record is None:
            self._open.pop(key, None)
            return None
        return await self.open(
            SessionOrigin(key, record.platform, record.chat_id, record.thread_id, record.user_id)
        )

    async def reset(self, key: str) -> str | None:
        """End the current session under ``key`` (``/new``); returns its id, if any."""
        runtime = self._open.pop(key, None)
        record = runtime.record if runtime else await self.store.current_session(key)
        if record is None:
            return None
        await self.store.end_session(record.id, "reset")
        if runtime is not None:
            runtime.engine.on_session_reset()
        self.events.emit(SessionReset(record.id, key))
        return record.id
