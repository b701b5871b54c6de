"""Long-term memory as the agent sees it (docs/design.md#memory).

The agent stores nothing itself: the gateway implements :class:`Memory` for the chat of
one turn — which notes apply there, and who "me" is — and hands it to the turn's tools
(:mod:`agent.memory_tools`). The memory block every request carries is rendered here
from the notes alone, so the same notes always give the same bytes and Anthropic's
prompt cache holds while memory does not change (docs/design.md#memory-block).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from agent.messages import Message
from agent.tokens import estimate_message_tokens_rough
from agent.window import Window

#: ``me``: the person speaking (a personal note); ``chat``: everyone in this chat.
Scope = Literal["me", "chat"]

#: A note longer than this is refused: a memory is a fact, not a document.
MAX_NOTE_CHARS = 500
#: The block never takes more than this share of the input budget (small windows)...
WINDOW_SHARE = 0.125
#: ...and below this budget memory stays out of the session — no block, no tools, no
#: flush: the header and a note or two take about this much. An eighth of a 2K model's
#: input budget still affords it (docs/design.md#memory-block).
MIN_BLOCK_TOKENS = 96
#: The tools a turn is offered only when it carries the block (agent/memory_tools.py).
TOOL_NAMES = frozenset({"remember", "forget"})

BLOCK_HEADER = (
    "[nightowl memory] Notes kept across conversations. remember durable facts (scope me: "
    "the speaker; chat: everyone here; replaces=<id> updates a note); forget(<id>) only "
    "when asked."
)
CHAT_HEADING = "About this chat:"
PERSONAL_HEADING = "About the person speaking (private chat):"
NOTHING_YET = "Nothing is remembered yet."
LEFT_OUT = "({count} older note(s) not shown: session_search finds them.)"


@dataclass(frozen=True)
class Note:
    """One memory entry as the agent sees it."""

    id: int
    text: str
    #: A personal note of the person speaking (shown only in their private chat).
    personal: bool
    #: Epoch seconds it was learned or last used: the block shows the most recent first.
    last_used: float = 0.0


@dataclass(frozen=True)
class Remembered:
    """What ``remember`` did: stored ``note``, or found it there already (``new`` False)."""

    note: Note
    new: bool
    #: The id of the note this one replaced (archived, still searchable), if any.
    replaced: int | None = None


class Memory(Protocol):
    """What a turn may do with long-term memory; the gateway decides where it goes."""

    async def remember(self, text: str, scope: Scope, replaces: int | None = None) -> Remembered:
        """Keep ``text``; raise ``ToolInputError`` saying why when it cannot be kept."""
        ...

    async def forget(self, note_id: int) -> Note | None:
        """Remove a note visible in this chat; None when there is no such note here."""
        ...


@dataclass(frozen=True)
class MemoryBlock:
    """The memory block of one turn's requests: a system message after the system prompt."""

    text: str
    shown: int = 0
    left_out: int = 0

    @property
    def message(self) -> Message:
        return {"role": "system", "content": self.text}

    @property
    def tokens(self) -> int:
        return estimate_message_tokens_rough(self.message)


def block_budget(max_tokens: int, window: Window | None = None) -> int:
    """Tokens the block may take: ``memory.max_tokens``, and on a small window no more
    than :data:`WINDOW_SHARE` of what a prompt may fill (the conversation needs the rest);
    0 when that share is under :data:`MIN_BLOCK_TOKENS`: the window cannot afford memory."""
    if window is None:
        return max_tokens
    # The budget is the server's tokens; the block is measured by the estimate.
    share = int(window.input_budget * WINDOW_SHARE / max(1.0, window.scale))
    return min(max_tokens, share) if share >= MIN_BLOCK_TOKENS else 0


def render_block(notes: Sequence[Note], *, max_tokens: int) -> MemoryBlock:
    """The block for ``notes``: the most recently used first, within ``max_tokens``.

    Depends on nothing but the notes and the budget (docs/design.md#memory-block). The
    header always stays, whatever the budget: it tells the model how to use the tools.
    """
    ranked = sorted(notes, key=lambda n: (-n.last_used, -n.id))
    chosen: list[Note] = []
    for index, note in enumerate(ranked):
        trial = _compose([*chosen, note], left_out=len(ranked) - index - 1)
        if MemoryBlock(trial).tokens > max_tokens:
            break
        chosen.append(note)
    left_out = len(ranked) - len(chosen)
    return MemoryBlock(_compose(chosen, left_out=left_out), len(chosen), left_out)


def _compose(notes: Sequence[Note], *, left_out: int) -> str:
    lines = [BLOCK_HEADER]
    chat = [n for n in notes if not n.personal]
    personal = [n for n in notes if n.personal]
    if chat:
        lines += [CHAT_HEADING, *(_line(n) for n in chat)]
    if personal:
        lines += [PERSONAL_HEADING, *(_line(n) for n in personal)]
    if not notes and not left_out:
        lines.append(NOTHING_YET)
    if left_out:
        lines.append(LEFT_OUT.format(count=left_out))
    return "\n".join(lines)


def _line(note: Note) -> str:
    return f"- [#{note.id}] {' '.join(note.text.split())}"


def with_block(messages: Sequence[Message], block: Message | None) -> list[Message]:
    """``messages`` with ``block`` right after the leading system rows: after the cached
    system prompt, before the conversation (docs/design.md#memory-block)."""
    shown = list(messages)
    if block is None:
        return shown
    at = 0
    while at < len(shown) and shown[at].get("role") == "system":
        at += 1
    return [*shown[:at], block, *shown[at:]]
