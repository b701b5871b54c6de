"""How a server counts tokens, against nightowl's estimate, per model (docs/design.md#calibration).

The rough estimate (``(chars + 3) // 4``, docs/design.md#tokens) is the same on every
machine; a server's tokenizer is not. A Llama or Qwen tokenizer counts Russian text about
1.6 times heavier than the estimate, code heavier, and the server's chat template adds
tokens to every message. Only the server's ``usage.prompt_tokens`` is the truth, and each
response gives one sample of it beside the estimate of the same request.

A :class:`Calibration` turns the samples into two numbers:

- ``ratio``: server tokens per estimated token (less a fixed 32 for the template, which
  the margin holds). It rises at once to a heavier sample and comes down a quarter of
  the way per lighter one, so one English turn in a Russian chat does not make the next
  Russian request overflow. Never below 1: counting lighter than the estimate only ever
  costs an earlier summary, never a refused request.
- ``error``: how far the last predictions missed, as a share of the prompt; it widens at
  once and narrows slowly. :meth:`Calibration.margin` keeps that share of the input budget
  free beside prompt and reply, plus a flat allowance for the chat template, so prompt +
  ``max_tokens`` fits even when the next request is heavier than the last one was.

Each session keeps its own (persisted with its usage anchor, so it survives restarts);
:class:`Calibrations` remembers the latest per model route for sessions that have none yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

#: Never believe the server counts lighter than the estimate...
MIN_RATIO = 1.0
#: ...nor more than this much heavier (a misreported count must not empty the window).
MAX_RATIO = 4.0
#: Requests estimated below this say more about the template than about the text.
MIN_SAMPLE_TOKENS = 256
#: Server tokens a request always carries beyond its messages (BOS, the reply's header),
#: left out of a sample before its ratio is taken...
FIXED_TOKENS = 32
#: ...and what the margin keeps for the template at least: those, and the instructions a
#: chat template wraps around tool schemas (Qwen's and Llama 3.1's run to 100-300
#: tokens), which weigh more on a short request than the ratio of a long one says.
TEMPLATE_TOKENS = 128
#: The margin's share of the input budget, at least and at most.
MIN_ERROR_SHARE = 0.03
MAX_ERROR_SHARE = 0.25
#: Until the server has counted once, its tokenizer is unknown: a reply's room leaves
#: this share of the prompt free besides (a Llama or Qwen tokenizer counts a chat of
#: short lines and tool schemas ~20% heavier than the estimate, and vLLM refuses a
#: prompt + max_tokens over the window).
UNSAMPLED_PROMPT_SHARE = 0.2
#: How much of the old ratio (and error) a new, lighter sample keeps.
DECAY = 0.75


@dataclass(frozen=True)
class Calibration:
    """Server tokens per estimated token, and how far that prediction missed lately."""

    ratio: float = MIN_RATIO
    error: float = MIN_ERROR_SHARE
    samples: int = 0

    def observed(self, estimate: int, reported: int) -> Calibration:
        """This calibration after a response counted ``reported`` tokens for a request
        estimated at ``estimate`` (too small a request changes nothing)."""
        if estimate < MIN_SAMPLE_TOKENS or reported <= FIXED_TOKENS:
            return self
        # The fixed part is the margin's, not the ratio's: a short request would otherwise
        # make every estimate after it heavier.
        sample = (reported - FIXED_TOKENS) / estimate
        error = self.error
        if self.samples:  # the first sample has no prediction to have missed
            miss = abs(sample - self.ratio) / self.ratio
            error = max(miss, self.error * DECAY)
        ratio = max(sample, self.ratio * DECAY + sample * (1 - DECAY))
        return Calibration(
            ratio=min(MAX_RATIO, max(MIN_RATIO, ratio)),
            error=min(MAX_ERROR_SHARE, max(MIN_ERROR_SHARE, error)),
            samples=self.samples + 1,
        )

    @property
    def prompt_miss(self) -> float:
        """The share of a prompt its reply's room leaves free for what the estimate may
        miss before any sample (after one, :meth:`margin` covers it)."""
        return 0.0 if self.samples else UNSAMPLED_PROMPT_SHARE

    def margin(self, input_budget: int) -> int:
        """Server tokens to keep free beside a prompt of at most ``input_budget`` tokens."""
        return TEMPLATE_TOKENS + math.ceil(max(0, input_budget) * self.error)

    @classmethod
    def from_ratio(cls, ratio: float | None) -> Calibration:
        """A calibration that knows only a persisted ratio (its error starts at the floor)."""
        if not ratio or not math.isfinite(ratio):
            return cls()
        return cls(ratio=min(MAX_RATIO, max(MIN_RATIO, float(ratio))), samples=1)


class Calibrations:
    """The latest calibration per model route, in memory: where a new session starts."""

    def __init__(self) -> None:
        self._latest: dict[str, Calibration] = {}

    def prior(self, route: str) -> Calibration:
        """What a session of ``route`` starts from when it has no calibration of its own."""
        known = self._latest.get(route)
        # The margin of a session that starts from another's ratio keeps its own error.
        return replace(known, error=MIN_ERROR_SHARE) if known else Calibration()

    def remember(self, route: str, calibration: Calibration) -> None:
        if calibration.samples:
            self._latest[route] = calibration
