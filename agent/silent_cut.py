"""Noticing a prompt the server cut without saying so (docs/design.md#silent-truncation).

Ollama answers a prompt longer than its window with 200 OK: it drops old messages and
then tokens from the front, the system prompt first, and reports the count it kept in
``usage.prompt_tokens``. An answer to such a prompt is never shown. Three ways tell it:

- the server's own count of the last prompt (the usage anchor) and the least the rows
  since can count (:func:`least_count`): the count after them cannot be smaller;
- without an anchor, a count far below the rough estimate *and* below one token per word
  of the text (:func:`agent.tokens.token_floor`; a line of dashes is one long token, so
  the estimate alone would cry wolf);
- a server known to cut, by its own rule (:meth:`agent.served_window.ServedWindow.cut`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent.messages import Message
from agent.providers.base import ProviderError, TextCallback, Usage
from agent.tokens import token_floor
from agent.usage_anchor import UsageAnchor, anchor_matches
from agent.window import FittedRequest, Window

#: ``ProviderError.detail`` of a response whose prompt the server cut.
TRUNCATED = "truncated"
#: A server that counts fewer than this share of the rough estimate may have cut the prompt...
TRUNCATION_SHARE = 0.6
#: ...and did, when it counts fewer than this share of the words it was sent...
FLOOR_SHARE = 0.9
#: ...by at least this many tokens (small requests say more about the template).
MIN_TRUNCATED_TOKENS = 256
#: What a server's count of the same prefix may vary by (the reply's end-of-turn marker).
CUT_SLACK_TOKENS = 32


def least_count(
    anchor: UsageAnchor | None,
    messages: Sequence[Message],
    route: str,
    request: FittedRequest,
    window: Window,
    overhead: int,
    represent: Callable[[Sequence[Message]], int],
) -> int | None:
    """The fewest prompt tokens the server can count for ``request`` without having cut
    it: its own count of the prompt it last answered, plus the least the rows since can
    count, plus what travels beside the messages (tool schemas, the memory block:
    ``overhead`` now, estimated) beyond what travelled then.

    None — no judgement — without an anchor (or one stored before it said what travelled
    beside the messages); when less travels beside the messages than then (the server
    drops a tool template's preamble with the tools, which no estimate knows); or when the
    prefix may be shown otherwise than it was counted: a view cut to fit, or with
    excerpts (an excerpt's size depends on whether its row is the newest).
    """
    if anchor is None or anchor.overhead is None or request.cut or request.excerpted:
        return None
    if overhead < anchor.overhead or not anchor_matches(anchor, messages, route):
        return None
    # The rows since the reply: each counts at least three quarters of its calibrated
    # estimate or one token per word, whichever is less. The reply itself is left out:
    # a thinking model's template drops the reasoning a stored reply may carry.
    rows = messages[anchor.covered :]
    added = min(represent(rows) * 3 // 4, token_floor(rows))
    shift = window.real(overhead) - window.real(anchor.overhead)
    return anchor.prompt_tokens + shift + added - CUT_SLACK_TOKENS


def cut_by_server(request: FittedRequest, usage: Usage | None, at_least: int | None) -> bool:
    """Whether the server counted so few tokens for the request that it must have cut it.

    With ``at_least`` (:func:`least_count`) the answer is a comparison; without it, the
    two tests of the module docstring, the cheap one first (:func:`token_floor` is
    O(text)). Requests with images are not judged that way: an image's estimate is a flat
    guess."""
    if usage is None:
        return False
    reported = usage.prompt_tokens
    if at_least is not None:
        return reported < at_least
    if request.images or reported >= request.estimate * TRUNCATION_SHARE:
        return False
    floor = token_floor(request.messages)
    return reported < floor * FLOOR_SHARE and floor - reported >= MIN_TRUNCATED_TOKENS


def cut_error(provider: str, request: FittedRequest, usage: Usage) -> ProviderError:
    """The overflow a cut prompt is treated as: its count is what the server kept."""
    return ProviderError(
        "overflow",
        f"the server counted {usage.prompt_tokens:,} prompt tokens of about "
        f"{request.prompt_tokens:,} sent: it cut the prompt",
        prompt_tokens=usage.prompt_tokens,
        provider=provider,
        detail=TRUNCATED,
    )


class StreamedChars:
    """``on_text``, counting the characters streamed (to take them back if need be)."""

    def __init__(self, on_text: TextCallback | None) -> None:
        self.on_text = on_text
        self.chars = 0

    async def __call__(self, delta: str) -> None:
        self.chars += len(delta)
        if self.on_text is not None:
            await self.on_text(delta)
