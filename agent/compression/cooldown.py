"""Pacing after failed summaries (docs/design.md#failure-ladder, #cooldown).

A failed summary sets a cooldown during which threshold compression is blocked, so a
broken summary backend is not hit on every turn. Timeouts/hangs and ``finish_reason=length``
each climb their own 60 s -> 300 s -> 900 s ladder (never below the summary timeout);
malformed or empty replies pause a flat 30 s, and so do overloads (a choice of ours:
the pause keeps one turn's gates from spending the overload streak in a few seconds).
Overloads also count separately: the third in a row degrades to the deterministic fallback. The state is wall-clock based (epoch seconds)
and exported to the session row, so it paces attempts across turns and restarts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.messages import JSON

LADDER_SECONDS = (60.0, 300.0, 900.0)
FLAT_SECONDS = 30.0
#: Consecutive overload aborts after which the fallback summary is committed instead.
OVERLOAD_DEGRADE_AFTER = 3


def ladder_seconds(step: int, minimum: float) -> float:
    """The cooldown for the ``step``-th consecutive failure (1-based), never below ``minimum``."""
    index = min(max(step, 1), len(LADDER_SECONDS)) - 1
    return max(LADDER_SECONDS[index], minimum)


@dataclass
class CooldownState:
    """What paces compression attempts of one session. Mutable; owned by one engine."""

    until: float = 0.0
    reason: str = ""
    timeout_failures: int = 0
    length_failures: int = 0
    overload_failures: int = 0

    def active(self, now: float) -> bool:
        return self.until > now

    def remaining(self, now: float) -> float:
        return max(0.0, self.until - now)

    def set(self, now: float, seconds: float, reason: str) -> None:
        self.until = now + seconds
        self.reason = reason

    def clear(self) -> None:
        """Lift the pause (a manual /compress); the ladders keep their counts."""
        self.until = 0.0
        self.reason = ""

    def committed(self, *, healthy: bool) -> None:
        """A compression was committed: the pause lifts and the timeout ladders reset.

        Only a real LLM summary (``healthy``) resets the overload streak, so a provider
        that stays overloaded keeps getting the fallback instead of aborts.
        """
        self.clear()
        self.timeout_failures = 0
        self.length_failures = 0
        if healthy:
            self.overload_failures = 0

    def to_dict(self) -> JSON:
        return {
            "cooldown_until": self.until,
            "cooldown_reason": self.reason,
            "timeout_failures": self.timeout_failures,
            "length_failures": self.length_failures,
            "overload_failures": self.overload_failures,
        }

    @classmethod
    def from_dict(cls, data: JSON) -> CooldownState:
        def number(key: str, cast: type) -> Any:
            try:
                return cast(data.get(key) or 0)
            except (TypeError, ValueError):
                return cast(0)

        return cls(
            until=number("cooldown_until", float),
            reason=str(data.get("cooldown_reason") or ""),
            timeout_failures=number("timeout_failures", int),
            length_failures=number("length_failures", int),
            overload_failures=number("overload_failures", int),
        )
