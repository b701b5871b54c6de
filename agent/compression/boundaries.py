"""Phases 1 and 2: prune old tool output, then choose what stays
(docs/design.md#boundaries).

The list splits into three parts: the head (kept), the middle (summarized) and the tail
(kept). Kept rows are the very rows given, never rewritten copies: a row too big to show
whole is shown as an excerpt by the request view (agent/window.py), not cut here.
Boundaries never separate an assistant tool call from its results, and the tail never
starts with a tool result. A row bigger than the tail budget is never protected by a
row count: outside the newest exchange it goes into the summary (docs/design.md#boundaries).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent.compression.assembly import choose_summary_role
from agent.compression.markers import (
    PRUNED_TOOL_OUTPUT,
    find_summary_index,
    is_real_user_message,
    merged_original_text,
    summary_body,
)
from agent.messages import Message

#: First compression: system prompt + first exchange (docs/design.md#boundaries).
HEAD_MESSAGES = 3
#: Tool output longer than this (characters) is cleared outside the tail (docs/design.md#tool-pruning).
PRUNE_MIN_CHARS = 200
#: protect_last_n counts as a minimum only down to this many rows (docs/design.md#boundaries).
TAIL_COUNT_FLOOR = 8
#: The tail keeps at least this many rows while they fit its ceiling.
TAIL_MIN_ROWS = 3
#: Tail rows are added while under the budget, and past it up to this factor, whole rows only.
SOFT_CEILING_FACTOR = 1.5


@dataclass(frozen=True)
class Plan:
    """Where the list splits. ``messages[:head_end]`` stays, ``messages[tail_start:]`` stays.

    ``summary_index`` is the previous compression summary inside the middle, if any;
    ``oversized`` lists tail rows larger than the tail budget (only the newest exchange
    can hold one): they stay, shown as excerpts, and are also handed to the summarizer.
    """

    head_end: int
    tail_start: int
    summary_index: int | None
    oversized: tuple[int, ...] = ()

    @property
    def has_middle(self) -> bool:
        return self.tail_start > self.head_end


def unanswered_tool_round(messages: Sequence[Message]) -> range:
    """Indices of the tool results the model has not answered yet (empty if none).

    That is the results of the last assistant tool call when no assistant message
    follows them.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "assistant":
            continue
        if not message.get("tool_calls"):
            return range(0)
        end = index + 1
        while end < len(messages) and messages[end].get("role") == "tool":
            end += 1
        return range(index + 1, end)
    return range(0)


def prune_old_tool_results(
    messages: Sequence[Message], protect_from: int
) -> tuple[list[Message], int]:
    """Phase 1 (no LLM): clear tool output longer than 200 chars before ``protect_from``.

    A tool round the model has not answered yet stays verbatim wherever it is. Returns a
    new list (messages that change are copied, never mutated) and how many were cleared.
    """
    keep = unanswered_tool_round(messages)
    result: list[Message] = []
    pruned = 0
    for index, message in enumerate(messages):
        content = message.get("content")
        if (
            index < protect_from
            and index not in keep
            and message.get("role") == "tool"
            and _output_size(content) > PRUNE_MIN_CHARS
        ):
            result.append({**message, "content": PRUNED_TOOL_OUTPUT})
            pruned += 1
        else:
            result.append(message)
    return result, pruned


def _output_size(content: Any) -> int:
    """Characters of a tool result; one with images (an MCP tool's, docs/design.md#mcp-results)
    always counts as big: an image costs more than any text worth keeping."""
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        if any(isinstance(p, Mapping) and p.get("type") != "text" for p in content):
            return PRUNE_MIN_CHARS + 1
        return sum(len(str(p.get("text", ""))) for p in content if isinstance(p, Mapping))
    return 0


def head_end_for(
    messages: Sequence[Message], tokens: Sequence[int], budget: int
) -> tuple[int, int | None]:
    """The head's end and the index of a previous summary (if any).

    First compression: the first 3 messages, but the head stops before a row bigger than
    ``budget`` (a pasted log in the first exchange must be summarizable). Once a summary
    exists, only the leading system messages stay: the first exchange stops being
    protected and goes into the next summary, so nothing leaves the context without
    passing through one (docs/design.md#nothing-leaves-unsummarized). A head never ends between a tool call and its results.
    """
    summary_index = find_summary_index(messages)
    end = 0
    while end < len(messages) and messages[end].get("role") == "system":
        end += 1
    if summary_index is not None:
        end = min(end, summary_index)
    else:
        limit = min(HEAD_MESSAGES, len(messages))
        while end < limit and tokens[end] <= budget:
            end += 1
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    return end, summary_index


def align_backward(messages: Sequence[Message], index: int, floor: int) -> int:
    """Move a tail start off tool results, back to the assistant message that called them."""
    while floor < index < len(messages) and messages[index].get("role") == "tool":
        index -= 1
    return index


