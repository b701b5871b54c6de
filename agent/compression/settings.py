"""Compression settings and the arithmetic derived from them (docs/design.md#threshold, #boundaries, #summary, #output-reserve)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

#: Windows below this never compress below :data:`SMALL_WINDOW_THRESHOLD_FLOOR` (docs/design.md#threshold).
SMALL_WINDOW_LIMIT = 512_000
SMALL_WINDOW_THRESHOLD_FLOOR = 0.75
#: ...and windows below this (a local model's 2K-8K) not below this: their fixed part (the
#: system prompt, tools, memory) takes a third of the input budget, and at 0.75 what a
#: compression frees lasts a turn or two.
TINY_WINDOW_LIMIT = 16_384
TINY_WINDOW_THRESHOLD_FLOOR = 0.85

#: Lean tail budget: this share of the window, clamped, and never above the share cap (docs/design.md#boundaries).
LEAN_TAIL_SHARE = 0.025
LEAN_TAIL_MIN_TOKENS = 10_000
LEAN_TAIL_MAX_TOKENS = 25_000
TAIL_MAX_WINDOW_SHARE = 0.20

#: Summary budget: this share of the summarized tokens, within [min, min(share of window, max)] (docs/design.md#summary).
SUMMARY_RATIO = 0.20
SUMMARY_MIN_TOKENS = 2_000
SUMMARY_MAX_TOKENS = 12_000
SUMMARY_MAX_WINDOW_SHARE = 0.05
#: On small windows the cap is raised to this share, up to this many tokens.
SMALL_SUMMARY_WINDOW_SHARE = 0.20
SMALL_SUMMARY_TOKENS = 1_024
FALLBACK_MAX_CHARS = 8_000

#: Past this share of the window the conversation must shrink now: the gateway's
#: safety net fires here, and during a cooldown the compressor commits the
#: deterministic fallback instead of waiting (docs/design.md#cooldown).
SAFETY_SHARE = 0.85

TARGET_RATIO_MIN = 0.10
TARGET_RATIO_MAX = 0.80

#: Providers whose name may prefix a ``model_thresholds`` key ("anthropic:claude").
KNOWN_PROVIDERS = frozenset({"openai", "anthropic"})


@dataclass(frozen=True)
class CompressionSettings:
    """The ``compression`` config section as the compressor uses it (docs/design.md#configuration).

    ``target_ratio`` is clamped to 0.10..0.80 on construction. ``context_timeout_seconds``
    bounds one summary call and is the minimum of every timeout cooldown.
    ``max_output_tokens`` is ``model.max_output_tokens``: the reserve kept free for the
    reply (docs/design.md#output-reserve). The gateway-only keys (``in_place``, ``hygiene_hard_message_limit``) are
    not here: the engine never writes the store and never runs hygiene.
    """

    enabled: bool = True
    threshold: float = 0.50
    model_thresholds: Mapping[str, float] = field(default_factory=dict)
    target_ratio: float = 0.20
    tail_mode: Literal["lean", "legacy"] = "lean"
    protect_last_n: int = 20
    min_tail_user_messages: int = 1
    abort_on_summary_failure: bool = False
    max_compression_attempts: int = 3
    context_timeout_seconds: float = 120.0
    max_output_tokens: int = 4096

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"compression.threshold must be in (0, 1], got {self.threshold}")
        if self.tail_mode not in ("lean", "legacy"):
            raise ValueError(
                f"compression.tail_mode must be lean or legacy, got {self.tail_mode!r}"
            )
        ratio = min(TARGET_RATIO_MAX, max(TARGET_RATIO_MIN, float(self.target_ratio)))
        object.__setattr__(self, "target_ratio", ratio)
        object.__setattr__(self, "protect_last_n", max(1, int(self.protect_last_n)))
        object.__setattr__(self, "min_tail_user_messages", max(0, int(self.min_tail_user_messages)))
        object.__setattr__(self, "max_output_tokens", max(1, int(self.max_output_tokens)))


def _split_provider_key(key: str) -> tuple[str | None, str]:
    provider, sep, rest = key.partition(":")
    if sep and rest and provider.strip().lower() in KNOWN_PROVIDERS:
        return provider.strip().lower(), rest.strip().lower()
    return None, key.strip().lower()


def resolve_model_threshold(
    model: str,
    provider: str | None,
    default: float,
    model_thresholds: Mapping[str, float],
    context_length: int,
) -> float:
    """The threshold ratio for ``model`` on ``provider`` (docs/design.md#threshold).

    Keys of ``model_thresholds`` are substrings of the model name; the longest matching
    substring wins. ``"<provider>:<substring>"`` keys match only on that provider and beat
    a bare key with the same substring. No match: ``default``. Then the small-window
    floor: a window under 512K never triggers below 0.75 (it only ever raises the value).
    """
    name = model.strip().lower()
    current = (provider or "").strip().lower()
    best: tuple[int, int] | None = None  # (substring length, 1 if provider-scoped)
    ratio = default
    for key, value in model_thresholds.items():
        scope, substring = _split_provider_key(str(key))
        if not substring or substring not in name:
            continue
        if scope is not None and scope != current:
            continue
        rank = (len(substring), 1 if scope is not None else 0)
        if best is None or rank > best:
            best, ratio = rank, float(value)
    if 0 < context_length < TINY_WINDOW_LIMIT:
        ratio = max(ratio, TINY_WINDOW_THRESHOLD_FLOOR)
    elif 0 < context_length < SMALL_WINDOW_LIMIT:
        ratio = max(ratio, SMALL_WINDOW_THRESHOLD_FLOOR)
    return min(ratio, 1.0)


def lean_tail_budget(context_length: int) -> int:
    """2.5% of the window clamped to 10K..25K, and never above 20% of the window (docs/design.md#boundaries)."""
    budget = min(
        LEAN_TAIL_MAX_TOKENS, max(LEAN_TAIL_MIN_TOKENS, int(context_length * LEAN_TAIL_SHARE))
    )
    return max(1, min(budget, int(context_length * TAIL_MAX_WINDOW_SHARE)))


def tail_token_budget(
    settings: CompressionSettings, context_length: int, threshold_tokens: int
) -> int:
    """The tail budget for the configured ``tail_mode``; legacy is threshold x target_ratio."""
    if settings.tail_mode == "legacy":
        return max(1, int(threshold_tokens * settings.target_ratio))
    return lean_tail_budget(context_length)


def summary_token_budget(middle_tokens: int, context_length: int) -> int:
    """20% of the summarized tokens, at least 2000, at most :func:`summary_token_cap` (docs/design.md#summary)."""
    wanted = max(int(middle_tokens * SUMMARY_RATIO), SUMMARY_MIN_TOKENS)
    return min(wanted, summary_token_cap(context_length))


def summary_token_cap(context_length: int) -> int:
    """The most a summary may take: 5% of the window, up to 12000.

    A small window gets more than 5% — up to 20% of it, or 1024 tokens — because a
    summary of 200 tokens holds nothing (docs/design.md#summary-budget): at 4K that is
    819 tokens, at 32K 1638, from 40K on the 5% rule.
    """
    share = int(context_length * SUMMARY_MAX_WINDOW_SHARE)
    small = min(int(context_length * SMALL_SUMMARY_WINDOW_SHARE), SMALL_SUMMARY_TOKENS)
    return max(1, min(SUMMARY_MAX_TOKENS, max(share, small)))


def fallback_max_chars(context_length: int) -> int:
    """The deterministic fallback's size: half of what a summary may take, <= 8000 chars.

    Half, because a fallback fills whatever room it is given while a model's summary
    rarely does, and a compression must free real room even on a 4K window.
    """
    return min(FALLBACK_MAX_CHARS, summary_token_cap(context_length) * 2)
