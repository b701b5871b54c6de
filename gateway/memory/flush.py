"""The flush before every compression, on the gateway's side (docs/design.md#memory-flush).

Every compression — hygiene, the agent's in-loop gates, ``/compress``, idle compression,
overflow recovery — is committed through ``SessionTranscript.commit_compression``, which
calls :class:`FlushBeforeCompression` first with the rows about to leave the active
context. So the flush runs once per compression whoever triggered it, and no caller
repeats it. It never stops the compression: it is bounded in time and size, and whatever
goes wrong is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.memory import block_budget
from agent.memory_flush import flush_span
from agent.messages import Message
from agent.providers.base import Provider
from gateway.config.schema import Config
from gateway.memory.scopes import Memories, Source
from gateway.runtime import SessionRuntime

log = logging.getLogger(__name__)

#: A flush waits at most this long for its model (never more than a summary may take).
TIMEOUT_SECONDS = 30.0
#: A flush is shown at most this much (the span and the notes it knows)...
SPAN_TOKENS = 6000
#: ...and never more than this share of the model's window.
SPAN_WINDOW_SHARE = 0.25


class FlushBeforeCompression:
    """Called by the transcript with the rows a compression is about to archive."""

    @classmethod
    def of(
        cls,
        config: Config,
        memories: Memories | None,
        provider: Provider,
        window: Callable[[], int],
    ) -> FlushBeforeCompression | None:
        """The flush ``config`` asks for, on ``provider`` (the summary model) and its
        ``window``; None when memory or the flush is off."""
        if memories is None or not config.memory.flush_before_compaction:
            return None
        timeout = min(TIMEOUT_SECONDS, config.compression.context_timeout_seconds)
        return cls(memories, provider, window=window, timeout=timeout)

    def __init__(
        self,
        memories: Memories,
        provider: Provider,
        *,
        window: Callable[[], int],
        timeout: float = TIMEOUT_SECONDS,
    ) -> None:
        self.memories = memories
        #: The summary model when one is configured (auxiliary.compression), else the main.
        self.provider = provider
        #: ``provider``'s window now (a limit learned from an overflow counts at once).
        self.window = window
        self.timeout = timeout

    async def __call__(
        self,
        runtime: SessionRuntime,
        span: list[Message],
        trigger: str,
        platform_message_id: str | None = None,
    ) -> None:
        if not block_budget(self.memories.max_tokens, runtime.agent.window):
            return  # a window too small for memory has none (docs/design.md#memory-block)
        source = Source(runtime.id, platform_message_id, "flush")
        memory = self.memories.for_chat(runtime.key, source)
        window = self.window()
        try:
            await flush_span(
                self.provider,
                span,
                memory,
                known=await memory.chat_notes(),
                span_tokens=min(SPAN_TOKENS, int(window * SPAN_WINDOW_SHARE)),
                window=window,
                timeout=self.timeout,
                trigger=trigger,
            )
        except Exception:  # a flush that breaks must never stop the compression it precedes
            log.exception(
                "memory flush before compression of %s failed; compressing anyway", runtime.key
            )
