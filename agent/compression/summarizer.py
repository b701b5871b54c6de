"""Running the summary call through the failure table (docs/design.md#failure-ladder).

The auxiliary model (if configured) goes first; any failure there hands the same request
to the main model, whose overload gets one retry. What happens after a final failure —
abort with a cooldown, or the deterministic fallback — is decided here from the failure
kind and the session's ladders.
"""

from __future__ import annotations

import logging
from dataclasses import KW_ONLY, dataclass, replace

from agent.calibration import FIXED_TOKENS
from agent.compression.cooldown import (
    FLAT_SECONDS,
    OVERLOAD_DEGRADE_AFTER,
    CooldownState,
    ladder_seconds,
)
from agent.compression.fallback import build_fallback_summary
from agent.compression.markers import SUMMARY_PREFIX, summary_body
from agent.compression.summary import (
    SUMMARIZER_OUTPUT_SHARE,
    SummaryFailure,
    SummaryRequest,
    build_summary_messages,
    plan_summary_calls,
    request_summary,
)
from agent.context_engine import FailureClass, Method
from agent.messages import Message
from agent.providers.base import Provider
from agent.tokens import estimate_messages_tokens_rough

log = logging.getLogger(__name__)

#: A summary model's count, learned from its overflow, is taken this much heavier.
SCALE_MARGIN = 1.05
#: ...and never more than this (CJK on a Latin-trained tokenizer: a token a character,
#: four times the estimate); a larger figure is a server's error, not its tokenizer.
MAX_SCALE = 4.0

#: Why a summary failed, in words safe to show a user (no error text, no secrets).
FAILURE_REASONS = {
    "timeout": "the summary model did not answer in time",
    "length": "the summary model ran out of output room",
    "malformed": "the summary model sent a broken reply",
    "empty": "the summary model sent an empty reply",
    "overloaded": "the summary model is overloaded",
    "auth": "the summary model refused the credentials",
    "quota": "the summary model's quota or rate limit was hit",
    "network": "the summary model could not be reached",
    "budget": "a spending budget is used up",
    "other": "the summary model failed",
}
AUX_NOTICE = (
    "The summary model configured under auxiliary.compression failed, so the main model "
    "wrote the summary instead. Please check auxiliary.compression."
)
FALLBACK_NOTICE = (
    "Earlier messages were condensed without the summary model ({reason}), so the summary "
    "is thinner than usual. The original messages are archived and searchable."
)
ABORT_NOTICE = (
    "I could not condense the earlier conversation just now ({reason}); nothing was removed. "
    "/compress tries again, /new starts a fresh conversation."
)


@dataclass(frozen=True)
class SummaryOutcome:
    """A summary ``body`` to commit (None: abort), how it was made, and what failed."""

    body: str | None
    method: Method = "none"
    failure: SummaryFailure | None = None
    aux_failed: bool = False

    @property
    def failure_class(self) -> FailureClass | None:
        """The telemetry class of a committed outcome (None for a clean LLM summary)."""
        if self.method == "aux_fallback_main":
            return "aux_model_fallback"
        if self.method != "deterministic_fallback":
            return None
        if self.failure is None:
            return "cooldown_fallback"  # no call was made: a cooldown held at the safety line
        kind = self.failure.kind
        if kind == "timeout":
            return "summary_timeout_fallback"
        if kind == "overloaded":
            return "summary_overload_degraded"
        return "summary_failed_fallback"


