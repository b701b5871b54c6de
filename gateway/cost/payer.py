"""Whose turn a model call belongs to (docs/cost.md#what-is-stored).

A context variable, because the calls are made deep inside the agent and its context
engine, which know nothing of chats or people: the session's lane sets the chat
(:class:`gateway.conversation.lanes.Lanes`, for every job it runs: turns, ``/compress``,
idle compression), the turn runner adds the person whose message started the turn
(:meth:`gateway.conversation.turns.TurnRunner.run_turn`; none when several people asked
in one batch, docs/cost.md#a-batch-of-several-people), and the
:class:`~gateway.cost.meter.CostMeter` reads it when a call is made. asyncio copies the
context into each task, so two lanes never see each other's payer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Payer:
    """The chat (its session key; None outside any chat) and the person
    (``platform:user_id``; None: housekeeping, or no person known)."""

    chat: str | None = None
    person: str | None = None


PAYER: ContextVar[Payer | None] = ContextVar("nightowl_payer", default=None)


def current() -> Payer:
    return PAYER.get() or Payer()


@contextmanager
def paying(chat: str | None, person: str | None = None) -> Iterator[Payer]:
    """Calls made inside belong to ``chat`` and ``person``."""
    payer = Payer(chat, person)
    token = PAYER.set(payer)
    try:
        yield payer
    finally:
        PAYER.reset(token)


def person_of(platform: str, user_id: str | None) -> str | None:
    """A person as the costs table names them: ``platform:user_id``."""
    return f"{platform}:{user_id}" if user_id else None
