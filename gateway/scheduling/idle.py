"""Idle compression (docs/design.md#idle-compression): a chat that grew and went quiet is
compact before anyone writes in the morning.

A compression runs in the session's lane and only when the session has no turn in flight
and nothing waiting in its inbox, so it never races a turn.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from functools import partial

from gateway.conversation.hygiene import MIN_MESSAGES, measure_tokens
from gateway.conversation.lanes import Lanes
from gateway.conversation.sessions import SessionRegistry
from gateway.store import ConversationStore, IdleSession, SchedulingStore

log = logging.getLogger(__name__)


@dataclass(eq=False)
class IdleCompression:
    """Finds sessions idle ``after_minutes`` whose tokens are above ``threshold`` of the
    window, and compresses them.

    ``window`` is asked at every scan, so a smaller limit the provider stated after the
    start counts at once (docs/design.md#window-resolution), as it does for the session
    runtimes. ``clock`` (epoch seconds) is what "now" means; tests shift it.
    """

    store: SchedulingStore
    conversation: ConversationStore
    sessions: SessionRegistry
    lanes: Lanes
    _: KW_ONLY
    window: Callable[[], int]
    after_minutes: float | None
    threshold: float = 0.30
    clock: Callable[[], float] = time.time

    @property
    def enabled(self) -> bool:
        return self.after_minutes is not None

    @property
    def scan_seconds(self) -> float:
        """Every 5 minutes, or more often when sessions count as idle within 10 minutes."""
        if self.after_minutes is None:
            return 300.0
        return max(30.0, min(300.0, self.after_minutes * 30))

    async def scan(self) -> list[str]:
        """Compress every session idle long enough and big enough; returns their keys.

        Sessions are compressed one after another (a night's batch must not flood the
        provider), each in its own lane. The interval job calls this; tests may too.
        """
        if self.after_minutes is None:
            return []
        idle_since = self.clock() - self.after_minutes * 60
        min_tokens = math.ceil(self.threshold * self.window())
        compressed = []
        for candidate in await self.store.idle_sessions(idle_since, min_tokens):
            if self.lanes.busy(candidate.session_key):
                continue  # a turn or job is running: the session is not idle after all
            job = self.lanes.submit(candidate.session_key, partial(self._compress, candidate))
            try:
                if await job:
                    compressed.append(candidate.session_key)
            except Exception:  # one session's failure must not stop the others' compression
                log.exception("idle compression of %s failed", candidate.session_key)
        return compressed

    async def _compress(self, candidate: IdleSession) -> bool:
        key = candidate.session_key
        runtime = await self.sessions.existing(key)
        if runtime is None or runtime.id != candidate.session_id:
            return False  # reset or rotated since the scan
        if await self.conversation.inbox(key):
            return False  # a message arrived: its turn comes first, and it is not idle
        transcript = await self.sessions.transcript(runtime)
        reading = measure_tokens(runtime, transcript, transcript.restore_anchor())
        window = runtime.engine.context_length
        if len(transcript.messages) < MIN_MESSAGES or reading.tokens < self.threshold * window:
            await self.store.mark_idle_compressed(runtime.id)
            return False
        result = await transcript.compress(trigger_source="idle")
        if result.committed or result.commit_status == "skipped":
            # Not after a failure: the engine's own cooldown paces the next attempt.
            await self.store.mark_idle_compressed(runtime.record.id)
        log.info(
            "idle compression of %s: %s (%d → %d tokens)",
            key,
            result.commit_status,
            result.tokens_before,
            result.tokens_after,
        )
        return result.committed
