"""``/memory`` and ``/forget``: people see and control what the bot remembers
(docs/design.md#memory-commands).

``/memory`` lists, numbered, what the bot remembers in this chat and — in a private
chat — about the person asking. ``/forget N`` removes one of them (in a group, only an
allowed user may: it changes the chat's memory for everyone). ``/forget all`` in a
private chat removes everything about the person and that chat, once they confirm with
``/forget all yes`` within five minutes. Removal is deletion, older versions included.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from adapters.base import InboundMessage
from agent.memory import MemoryBlock
from gateway.memory.scopes import ChatMemory, Memories
from gateway.runtime import SessionRuntime
from gateway.store import MemoryEntry

MEMORY_OFF = "Memory is turned off for this bot (memory.enabled in its config)."
NOTHING = "I don't remember anything here yet."
#: A /forget all waits this long for its /forget all yes.
CONFIRM_SECONDS = 300.0
#: The /memory lists remembered (the last one per chat) for /forget N to read.
SHOWN_LISTS_KEPT = 1024


class Sessions(Protocol):
    async def existing(self, key: str) -> SessionRuntime | None: ...


class MemoryCommands:
    """Answers ``/memory`` and ``/forget``; ``memories`` None when memory is off."""

    NAMES = frozenset({"memory", "forget"})

    def __init__(
        self,
        memories: Memories | None,
        sessions: Sessions | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.memories = memories
        #: Whose window decides what the prompt carries (/memory says what it leaves out).
        self.sessions = sessions
        self.clock = clock
        #: (chat, person) -> when they asked to forget everything, awaiting "yes".
        self._asked: dict[tuple[str, str], float] = {}
        #: chat -> the notes' ids in the order the last /memory posted there numbered
        #: them: /forget N means the N people can read in the chat, even after a
        #: /forget renumbered the notes (in a group, whoever posted the list). At most
        #: SHOWN_LISTS_KEPT chats, the oldest dropped first.
        self._shown: OrderedDict[str, list[int]] = OrderedDict()

    def handles(self, name: str) -> bool:
        return name in self.NAMES

    async def __call__(self, message: InboundMessage, name: str, argument: str) -> str:
        if self.memories is None:
            return MEMORY_OFF
        memory = self.memories.for_message(message)
        if name == "memory":
            entries = await numbered(memory)
            self._remember_shown(memory, [entry.id for entry in entries])
            listed = describe(entries, private=memory.private)
            carried = await self._carried(memory)
            return listed if carried is None else f"{listed}\n{carried}"
        words = argument.lower().split()
        if words[:1] == ["all"]:
            return await self.forget_all(memory, confirmed=words[1:2] == ["yes"])
        return await self.forget_one(memory, argument)

    async def _carried(self, memory: ChatMemory) -> str | None:
        """What this chat's model sees of the notes, when it is not all of them: a small
        window carries the most recently used (docs/design.md#memory-block)."""
        # The chat's notes are owned by its session key (docs/design.md#memory-scopes).
        key = memory.chat.owner
        runtime = await self.sessions.existing(key) if self.sessions else None
        if runtime is None:
            return None
        block = await memory.block(runtime.agent.window)
        return carried_note(block, runtime.agent.window.context_length)

    def _remember_shown(self, memory: ChatMemory, ids: list[int]) -> None:
        chat = memory.chat.owner
        self._shown[chat] = ids
        self._shown.move_to_end(chat)
        if len(self._shown) > SHOWN_LISTS_KEPT:
            self._shown.popitem(last=False)

    async def forget_one(self, memory: ChatMemory, argument: str) -> str:
        listed = await numbered(memory)
        try:
            number = int(argument.strip().lstrip("#"))
        except ValueError:
            return "Say which one: /forget N, with N from the /memory list."
        # The list as /memory last posted it here (as it is now, if it never did).
        ids = self._shown.get(memory.chat.owner) or [entry.id for entry in listed]
        if not 1 <= number <= len(ids):
            return f"There is no number {number}: /memory lists what I remember here."
        entry = next((entry for entry in listed if entry.id == ids[number - 1]), None)
        if entry is None:
            return f"Number {number} is already forgotten: /memory shows the list as it is now."
        await memory.forget(entry.id)
        return f"Forgot: {entry.text}"

    async def forget_all(self, memory: ChatMemory, *, confirmed: bool) -> str:
        if not memory.private or memory.person is None:
            return (
                "In a group I forget one thing at a time: /forget N. /forget all works in "
                "your private chat with me."
            )
        asker = (memory.chat.owner, memory.person.owner)
        count = len(await memory.entries())
        if not confirmed:
            if not count:
                return NOTHING
            self._asked[asker] = self.clock()
            return (
                f"That removes {'the one thing' if count == 1 else f'all {count} things'} I"
                " remember about you and this chat, for good. Send /forget all yes within 5"
                " minutes to confirm."
            )
        asked = self._asked.pop(asker, None)
        if asked is None or self.clock() - asked > CONFIRM_SECONDS:
            return "Send /forget all first; then /forget all yes confirms it."
        store = memory.store
        gone = await store.forget_memories(memory.person) + await store.forget_memories(memory.chat)
        return f"Done: I forgot everything I remembered about you and this chat ({gone} note(s))."


async def numbered(memory: ChatMemory) -> list[MemoryEntry]:
    """What ``/memory`` lists, in the order it numbers them: the chat's notes, then the
    person's, each oldest first (numbers stay put as new notes come)."""
    entries = sorted(await memory.entries(), key=lambda e: (e.owner.scope != "chat", e.id))
    return entries


def describe(entries: list[MemoryEntry], *, private: bool) -> str:
    if not entries:
        return NOTHING
    lines: list[str] = []
    chat = [e for e in entries if e.owner.scope == "chat"]
    if chat:
        lines.append("What I remember in this chat:")
    for number, entry in enumerate(entries, start=1):
        if entry.owner.scope == "user" and (
            number == 1 or entries[number - 2].owner.scope == "chat"
        ):
            lines.append("About you (shown only here, in our private chat):")
        lines.append(f"{number}. {' '.join(entry.text.split())}")
    lines.append(
        "\n/forget N removes one"
        + ("; /forget all removes everything about you." if private else ".")
    )
    return "\n".join(lines)


def carried_note(block: MemoryBlock | None, window: int) -> str | None:
    """One sentence when the prompt leaves notes out, else None."""
    if block is None:
        return (
            f"This model's window ({window:,} tokens) is too small to carry notes, so I "
            "don't see them now: they are kept, for a larger model (/model)."
        )
    if not block.left_out:
        return None
    if not block.shown:
        carried = "none of these notes"
    elif block.shown == 1:
        carried = "only the note used most recently"
    else:
        carried = f"only the {block.shown} notes used most recently"
    rest = "the other is" if block.left_out == 1 else f"the other {block.left_out} are"
    return (
        f"This model's window ({window:,} tokens) carries {carried}; {rest} kept, and "
        "I find them when I search."
    )
