"""The memory tools: ``remember`` and ``forget`` (docs/design.md#memory-tools).

They write through the turn's :class:`~agent.memory.Memory`, which the gateway binds to
the chat and the person speaking; a tool never chooses whose memory it writes.
"""

from __future__ import annotations

from typing import Any

from agent.memory import MAX_NOTE_CHARS, Memory, Scope
from agent.messages import JSON
from agent.tools import Tool, ToolContext, ToolInputError

REMEMBER_DESCRIPTION = (
    "Keep a durable fact, preference or decision for later conversations (never "
    "chit-chat). scope me: about the person speaking; chat: for everyone here."
)
FORGET_DESCRIPTION = "Remove a remembered note by its [#id], only when asked to forget it."


def _memory(context: ToolContext) -> Memory:
    if context.memory is None:
        raise ToolInputError("memory is turned off for this bot")
    return context.memory


def _note_id(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(str(value).lstrip("#"))
    except ValueError:
        raise ToolInputError(f"{name} must be a note id such as 12") from None


async def _remember(arguments: JSON, context: ToolContext) -> str:
    text = " ".join(str(arguments.get("text") or "").split())
    if not text:
        raise ToolInputError("text is required")
    if len(text) > MAX_NOTE_CHARS:
        raise ToolInputError(f"keep a note under {MAX_NOTE_CHARS} characters: one fact")
    scope: Scope = "me" if str(arguments.get("scope") or "chat").lower() == "me" else "chat"
    replaces = _note_id(arguments.get("replaces"), "replaces")
    done = await _memory(context).remember(text, scope, replaces)
    if not done.new:
        return f"Already remembered as #{done.note.id}."
    where = "about the person speaking" if done.note.personal else "for this chat"
    replaced = f", replacing #{done.replaced}" if done.replaced is not None else ""
    return f"Remembered as #{done.note.id} {where}{replaced}."


async def _forget(arguments: JSON, context: ToolContext) -> str:
    note_id = _note_id(arguments.get("id"), "id")
    if note_id is None:
        raise ToolInputError("id is required")
    forgotten = await _memory(context).forget(note_id)
    if forgotten is None:
        return f"There is no note #{note_id} in this chat's memory."
    return f"Forgot #{note_id}."


REMEMBER = Tool(
    name="remember",
    description=REMEMBER_DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "scope": {"type": "string", "enum": ["me", "chat"]},
            "replaces": {"type": "integer", "description": "id of a note this updates"},
        },
        "required": ["text"],
    },
    handler=_remember,
)

FORGET = Tool(
    name="forget",
    description=FORGET_DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {"id": {"type": "integer"}},
        "required": ["id"],
    },
    handler=_forget,
)

MEMORY_TOOLS: tuple[Tool, ...] = (REMEMBER, FORGET)