@dataclass(eq=False)
class Summarizer:
    """One compression's summary call: aux model, then main model, then the table."""

    main: Provider
    auxiliary: Provider | None
    _: KW_ONLY
    timeout_seconds: float
    abort_on_failure: bool
    fallback_chars: int
    #: How many of the summary model's tokens one estimated token is, once an
    #: overflow of it said (docs/design.md#summary-model).
    scale: float = 1.0

    def fallback(self, request: SummaryRequest) -> str:
        """The deterministic summary of the whole request (no LLM), bounded."""
        return build_fallback_summary(
            request.turns,
            request.previous_summary,
            request.oversized_recent,
            max_chars=self.fallback_chars,
        )

    async def summarize(self, request: SummaryRequest, cooldown: CooldownState) -> SummaryOutcome:
        """Get a summary, or decide on the fallback or an abort (updating the ladders).

        A middle bigger than one call can carry is folded in several calls, each updating
        the summary the previous one wrote; a failure in any of them is a failure of the
        whole (the fallback then covers every turn, not just the rest).
        """
        calls = plan_summary_calls(request)
        if len(calls) == 1:
            return await self._summarize_once(request, cooldown)
        previous = request.previous_summary
        aux_failed = False
        for call in calls:
            call = replace(call, previous_summary=previous, scale=max(call.scale, self.scale))
            outcome = await self._summarize_once(call, cooldown)
            aux_failed = aux_failed or outcome.aux_failed
            if outcome.body is None:
                return outcome
            if outcome.method == "deterministic_fallback":
                body = self.fallback(request)
                return SummaryOutcome(body, "deterministic_fallback", outcome.failure, aux_failed)
            previous = outcome.body
        method: Method = "aux_fallback_main" if aux_failed else "llm_summary"
        return SummaryOutcome(previous, method, aux_failed=aux_failed)

    async def _summarize_once(
        self, request: SummaryRequest, cooldown: CooldownState
    ) -> SummaryOutcome:
        messages = build_summary_messages(request)
        aux_failed = False
        if self.auxiliary is not None:
            try:
                return SummaryOutcome(
                    await self._call(self.auxiliary, messages, request), "llm_summary"
                )
            except SummaryFailure as failure:
                if failure.kind == "budget":  # the main model counts to the same budgets
                    return self._after_failure(failure, request, cooldown, aux_failed)
                log.warning(
                    "auxiliary summary model failed (%s); trying the main model", failure.kind
                )
                aux_failed = True
        try:
            text = await self._call_main(messages, request)
        except SummaryFailure as failure:
            return self._after_failure(failure, request, cooldown, aux_failed)
        method: Method = "aux_fallback_main" if aux_failed else "llm_summary"
        return SummaryOutcome(text, method, aux_failed=aux_failed)

    async def _call(
        self, provider: Provider, messages: list[Message], request: SummaryRequest
    ) -> str:
        try:
            summary = await request_summary(
                provider,
                messages,
                max_tokens=request.budget_tokens,
                timeout_seconds=self.timeout_seconds,
            )
        except SummaryFailure as failure:
            if failure.prompt_tokens and failure.kind == "other":
                # Over its window: it counts heavier than the estimate. Once more, read
                # less by what it said (docs/design.md#summary-model).
                self._counted(messages, failure.prompt_tokens, request.scale)
                window = failure.context_limit or request.input_budget_tokens
                roomier = replace(
                    request,
                    input_budget_tokens=window,
                    scale=self.scale,  # and a summary no longer than a smaller window takes
                    budget_tokens=min(request.budget_tokens, int(window * SUMMARIZER_OUTPUT_SHARE)),
                )
            elif failure.kind != "length":
                raise
            else:
                # Cut off by max_tokens: once more with more room to write, or less to
                # read, before it counts as a failure (docs/design.md#failure-ladder).
                roomier = roomier_request(request, estimate_messages_tokens_rough(messages))
            messages = build_summary_messages(roomier)
            summary = await request_summary(
                provider, messages, max_tokens=roomier.budget_tokens,
                timeout_seconds=self.timeout_seconds,
            )  # fmt: skip
        if summary.prompt_tokens:  # the next call of a night's several is sized by it
            self._counted(messages, summary.prompt_tokens, request.scale)
        text = summary.text
        # Some models repeat the marker they saw in the previous summary; assembly adds it.
        if text.startswith(SUMMARY_PREFIX):
            text = summary_body({"role": "assistant", "content": text})
        return text

    def _counted(self, messages: list[Message], prompt_tokens: int, scale: float) -> None:
        """The summary model counted ``prompt_tokens`` for ``messages``: it counts that
        much heavier than the estimate, never lighter (docs/design.md#summary-model)."""
        # Less what every request carries besides its messages, as the calibration does.
        counted = max(1, prompt_tokens - FIXED_TOKENS)
        ratio = counted / max(1, estimate_messages_tokens_rough(messages))
        self.scale = min(MAX_SCALE, max(self.scale, scale, ratio * SCALE_MARGIN))

    async def _call_main(self, messages: list[Message], request: SummaryRequest) -> str:
        try:
            return await self._call(self.main, messages, request)
        except SummaryFailure as failure:
            if failure.kind != "overloaded":
                raise
            return await self._call(self.main, messages, request)  # one retry on overload

    def _after_failure(
        self,
        failure: SummaryFailure,
        request: SummaryRequest,
        cooldown: CooldownState,
        aux_failed: bool,
    ) -> SummaryOutcome:
        kind = failure.kind
        if kind == "budget":
            # Refused before any call (docs/cost.md#budgets): nothing failed, so no ladder
            # moves and no fallback summary is written without the model.
            return SummaryOutcome(None, "none", failure, aux_failed)
        if kind == "timeout":
            # A second hang while the ladder still holds one degrades instead of aborting.
            degrade = cooldown.timeout_failures >= 1
            if not degrade or self.abort_on_failure:
                cooldown.timeout_failures += 1
        elif kind == "overloaded":
            cooldown.overload_failures += 1
            degrade = cooldown.overload_failures >= OVERLOAD_DEGRADE_AFTER
        else:
            degrade = kind == "other"  # e.g. the summary model's window is too small
        if degrade and not self.abort_on_failure:
            return SummaryOutcome(
                self.fallback(request), "deterministic_fallback", failure, aux_failed
            )
        return SummaryOutcome(None, "none", failure, aux_failed)


