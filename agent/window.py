"""How one request shares the model's window: every prompt fits, whatever the rows hold.

A request is a *view* of the conversation; the stored rows are never changed to fit it
(docs/design.md#request-view). The view follows three rules, in this order:

1. The newest user message gets a guaranteed share of the window (:data:`NEWEST_SHARE`
   of the input budget) before history gets any.
2. Any other row is shown at most at :data:`ROW_SHARE` of the input budget. A bigger one
   (a pasted log, a document) is represented by an excerpt: its beginning and end, and a
   note that the full text is archived and searchable. The excerpt depends only on the
   row and the window, so it is the same bytes on every turn and prompt caching holds.
3. If the rows still do not fit (the summary model keeps failing, a cooldown holds),
   the largest rows are cut further, down to a floor, and then the oldest rows between
   the system prompt and the newest exchange are left out of this request, with a note.

Rows are measured with the rough estimate (docs/design.md#tokens); budgets are the
server's tokens, and the window's scale (docs/design.md#calibration) converts between them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.compression.assembly import repair_tool_pairs
from agent.compression.markers import is_real_user_message, is_summary_message
from agent.compression.settings import TINY_WINDOW_LIMIT, summary_token_cap
from agent.messages import Message
from agent.tokens import (
    IMAGE_TOKENS,
    estimate_message_tokens_rough,
    estimate_text_tokens_rough,
    measure_message,
    message_size,
)

#: The output reserve is at most the window over this: 1,024 tokens of a 4K window.
RESERVE_DIVISOR = 4
#: Share of the input budget the newest user message may always fill.
NEWEST_SHARE = 0.5
#: Share of the input budget any other single row may fill.
ROW_SHARE = 0.25
#: Share of a tiny window's input budget a compression's tail may keep verbatim.
TINY_TAIL_SHARE = 0.125
#: When rows must be cut below their share, never below this share of the input budget...
FLOOR_SHARE = 1 / 16
#: ...nor below this many tokens.
MIN_ROW_TOKENS = 64

EXCERPT_NOTE = (
    "[nightowl: this message is {total:,} characters long, too long to show whole in the "
    "context window. Its beginning and end are shown; {omitted:,} characters in the middle "
    "are left out here. The full text is archived: session_search finds it.]"
)
LEFT_OUT_NOTE = (
    "[nightowl: {count} earlier message(s) are left out of this request to fit the model's "
    "context window. They are archived: session_search finds them.]"
)
ARGUMENTS_NOTE = "[arguments too long to show: {total:,} characters]"
SHORT_NOTE = "[{total:,} characters, archived: session_search finds them]"
#: An excerpt keeps at least this much text beside its note, or becomes the short note.
MIN_EXCERPT_CHARS = 40
#: What the note about left-out messages costs.
NOTE_TOKENS = estimate_text_tokens_rough(LEFT_OUT_NOTE) + 2
#: A request whose rows all had to be cut below this many tokens, or that leaves the
#: reply less than :data:`MIN_REPLY_TOKENS`, is ``starved``: what travels beside the
#: conversation (system prompt, tool schemas, memory) fills the window, and it is not
#: sent (docs/design.md#no-room).
MIN_SHOWN_TOKENS = 32
MIN_REPLY_TOKENS = 16


@dataclass(frozen=True)
class Window:
    """The model's window, the share of it kept for the reply (docs/design.md#output-reserve),
    and how the server's counts relate to the rough estimate (docs/design.md#calibration).

    Budgets (``context_length``, ``input_budget``, ``margin``) are in the server's tokens;
    the row caps are in rough-estimate tokens, because rows are measured by the estimate:
    a cap is the budget divided by ``scale``.
    """

    context_length: int
    max_output_tokens: int
    #: How many of the server's tokens one estimated token is (at least 1).
    scale: float = 1.0
    #: Server tokens kept free beside prompt and reply for what the estimate misses (the
    #: chat template, a heavier tokenizer than the last requests showed).
    margin: int = 0
    #: The share of the prompt a reply's room also leaves free while the server has not
    #: counted anything yet (``Calibration.prompt_miss``).
    prompt_miss: float = 0.0

    @property
    def output_reserve(self) -> int:
        """Tokens kept free for the reply: ``max_output_tokens``, at most a quarter of the
        window (on a small window the conversation needs the rest, docs/design.md#output-reserve)."""
        return max(0, min(self.max_output_tokens, self.context_length // RESERVE_DIVISOR))

    @property
    def input_budget(self) -> int:
        """What a prompt may fill: the window minus the output reserve and the margin."""
        return max(1, self.context_length - self.output_reserve - self.margin)

    def _cap(self, share: float) -> int:
        return max(MIN_ROW_TOKENS, int(self.input_budget * share / max(1.0, self.scale)))

    @property
    def row_cap(self) -> int:
        """Estimated tokens any one row other than the newest user message is shown with."""
        return self._cap(ROW_SHARE)

    @property
    def newest_cap(self) -> int:
        """Estimated tokens the newest user message is always shown with, if it has them."""
        return self._cap(NEWEST_SHARE)

    @property
    def tail_cap(self) -> int:
        """Estimated tokens a compression keeps verbatim besides the newest exchange: less
        on a tiny window, where what it frees must last turns (docs/design.md#boundaries)."""
        tiny = self.context_length < TINY_WINDOW_LIMIT
        return self._cap(TINY_TAIL_SHARE if tiny else ROW_SHARE)

    @property
    def floor_cap(self) -> int:
        return self._cap(FLOOR_SHARE)

    def real(self, estimate: int) -> int:
        """Server tokens of ``estimate`` estimated tokens."""
        return math.ceil(estimate * max(1.0, self.scale))

    def reply_room(self, prompt_tokens: int) -> int:
        """What the window leaves a reply beside a prompt of ``prompt_tokens`` (server
        tokens), less the margin."""
        return self.context_length - max(0, int(prompt_tokens)) - self.margin

    def max_tokens_for(self, prompt_tokens: int) -> int:
        """Output tokens a request of ``prompt_tokens`` (server tokens) asks for: up to
        ``max_output_tokens`` in the :meth:`reply_room` (less, before the server has
        counted anything, ``prompt_miss`` of the prompt)."""
        miss = math.ceil(max(0, int(prompt_tokens)) * self.prompt_miss)
        return max(1, min(self.max_output_tokens, self.reply_room(prompt_tokens) - miss))


def newest_user_index(messages: Sequence[Message]) -> int | None:
    """Index of the newest message a person wrote (summaries do not count)."""
    for index in range(len(messages) - 1, -1, -1):
        if is_real_user_message(messages[index]):
            return index
    return None


def row_caps(messages: Sequence[Message], window: Window) -> list[int]:
    """The most tokens each row is shown with (rule 1 and 2). A compression summary is shown
    whole up to what the compressor lets it take (docs/design.md#summary-budget), within
    the newest message's share: it carries everything before it."""
    caps = [window.row_cap] * len(messages)
    newest = newest_user_index(messages)
    if newest is not None:
        caps[newest] = window.newest_cap
    head = 0  # a summary follows the system rows (docs/design.md#assembly)
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    if head < len(messages) and is_summary_message(messages[head]):
        budget = int(summary_token_cap(window.context_length) / max(1.0, window.scale))
        caps[head] = max(window.row_cap, min(window.newest_cap, budget))
    return caps


def represented_tokens(
    messages: Sequence[Message],
    window: Window,
    tokens: Sequence[int] | None = None,
) -> int:
    """Tokens of the conversation as a request shows it (rows at most their cap), in the
    server's tokens (the estimate times ``window.scale``).

    ``tokens`` are per-row counts when the caller has them (stored counts), else the
    rough estimate is taken. This is what every gate and threshold compares: a row that
    will only ever be shown as an excerpt counts as the excerpt.
    """
    counts = tokens if tokens is not None else [message_size(m).rough for m in messages]
    caps = row_caps(messages, window)
    if len(counts) != len(caps):
        raise ValueError(f"{len(counts)} counts for {len(caps)} rows")
    return window.real(sum(map(min, counts, caps)))


# -- excerpts ------------------------------------------------------------------------------


def excerpt_text(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars``: beginning and end around a note.

    Below the room a note needs, a short marker stands in (never more than ``max_chars``).
    """
    if len(text) <= max_chars:
        return text
    note = EXCERPT_NOTE.format(total=len(text), omitted=len(text))
    keep = max_chars - len(note) - 4
    if keep < MIN_EXCERPT_CHARS:
        return SHORT_NOTE.format(total=len(text))[: max(0, max_chars)]
    head = math.ceil(keep * 0.8)
    tail = keep - head
    note = EXCERPT_NOTE.format(total=len(text), omitted=len(text) - head - tail)
    return f"{text[:head]}\n\n{note}\n\n{text[len(text) - tail :]}"


def represent(message: Message, cap: int) -> Message:
    """``message`` if it fits ``cap`` tokens, else a copy whose text is an excerpt.

    The same message and cap always give the same bytes (prompt caching).
    """
    if estimate_message_tokens_rough(message) <= cap:
        return message
    copy = message.copy()
    if copy.get("tool_calls"):
        copy["tool_calls"] = [_short_arguments(call, cap) for call in copy["tool_calls"]]
    rest = measure_message(copy | {"content": None}).rough  # a throwaway: not memoized
    room_chars = max(0, (cap - rest) * 4 - 4)
    content = copy.get("content")
    if isinstance(content, str):
        copy["content"] = excerpt_text(content, room_chars)
    elif isinstance(content, list):
        copy["content"] = _represent_parts(content, room_chars)
    return copy


def _short_arguments(call: Any, cap: int) -> Any:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return call
    arguments = function.get("arguments")
    if not isinstance(arguments, str) or len(arguments) <= cap * 2:
        return call
    # Still valid JSON: a provider that parses arguments (Anthropic) must not choke.
    short = json.dumps({"note": ARGUMENTS_NOTE.format(total=len(arguments))})
    return {**call, "function": {**function, "arguments": short}}


def _represent_parts(parts: list[Any], room_chars: int) -> list[Any]:
    images = [p for p in parts if isinstance(p, Mapping) and p.get("type") != "text"]
    kept_images = images[: max(0, room_chars // 2 // (IMAGE_TOKENS * 4))]
    room_chars -= len(kept_images) * IMAGE_TOKENS * 4
    text = "\n".join(
        p["text"] for p in parts if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    )
    if len(images) > len(kept_images):
        text += f"\n[{len(images) - len(kept_images)} image(s) left out to fit the window]"
    return [{"type": "text", "text": excerpt_text(text, max(0, room_chars))}, *kept_images]


# -- fitting a request -------------------------------------------------------------------


@dataclass(frozen=True)
class FittedRequest:
    """The messages to send, their size, and the output tokens to ask for.

    ``estimate`` is the rough estimate of what is sent (messages and ``overhead_tokens``);
    ``prompt_tokens`` the same in the server's tokens, as the window's scale predicts;
    ``images`` how many image parts ride along (the estimate's flat guess for each);
    ``cut`` whether rows were cut or left out to fit (rule 3): such a view differs from
    turn to turn, so the server's last count says little about it; ``starved`` whether
    the window leaves the conversation or the reply no room at all (never sent).
    """

    messages: list[Message]
    prompt_tokens: int
    max_tokens: int
    estimate: int = 0
    images: int = 0
    cut: bool = False
    excerpted: int = 0
    left_out: int = 0
    starved: bool = False


def fit_request(
    messages: Sequence[Message],
    window: Window,
    *,
    overhead_tokens: int = 0,
) -> FittedRequest:
    """The request for ``messages``: prompt + max_tokens + the window's margin never
    exceeds the window.

    ``overhead_tokens`` is what travels beside the messages (tool schemas), estimated.
    The window's ``scale`` is how far the server's counts run above the rough estimate
    (code and non-Latin text count more); the budget shrinks by it.
    """
    scale = max(1.0, window.scale)
    budget = max(1, int(window.input_budget / scale) - overhead_tokens)
    # One size per row (remembered between turns): most turns take none of the cuts below.
    shown: list[Message] = []
    tokens: list[int] = []
    images = excerpted = 0
    for message, cap in zip(messages, row_caps(messages, window), strict=True):
        size = message_size(message)
        if size.rough > cap:
            excerpt = represent(message, cap)
            excerpted += excerpt is not message
            message, size = excerpt, measure_message(excerpt)  # made for this request
        shown.append(message)
        tokens.append(size.wire)
        images += size.images
    total = sum(tokens)
    newest = newest_user_index(shown)
    left_out = 0
    cut = total > budget
    if cut:
        shown = _cut_largest(shown, newest, budget, window.floor_cap)
        total = _total(shown)
    if total > budget:
        shown, left_out = _leave_out_oldest(shown, newest, budget)
        total = _total(shown)
    squeezed_to: int | None = None
    if total > budget:
        shown, squeezed_to = _squeeze_everything(shown, budget)
        total = _total(shown)
    if cut:  # rows were cut to fit: count the excerpts again
        originals = {id(m) for m in messages}
        excerpted = sum(1 for m in shown if id(m) not in originals)
        images = sum(message_size(m).images for m in shown)
    prompt = window.real(total + overhead_tokens)
    # The reply's room as the window leaves it, not less ``prompt_miss``: that caution
    # shrinks the reply of a prompt not yet counted, never refuses one (no count would
    # ever come).
    starved = window.reply_room(prompt) < min(MIN_REPLY_TOKENS, window.max_output_tokens) or (
        squeezed_to is not None and squeezed_to < MIN_SHOWN_TOKENS
    )
    return FittedRequest(
        messages=shown,
        prompt_tokens=prompt,
        max_tokens=window.max_tokens_for(prompt),
        estimate=total + overhead_tokens,
        images=images,
        cut=cut,
        excerpted=excerpted,
        left_out=left_out,
        starved=starved,
    )


def _wire_tokens(message: Message) -> int:
    """The rough estimate plus what it leaves out but a request carries (ids, tool names).
    Only a request that must be cut asks, of rows and of the excerpts made for it: measured
    without the memo, which keeps what lasts beyond one request."""
    return measure_message(message).wire


def _total(messages: Sequence[Message]) -> int:
    return sum(_wire_tokens(m) for m in messages)


def _water_level(tokens: Sequence[int], budget: int) -> int:
    """The largest cap such that sum(min(t, cap)) <= budget (0 if even 0 does not fit)."""
    if sum(tokens) <= budget:
        return max(tokens, default=0)
    ordered = sorted(tokens)
    remaining, count = budget, len(ordered)
    for i, value in enumerate(ordered):
        share = remaining // (count - i)
        if value > share:
            return max(0, share)
        remaining -= value
    return ordered[-1]


def _cut_largest(
    shown: list[Message], newest: int | None, budget: int, floor: int
) -> list[Message]:
    """Rule 3a: cut the largest rows (not the newest user message) to one level >= floor."""
    tokens = [_wire_tokens(m) for m in shown]
    others = [t for i, t in enumerate(tokens) if i != newest]
    fixed = tokens[newest] if newest is not None else 0
    level = max(floor, _water_level(others, budget - fixed))
    return [
        represent(m, level) if i != newest and t > level else m
        for i, (m, t) in enumerate(zip(shown, tokens, strict=True))
    ]


def _protected_head(shown: Sequence[Message]) -> int:
    """Leading system rows and a compression summary right after them stay in any request."""
    end = 0
    while end < len(shown) and shown[end].get("role") == "system":
        end += 1
    if end < len(shown) and is_summary_message(shown[end]):
        end += 1
    return end


def _leave_out_oldest(
    shown: list[Message], newest: int | None, budget: int
) -> tuple[list[Message], int]:
    """Rule 3b: leave out the oldest rows after the protected head, never the newest
    exchange (the newest user message and what follows it)."""
    head = _protected_head(shown)
    stop = newest if newest is not None and newest >= head else len(shown)
    total = _total(shown) + NOTE_TOKENS
    first_kept = head
    while total > budget and first_kept < stop:
        total -= _wire_tokens(shown[first_kept])
        first_kept += 1
    if first_kept == head:
        return shown, 0
    kept: list[Message] = list(repair_tool_pairs([*shown[:head], *shown[first_kept:]]))
    left_out = first_kept - head
    note = LEFT_OUT_NOTE.format(count=left_out)
    if kept and kept[0].get("role") == "system" and isinstance(kept[0].get("content"), str):
        kept[0] = {**kept[0], "content": f"{kept[0]['content']}\n\n{note}"}
    return kept, left_out


def _squeeze_everything(shown: list[Message], budget: int) -> tuple[list[Message], int]:
    """Last resort (a system prompt or tool schemas that fill the window): cut every row to
    one level, the newest user message included; and that level."""
    tokens = [_wire_tokens(m) for m in shown]
    level = max(1, _water_level(tokens, budget))
    squeezed = [represent(m, level) if t > level else m for m, t in zip(shown, tokens, strict=True)]
    return squeezed, level
