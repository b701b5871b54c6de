"""What one turn of the agent produces, and how it can end (docs/design.md#empty-answer,
#overflow-recovery)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agent.context_engine import CompressionResult
from agent.messages import Message
from agent.providers.base import Completion, ProviderError, Usage
from agent.usage_anchor import UsageAnchor
from nightowl_errors import NightowlError

#: Called with how many characters of streamed text to take back (a reply discarded).
RetractCallback = Callable[[int], Awaitable[None]]


@dataclass
class TurnResult:
    """What a turn produced. ``messages`` is the whole conversation after it."""

    messages: list[Message]
    reply: str | None = None
    error: ProviderError | CompressionExhausted | None = None
    anchor: UsageAnchor | None = None
    usage: Usage = field(default_factory=Usage)
    requests: int = 0
    compressions: list[CompressionResult] = field(default_factory=list)
    #: The reply stopped at the output limit it was given (finish_reason "length").
    cut_short: bool = False

    @property
    def notices(self) -> list[str]:
        return [c.notice for c in self.compressions if c.notice]


#: Told after a reply that stopped at its length limit (docs/design.md#output-reserve).
CUT_SHORT = (
    "(That reply reached its length limit, model.max_output_tokens, or the room left in "
    'the model\'s window, and stops there: say "go on" for the rest.)'
)


#: What the user gets when the model answered nothing twice (docs/design.md#empty-answer).
EMPTY_ANSWER = "The model returned an empty answer; please rephrase or try again."


def is_empty(completion: Completion) -> bool:
    """No text worth showing and no tool call."""
    return not completion.tool_calls and not completion.text.strip()


class CompressionExhausted(NightowlError):
    """The window still overflows after every allowed compression attempt.

    Not a provider's failure: the provider did what it should (said the prompt is too
    long); nightowl could not make it fit. ``kind`` is what the ``agent:error`` event
    reports.
    """

    kind = "context_exhausted"

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
