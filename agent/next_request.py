"""How many of the server's tokens the next request carries (docs/design.md#gates,
#fullness).

The agent's gates and what ``/status``, ``/context`` and the dashboard show are this one
count. With a usage anchor that still matches the rows, it is the server's own count of
the last request plus an estimate of the rows after it (docs/design.md#usage-anchor):
that count already holds the system prompt, the memory block, the tool schemas and the
chat template. Without one, it is the calibrated estimate of the rows as a request shows
them (docs/design.md#request-view) and of what travels beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from agent.messages import Message
from agent.usage_anchor import UsageAnchor, anchored_tokens
from agent.window import Window, represented_tokens


class RequestSize(NamedTuple):
    """Server tokens of the next request, and whether the server's count backs them."""

    tokens: int
    counted: bool


def next_request_tokens(
    messages: Sequence[Message],
    window: Window,
    route: str,
    *,
    anchor: UsageAnchor | None,
    overhead: int,
) -> RequestSize:
    """The next request's size for ``messages`` on ``window``; ``overhead`` is the
    estimated tokens that travel beside the rows (tool schemas as offered, the memory
    block), which only the estimate needs: the server's count holds them."""
    anchored = anchored_tokens(
        anchor, messages, route, estimate=lambda rows: represented_tokens(rows, window)
    )
    if anchored is not None:
        return RequestSize(anchored, True)
    return RequestSize(represented_tokens(messages, window) + window.real(overhead), False)
