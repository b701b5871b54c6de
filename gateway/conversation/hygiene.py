"""Session hygiene: the safety net that runs before the agent on every turn (docs/design.md#hygiene, #hygiene-threshold, #token-source).

The agent's own compressor works at its threshold with real token counts inside its tool
loop. Hygiene catches what grew between turns — a night of group chatter, a pasted log —
at a fixed 85% of the window, before the first request could overflow.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from agent.compression.settings import SAFETY_SHARE
from agent.usage_anchor import UsageAnchor, anchored_tokens
from gateway.conversation.transcript import SessionTranscript
from gateway.runtime import SessionRuntime

log = logging.getLogger(__name__)

#: Fixed on purpose (docs/design.md#hygiene-threshold): at the agent's 50% it made long sessions compress every turn.
HYGIENE_THRESHOLD = SAFETY_SHARE
WARN_AFTER_COMPRESSION = 0.95
MIN_MESSAGES = 4

TokenSource = Literal["api", "anchor", "estimate"]

FAILURE_NOTICE = (
    "I couldn't summarize the older part of this conversation just now, so nothing was "
    "changed. Send /compress to retry, or /new to start a fresh conversation."
)


@dataclass(frozen=True)
class TokenReading:
    tokens: int
    source: TokenSource


@dataclass(frozen=True)
class HygieneOutcome:
    anchor: UsageAnchor | None
    notice: str | None = None
    compressed: bool = False


def measure_tokens(
    runtime: SessionRuntime, transcript: SessionTranscript, anchor: UsageAnchor | None
) -> TokenReading:
    """The context size now, from the best source available (docs/design.md#token-source).

    (a) this process's last provider count, only while no row was appended since;
    (b) the persisted usage anchor plus an estimate of the rows after it;
    (c) the sum of the stored per-row counts.
    Rows counted by estimate count as a request shows them (a pasted log as its excerpt).
    """
    messages = transcript.messages
    if runtime.last_prompt_tokens is not None and runtime.last_prompt_rows == len(messages):
        return TokenReading(runtime.last_prompt_tokens, "api")
    agent = runtime.agent
    anchored = anchored_tokens(anchor, messages, agent.provider.route, estimate=agent.represented)
    if anchored is not None:
        return TokenReading(anchored, "anchor")
    return TokenReading(transcript.token_total(), "estimate")


class Hygiene:
    def __init__(self, *, enabled: bool, hard_message_limit: int) -> None:
        self.enabled = enabled
        self.hard_message_limit = hard_message_limit

    def needed(
        self, runtime: SessionRuntime, transcript: SessionTranscript, anchor: UsageAnchor | None
    ) -> bool:
        count = len(transcript.messages)
        if not self.enabled or count < MIN_MESSAGES:
            return False
        if count >= self.hard_message_limit:
            return True  # the valve holds whatever the token count says (docs/design.md#hygiene)
        window = runtime.engine.context_length
        return measure_tokens(runtime, transcript, anchor).tokens >= HYGIENE_THRESHOLD * window

    async def __call__(
        self, runtime: SessionRuntime, transcript: SessionTranscript, anchor: UsageAnchor | None
    ) -> HygieneOutcome:
        if not self.needed(runtime, transcript, anchor):
            return HygieneOutcome(anchor)
        engine = runtime.engine
        result = await transcript.compress(trigger_source="gateway_hygiene")
        if result.committed:
            after = transcript.token_total()
            if after >= WARN_AFTER_COMPRESSION * engine.context_length:
                log.warning(
                    "session %s still at %d of %d tokens after hygiene compression",
                    runtime.key,
                    after,
                    engine.context_length,
                )
            return HygieneOutcome(None, result.notice, compressed=True)
        if result.failure_class == "summary_budget":
            return HygieneOutcome(anchor)  # the turn's own call says which budget, and when
        if result.commit_status in ("aborted", "failed"):
            # The transcript is untouched; say so once, not on every turn after.
            notice = None if runtime.hygiene_notice_sent else FAILURE_NOTICE
            runtime.hygiene_notice_sent = True
            return HygieneOutcome(anchor, notice)
        return HygieneOutcome(anchor)
