"""The ``memory:`` section: long-term memory (docs/design.md#memory). Kept beside
:mod:`gateway.config.schema`, which holds it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MemoryConfig:
    enabled: bool = True
    #: The memory block every prompt carries holds at most this many tokens (and on a
    #: small window less: docs/design.md#memory-block).
    max_tokens: int = field(default=1500, metadata={"range": (200, 20000)})
    #: One silent model call before each compression keeps what a summary would lose
    #: (docs/design.md#memory-flush).
    flush_before_compaction: bool = True