def roomier_request(request: SummaryRequest, prompt_tokens: int) -> SummaryRequest:
    """A retry for a summary cut by its output limit: twice the output budget where the
    summary model's window has room for it, else the same budget over half the input."""
    room = request.input_budget_tokens - int(prompt_tokens * max(1.0, request.scale))
    doubled = min(2 * request.budget_tokens, room)
    if doubled >= request.budget_tokens * 1.25:
        return replace(request, budget_tokens=doubled)
    return replace(request, input_budget_tokens=max(1, request.input_budget_tokens // 2))


#: The failure class of an aborted summary, by failure kind.
ABORT_CLASSES: dict[str, FailureClass] = {
    "timeout": "summary_timeout",
    "length": "summary_length",
    "malformed": "summary_malformed",
    "empty": "summary_empty",
    "overloaded": "summary_overload_failure",
    "auth": "summary_auth",
    "quota": "summary_quota",
    "network": "summary_network",
    "budget": "summary_budget",
    "other": "summary_other",
}


def record_abort(
    cooldown: CooldownState, failure: SummaryFailure, now: float, minimum: float
) -> FailureClass:
    """Set the cooldown an aborted summary earns and return its failure class.

    Timeouts climb their ladder (already counted by the summarizer); ``length`` climbs its
    own; malformed, empty, overloaded and other failures pause a flat 30 s; a rate limit
    pauses as long as the server asked; auth and network failures set no pause, nor does a
    budget's refusal (the call was never made: the budget, not a pause, decides the next).
    """
    kind = failure.kind
    if kind == "timeout":
        cooldown.set(now, ladder_seconds(cooldown.timeout_failures, minimum), "summary_timeout")
    elif kind == "length":
        cooldown.length_failures += 1
        cooldown.set(now, ladder_seconds(cooldown.length_failures, minimum), "summary_length")
    elif kind in ("malformed", "empty", "overloaded", "other"):
        cooldown.set(now, FLAT_SECONDS, f"summary_{kind}")
    elif kind == "quota" and failure.retry_after:
        cooldown.set(now, float(failure.retry_after), "summary_quota")
    return ABORT_CLASSES[kind]
