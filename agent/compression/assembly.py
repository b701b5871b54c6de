"""Phase 4: head + one summary message + tail, with tool pairs repaired (docs/design.md#assembly)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from agent.compression.markers import (
    MERGED_MESSAGE_DELIMITER,
    STUB_TOOL_RESULT,
    SYSTEM_COMPACTION_NOTE,
    summary_message_text,
)
from agent.messages import Message


def _side(role: str | None) -> str | None:
    # Tool results travel as the user's side of the exchange (Anthropic sends them in a
    # user turn), so a summary after them must not be a user message either.
    return "user" if role == "tool" else role


def choose_summary_role(
    head_last_role: str | None, tail_first_role: str | None
) -> Literal["user", "assistant", "merge"]:
    """The role for the summary so that no two neighbours share a role.

    Head ends assistant -> user; head ends user (or tool) -> assistant; head ends with the
    system prompt (or is empty) -> user. If that collides with the tail's first message the
    role flips; if the flipped role collides with the head, the summary is merged into
    the first tail message ("merge").
    """
    before, after = _side(head_last_role), _side(tail_first_role)
    role: Literal["user", "assistant"] = "assistant" if before == "user" else "user"
    if role != after:
        return role
    flipped: Literal["user", "assistant"] = "assistant" if role == "user" else "user"
    if flipped != before:
        return flipped
    return "merge"


def with_system_note(head: Sequence[Message]) -> list[Message]:
    """The head with the one-line compression note on its system prompt (first time only)."""
    result = list(head)
    if result and result[0].get("role") == "system":
        content = result[0].get("content")
        if isinstance(content, str) and SYSTEM_COMPACTION_NOTE not in content:
            result[0] = {**result[0], "content": f"{content}\n\n{SYSTEM_COMPACTION_NOTE}"}
    return result


def _merge_into(message: Message, summary_text: str) -> Message:
    merged = message.copy()
    prefix = f"{summary_text}\n\n{MERGED_MESSAGE_DELIMITER}\n\n"
    content = message.get("content")
    if isinstance(content, list):
        merged["content"] = [{"type": "text", "text": prefix}, *content]
    else:
        merged["content"] = prefix + (content or "")
    return merged


def assemble(head: Sequence[Message], summary_body: str, tail: Sequence[Message]) -> list[Message]:
    """Head, then the summary message (or the summary merged into the first tail row), then
    the tail unchanged; orphaned tool pairs repaired."""
    text = summary_message_text(summary_body)
    head_role = head[-1].get("role") if head else None
    tail_role = tail[0].get("role") if tail else None
    role = choose_summary_role(head_role, tail_role)
    # Kept messages are the very objects given (never mutated): the caller recognises
    # them, and their stored rows stay as they are (docs/design.md#compression-commit).
    result: list[Message] = list(head)
    if role == "merge":
        result.append(_merge_into(tail[0], text))
        result.extend(tail[1:])
    else:
        result.append({"role": role, "content": text})
        result.extend(tail)
    return repair_tool_pairs(result)


def _call_ids(message: Message) -> list[str]:
    return [
        str(call.get("id"))
        for call in message.get("tool_calls") or []
        if isinstance(call, Mapping) and call.get("id")
    ]


def repair_tool_pairs(messages: Sequence[Message]) -> list[Message]:
    """Drop tool results whose call is gone; give calls whose results are gone a stub.

    A stub result is inserted right after the calling assistant message's own results,
    so every call is answered before the next non-tool message. Messages that stay are
    the same objects.
    """
    called = {cid for m in messages if m.get("role") == "assistant" for cid in _call_ids(m)}
    answered = {str(m.get("tool_call_id")) for m in messages if m.get("role") == "tool"} & called
    result: list[Message] = []
    pending: list[str] = []

    def flush() -> None:
        for call_id in pending:
            result.append({"role": "tool", "tool_call_id": call_id, "content": STUB_TOOL_RESULT})
        pending.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            if str(message.get("tool_call_id")) not in called:
                continue
            result.append(message)
            continue
        flush()
        result.append(message)
        if role == "assistant":
            pending.extend(cid for cid in _call_ids(message) if cid not in answered)
    flush()
    return result