def _walk_tail(
    tokens: Sequence[int],
    head_end: int,
    budget: int,
    protect_last_n: int,
    cap: int,
    hard_ceiling: int,
) -> int:
    n = len(tokens)
    floor_rows = min(max(TAIL_MIN_ROWS, min(protect_last_n, TAIL_COUNT_FLOOR)), cap)
    protect_rows = min(max(floor_rows, protect_last_n), cap)
    ceiling = min(int(budget * SOFT_CEILING_FACTOR), hard_ceiling)
    accumulated = 0
    start = n
    for index in range(n - 1, head_end - 1, -1):
        kept = n - start
        cost = tokens[index]
        if cost > budget:
            break  # a row bigger than the whole tail budget is summarized (docs/design.md#boundaries)
        if accumulated + cost > ceiling and (
            kept >= floor_rows or accumulated + cost > hard_ceiling
        ):
            break  # past the floor of 8 the ceiling wins; the floor itself has a limit too
        if kept >= protect_rows and accumulated >= budget:
            break
        accumulated += cost
        start = index
    if start <= head_end:
        # Everything fits in the budget (a short chat, or a manual /compress): keep the
        # floor and summarize the rest rather than refuse.
        start = max(n - floor_rows, head_end + 1)
    return start


def plan_boundaries(
    messages: Sequence[Message],
    tokens: Sequence[int],
    *,
    budget: int,
    protect_last_n: int,
    min_tail_user_messages: int,
    hard_ceiling: int | None = None,
) -> Plan:
    """Phase 2: choose the head, the tail and what lies between (docs/design.md#boundaries, #nothing-leaves-unsummarized).

    The tail is walked back from the end accumulating ``tokens`` up to ``budget`` (whole
    rows up to 1.5x). ``protect_last_n`` rows are kept while that ceiling allows, and at
    least 8 (``protect_last_n`` permitting) while they fit ``hard_ceiling`` (a share of
    the window: on a small window 8 rows can be most of it); never so many that the
    middle is empty. A row bigger than ``budget`` ends the tail: it is summarized. The last ``min_tail_user_messages`` user messages (and what follows
    them) are always in the tail, whatever their size; tail rows larger than ``budget``
    are reported in ``oversized``.
    """
    n = len(messages)
    head_end, summary_index = head_end_for(messages, tokens, budget)
    available = n - head_end
    if available < 2:
        return Plan(head_end, head_end, summary_index)
    ceiling = hard_ceiling if hard_ceiling is not None else int(budget * SOFT_CEILING_FACTOR)
    start = _walk_tail(tokens, head_end, budget, protect_last_n, available - 1, ceiling)
    start = align_backward(messages, start, head_end)
    start = _include_last_users(messages, start, head_end, min_tail_user_messages)
    start = _avoid_merged_summary(messages, start, head_end)
    if start <= head_end:
        return Plan(head_end, head_end, summary_index)
    head_end = _head_without_merge(messages, head_end, start)
    oversized = tuple(i for i in range(start, n) if tokens[i] > budget)
    if summary_index is not None and summary_index >= start:
        summary_index = None  # a summary inside the tail stays as it is
    return Plan(head_end, start, summary_index, oversized)


def _include_last_users(messages: Sequence[Message], start: int, head_end: int, wanted: int) -> int:
    if wanted <= 0:
        return start
    seen = 0
    for index in range(len(messages) - 1, head_end - 1, -1):
        if is_real_user_message(messages[index]):
            seen += 1
            if index < start:
                start = index
            if seen >= wanted:
                break
    return start


def _avoid_merged_summary(messages: Sequence[Message], start: int, head_end: int) -> int:
    """Keep one more row when that spares merging the summary into the first tail row.

    A merge rewrites a kept message (often the newest user message); starting the tail
    one row earlier, at a row of the other role, keeps every tail row verbatim.
    """
    if start <= head_end + 1 or start >= len(messages):
        return start
    head_role = messages[head_end - 1].get("role") if head_end else None
    if choose_summary_role(head_role, messages[start].get("role")) != "merge":
        return start
    previous = messages[start - 1]
    if previous.get("role") == "tool" or previous.get("tool_calls"):
        return start
    if choose_summary_role(head_role, previous.get("role")) == "merge":
        return start
    return start - 1


def _head_without_merge(messages: Sequence[Message], head_end: int, start: int) -> int:
    """Give the head's last rows to the summary while the summary would otherwise have to
    be merged into a kept message (a group's run of user rows makes that common).

    A merged summary would rewrite a kept row — often the newest user message, which
    then no longer reads as the person's own words. Down to the system prompt there is
    always a role that fits, and a row leaving the head is summarized, never dropped.
    """
    first_open = 0
    while first_open < head_end and messages[first_open].get("role") == "system":
        first_open += 1
    tail_role = messages[start].get("role")
    while head_end > first_open:
        last = messages[head_end - 1]
        if choose_summary_role(last.get("role"), tail_role) != "merge":
            break
        if last.get("role") == "tool" or last.get("tool_calls"):
            break  # never split a call from its results; assembly merges as a last resort
        head_end -= 1
    return head_end


def middle_turns(pruned: Sequence[Message], plan: Plan) -> tuple[list[Message], str | None]:
    """The middle rows to summarize, and the previous summary found among them.

    A summary that was merged into a message gives back that message's own text as a turn.
    """
    previous = None
    turns: list[Message] = []
    for index in range(plan.head_end, plan.tail_start):
        message = pruned[index]
        if index == plan.summary_index:
            previous = summary_body(message)
            original = merged_original_text(message)
            if original:
                turns.append(message | {"content": original})
            continue
        turns.append(message.copy())
    return turns, previous
