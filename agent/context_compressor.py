"""The built-in context engine: summarize the middle of a conversation, keep both ends.

``compress()`` runs four phases (docs/design.md#tool-pruning to #assembly): clear old
tool output, choose the head and the tail, ask the summary model for a structured
hand-off summary of the middle, and assemble head + summary + tail. Failures of the
summary call follow docs/design.md#failure-ladder and pace themselves through a cooldown
the gateway persists on the session row (docs/design.md#cooldown). The engine never
writes anywhere: it returns the new list and the caller commits it.

Concurrency: one engine serves one session; a ``compress()`` that arrives while another is
in flight returns at once (``skipped:in_progress``): the list it holds is about to be
replaced, and compressing it again would be wasted work.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agent.compression import boundaries
from agent.compression.assembly import assemble, with_system_note
from agent.compression.cooldown import CooldownState
from agent.compression.settings import (
    SAFETY_SHARE,
    CompressionSettings,
    fallback_max_chars,
    resolve_model_threshold,
    tail_token_budget,
)
from agent.compression.summarizer import (
    ABORT_NOTICE,
    AUX_NOTICE,
    FAILURE_REASONS,
    FALLBACK_NOTICE,
    Summarizer,
    SummaryOutcome,
    record_abort,
)
from agent.compression.summary import SummaryFailure, summary_request
from agent.compression.telemetry import log_attempt
from agent.context_engine import CommitStatus, CompressionResult, ContextEngine, FailureClass
from agent.messages import JSON, Message
from agent.providers.base import Provider, Usage
from agent.tokens import estimate_message_tokens_rough
from agent.window import Window, represented_tokens

__all__ = ["CompressionSettings", "ContextCompressor", "resolve_model_threshold"]

log = logging.getLogger(__name__)


@dataclass
class _Attempt:
    attempt_id: str
    trigger_source: str
    messages: list[Message]
    tokens_before: int
    tool_results_pruned: int = 0


class ContextCompressor(ContextEngine):
    """The default engine (``context.engine: compressor``).

    ``main`` is the session's provider; ``auxiliary`` the optional summary model, its window
    in ``auxiliary_context_length`` (a number, or a function asked when it summarizes).
    ``clock`` returns epoch seconds; cooldowns are wall-clock so they survive restarts.
    """

    name = "compressor"

    def __init__(
        self,
        *,
        main: Provider,
        context_length: int,
        settings: CompressionSettings | None = None,
        auxiliary: Provider | None = None,
        model: str | None = None,
        provider: str | None = None,
        auxiliary_context_length: int | Callable[[], int | None] | None = None,
        clock: Callable[[], float] = time.time,
        session_id: str = "",
    ) -> None:
        self.settings = settings or CompressionSettings()
        self.main = main
        self.auxiliary = auxiliary
        self.auxiliary_context_length = auxiliary_context_length
        self.model = model or main.model
        self.provider_name = provider or main.name
        self.session_id = session_id
        self._clock = clock
        self._lock = asyncio.Lock()
        self.cooldown = CooldownState()
        self.aux_notice_sent = False
        #: The user was told summaries are thinner; not again until a real summary lands.
        self.fallback_notice_sent = False
        self._last_abort_class = ""
        self.last_completion_tokens = 0
        #: True until a response arrives after start, a model change or a compression (docs/design.md#gates).
        self.awaiting_real_usage = True
        self.threshold_ratio = self.settings.threshold
        self.token_scale = 1.0  # server tokens per estimated one (docs/design.md#calibration)
        self.summary_scale = 1.0  # the same, of the summary model (docs/design.md#summary-model)
        self._derive(self.model, context_length)

    # -- thresholds and budgets (docs/design.md#threshold, #boundaries, #output-reserve) ---
    def _derive(self, model: str, context_length: int) -> None:
        self.context_length = max(1, int(context_length))
        self.threshold_ratio = resolve_model_threshold(
            model,
            self.provider_name,
            self.settings.threshold,
            self.settings.model_thresholds,
            self.context_length,
        )
        self.threshold_tokens = max(1, int(self.input_budget * self.threshold_ratio))

    @property
    def window(self) -> Window:  # rows in the server's tokens, as the budgets are
        return Window(self.context_length, self.settings.max_output_tokens, self.token_scale)

    def calibrate(self, ratio: float) -> None:
        """Rows are measured in the server's tokens from now on (docs/design.md#calibration)."""
        self.token_scale = max(1.0, float(ratio))

    @property
    def output_reserve(self) -> int:
        """Tokens kept free for the reply (docs/design.md#output-reserve)."""
        return self.window.output_reserve

    @property
    def input_budget(self) -> int:
        """The window minus the output reserve: what thresholds are fractions of."""
        return self.window.input_budget

    @property
    def safety_tokens(self) -> int:
        """Past this the conversation must shrink now, cooldown or not."""
        return int(self.context_length * SAFETY_SHARE)

    @property
    def tail_token_budget(self) -> int:
        return tail_token_budget(self.settings, self.context_length, self.threshold_tokens)

    def cooldown_remaining(self) -> float:
        """Seconds until threshold compression may run again (0 when not paused)."""
        return self.cooldown.remaining(self._clock())

    # -- the ContextEngine contract -------------------------------------------------------

    def update_model(self, model: str, context_length: int, provider: str | None = None) -> None:
        """Re-derive thresholds for the new model/window; old usage no longer counts.

        Calling it again with the same model, window and provider changes nothing.
        """
        unchanged = (model, int(context_length), provider or self.provider_name) == (
            self.model,
            self.context_length,
            self.provider_name,
        )
        if unchanged:
            return
        self.model = model
        if provider:
            self.provider_name = provider
        self._derive(model, context_length)
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.awaiting_real_usage = True

    def update_from_response(self, usage: Usage | None) -> None:
        """Record a response's usage; a response without usage still ends the wait (docs/design.md#gates)."""
        self.awaiting_real_usage = False
        if usage is None:
            return
        self.last_prompt_tokens = int(usage.prompt_tokens)
        self.last_completion_tokens = int(usage.completion_tokens)

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """Whether ``prompt_tokens`` (default: the last reported) reached the threshold."""
        if not self.settings.enabled:
            return False
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        return tokens >= self.threshold_tokens

    def on_session_start(self, session_id: str) -> None:
        self.session_id = session_id

    def on_session_reset(self) -> None:
        self.compression_count = 0
        self.cooldown = CooldownState()
        self._last_abort_class = ""
        self.fallback_notice_sent = False
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.awaiting_real_usage = True

    def export_state(self) -> JSON:
        """Cooldown, ladders and counters, JSON-safe, for the session row (docs/design.md#cooldown)."""
        return {
            "compression_count": self.compression_count,
            **self.cooldown.to_dict(),
            "aux_notice_sent": self.aux_notice_sent,
            "fallback_notice_sent": self.fallback_notice_sent,
            "last_abort_class": self._last_abort_class,
        }

    def restore_state(self, state: Mapping[str, Any]) -> None:
        state = dict(state or {})
        try:
            self.compression_count = int(state.get("compression_count") or 0)
        except (TypeError, ValueError):
            self.compression_count = 0
        self.cooldown = CooldownState.from_dict(state)
        self.aux_notice_sent = bool(state.get("aux_notice_sent", False))
        self.fallback_notice_sent = bool(state.get("fallback_notice_sent", False))
        self._last_abort_class = str(state.get("last_abort_class") or "")

    # -- compress ------------------------------------------------------------------------

    async def compress(
        self,
        messages: list[Message],
        *,
        focus: str | None = None,
        force: bool = False,
        trigger_source: str = "auto",
    ) -> CompressionResult:
        attempt = _Attempt(
            attempt_id=uuid.uuid4().hex[:12],
            trigger_source=trigger_source,
            messages=messages,
            tokens_before=represented_tokens(messages, self.window),
        )
        if self._lock.locked():
            result = self._unchanged(attempt, "skipped", "skipped:in_progress")
        else:
            async with self._lock:
                try:
                    result = await self._compress(attempt, focus=focus, force=force)
                except asyncio.CancelledError:
                    raise
                except Exception:  # a compression bug must not end the turn; nothing changes
                    log.exception("context compression failed unexpectedly")
                    result = self._unchanged(attempt, "failed", "internal_error")
        log_attempt(result, session_id=self.session_id)
        return result

    async def _compress(
        self, attempt: _Attempt, *, focus: str | None, force: bool
    ) -> CompressionResult:
        if not self.settings.enabled and not force:
            return self._unchanged(attempt, "skipped", "disabled")
        fallback_only = False
        if force:
            self.cooldown.clear()
        elif self.cooldown.active(self._clock()) and attempt.trigger_source != "overflow":
            if not self._must_shrink(attempt):
                return self._unchanged(attempt, "blocked", "blocked:cooldown")
            # The cooldown paces the summary model; it never decides whether the prompt
            # fits (docs/design.md#cooldown).
            fallback_only = True
        messages = attempt.messages
        window = self.window
        tokens = [window.real(estimate_message_tokens_rough(m)) for m in messages]
        plan = boundaries.plan_boundaries(
            messages,
            tokens,
            budget=self.tail_token_budget,
            protect_last_n=self.settings.protect_last_n,
            min_tail_user_messages=self.settings.min_tail_user_messages,
            hard_ceiling=window.real(window.tail_cap),
        )
        if not plan.has_middle:
            return self._unchanged(attempt, "skipped", "too_few_messages")
        pruned, attempt.tool_results_pruned = boundaries.prune_old_tool_results(
            messages, plan.tail_start
        )
        request = summary_request(
            pruned,
            tokens,
            plan,
            focus=focus,
            context_length=self.context_length,
            summarizer_window=self._summarizer_window(),
            scale=self.summary_scale,
        )
        if not request.turns:
            # Only the previous summary lies between head and tail: nothing new to write.
            return self._unchanged(attempt, "skipped", "nothing_new")
        summarizer = Summarizer(
            self.main,
            self.auxiliary,
            timeout_seconds=self.settings.context_timeout_seconds,
            abort_on_failure=self.settings.abort_on_summary_failure,
            fallback_chars=fallback_max_chars(self.context_length),
            scale=self.summary_scale,
        )
        if fallback_only:
            outcome = SummaryOutcome(summarizer.fallback(request), "deterministic_fallback")
        else:
            outcome = await summarizer.summarize(request, self.cooldown)
            self.summary_scale = summarizer.scale  # what its overflows taught, kept
        if outcome.body is None:
            return self._abort(attempt, outcome.failure or SummaryFailure("other"))
        head: list[Message] = list(pruned[: plan.head_end])
        if plan.summary_index is None:
            head = with_system_note(head)  # first compression only: keeps the prefix cached
        tail = messages[plan.tail_start :]
        return self._commit(attempt, assemble(head, outcome.body, tail), outcome)

    def _must_shrink(self, attempt: _Attempt) -> bool:
        """Whether the conversation is past the safety line (the gateway's safety net
        asks only then; the provider's last count is a floor for the estimate)."""
        size = max(attempt.tokens_before, self.last_prompt_tokens)
        return attempt.trigger_source == "gateway_hygiene" or size >= self.safety_tokens

    def _notice_for(self, outcome: SummaryOutcome) -> str | None:
        if outcome.method == "deterministic_fallback" and outcome.failure is not None:
            if self.fallback_notice_sent:
                return None  # one notice per failure streak, not one per turn
            self.fallback_notice_sent = True
            return FALLBACK_NOTICE.format(reason=FAILURE_REASONS[outcome.failure.kind])
        if outcome.method == "aux_fallback_main" and not self.aux_notice_sent:
            self.aux_notice_sent = True
            return AUX_NOTICE
        return None

    def _summarizer_window(self) -> int:  # docs/design.md#summary-model
        own = self.auxiliary_context_length if self.auxiliary is not None else None
        own = own() if callable(own) else own
        return min(self.context_length, int(own or self.context_length))

    # -- outcomes ------------------------------------------------------------------------

    def _abort(self, attempt: _Attempt, failure: SummaryFailure) -> CompressionResult:
        failure_class = record_abort(
            self.cooldown, failure, self._clock(), self.settings.context_timeout_seconds
        )
        notice = None
        manual = attempt.trigger_source == "manual"
        if (failure_class != self._last_abort_class or manual) and (
            failure.kind != "budget" or manual  # a turn says the budget's own sentence
        ):
            notice = ABORT_NOTICE.format(reason=FAILURE_REASONS[failure.kind])
        self._last_abort_class = failure_class
        return replace(self._unchanged(attempt, "aborted", failure_class), notice=notice)

    def _commit(
        self, attempt: _Attempt, compacted: list[Message], outcome: SummaryOutcome
    ) -> CompressionResult:
        tokens_after = represented_tokens(compacted, self.window)
        if tokens_after >= attempt.tokens_before:
            return self._unchanged(attempt, "blocked", "blocked:ineffective")
        healthy = outcome.method in ("llm_summary", "aux_fallback_main")
        self.cooldown.committed(healthy=healthy)
        self._last_abort_class = ""
        if healthy:
            self.fallback_notice_sent = False
        self.compression_count += 1
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.awaiting_real_usage = True
        return CompressionResult(
            messages=compacted,
            committed=True,
            commit_status="committed",
            method=outcome.method,
            failure_class=outcome.failure_class,
            trigger_source=attempt.trigger_source,
            attempt_id=attempt.attempt_id,
            messages_before=len(attempt.messages),
            messages_after=len(compacted),
            tokens_before=attempt.tokens_before,
            tokens_after=tokens_after,
            tool_results_pruned=attempt.tool_results_pruned,
            summary=outcome.body,
            notice=self._notice_for(outcome),
        )

    @staticmethod
    def _unchanged(
        attempt: _Attempt, status: CommitStatus, failure_class: FailureClass | None
    ) -> CompressionResult:
        return CompressionResult(
            messages=attempt.messages,
            committed=False,
            commit_status=status,
            method="none",
            failure_class=failure_class,
            trigger_source=attempt.trigger_source,
            attempt_id=attempt.attempt_id,
            messages_before=len(attempt.messages),
            messages_after=len(attempt.messages),
            tokens_before=attempt.tokens_before,
            tokens_after=attempt.tokens_before,
            tool_results_pruned=attempt.tool_results_pruned,
        )
