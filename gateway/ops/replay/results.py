"""What a replay found: the prompt size at every turn and every compression, with the
window and thresholds they are measured against.

:mod:`~gateway.ops.replay.run` fills a :class:`ReplayResult`; the chart and the text
summary only read it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from gateway.conversation.hygiene import HYGIENE_THRESHOLD
from gateway.store import CompressionMark


@dataclass(frozen=True)
class TurnPoint:
    turn: int
    message: int  # 1-based position in the file
    prompt_tokens: int
    #: "reported": the provider's count for the turn's last request; "estimated": none came.
    source: Literal["reported", "estimated"]


@dataclass(frozen=True)
class ReplayCompression(CompressionMark):
    """A compression's mark, and where in the replay it ran."""

    turn: int  # the turn it ran in (before that turn's point)
    message: int


@dataclass
class ReplayResult:
    model: str
    provider: str
    window: int
    threshold: int
    messages: int = 0
    observed: int = 0
    turns: list[TurnPoint] = field(default_factory=list)
    compressions: list[ReplayCompression] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    archived_rows: int = 0
    active_rows: int = 0
    active_tokens: int = 0
    seconds: float = 0.0

    @property
    def hygiene_threshold(self) -> int:
        return int(self.window * HYGIENE_THRESHOLD)

    @property
    def max_prompt(self) -> int:
        return max((t.prompt_tokens for t in self.turns), default=0)
