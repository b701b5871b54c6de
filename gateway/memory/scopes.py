"""Whose memory a turn sees and writes (docs/design.md#memory-scopes).

A note belongs to a chat (owner: the session key, so a group, a channel, a forum topic,
a private chat) or to a person (owner: ``<platform>:<user id>``). A turn sees its chat's
notes, plus the speaking person's own notes only in that person's private chat: in a
group no member's personal note is ever shown, searched or forgettable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adapters.base import PRIVATE_CHAT_TYPES, InboundMessage
from agent.memory import (
    MemoryBlock,
    Note,
    Remembered,
    Scope,
    block_budget,
    render_block,
)
from agent.tools import ToolInputError
from agent.transcript import SearchResult
from agent.window import Window
from gateway.platforms import Platforms
from gateway.store import InboxEntry, MemoryEntry, MemoryOwner, MemoryStore, NewMemory


@dataclass(frozen=True)
class Source:
    """Where notes written through a :class:`ChatMemory` are learned."""

    session_id: str | None = None
    platform_message_id: str | None = None
    learned_by: str = "tool"


class ChatMemory:
    """One chat's memory as one turn, command or flush sees it (the agent's
    :class:`~agent.memory.Memory`)."""

    def __init__(
        self,
        store: MemoryStore,
        chat: str,
        person: str | None = None,
        *,
        private: bool = False,
        max_tokens: int = 1500,
        source: Source | None = None,
    ) -> None:
        self.store = store
        self.chat = MemoryOwner("chat", chat)
        self.person = MemoryOwner("user", person) if person else None
        #: The person's own notes are visible: this is their private chat with the bot.
        self.private = private and self.person is not None
        self.max_tokens = max_tokens
        self.source = source or Source()

    @property
    def visible(self) -> list[MemoryOwner]:
        """Whose notes show here: the chat's, and the person's in their private chat."""
        if self.private and self.person is not None:
            return [self.chat, self.person]
        return [self.chat]

    async def entries(self) -> list[MemoryEntry]:
        """The active notes visible here, most recently used first."""
        return await self.store.memories(self.visible)

    async def block(self, window: Window | None = None) -> MemoryBlock | None:
        """The block this chat's requests carry on ``window`` (docs/design.md#memory-block);
        None when the window is too small to afford memory."""
        budget = block_budget(self.max_tokens, window)
        if not budget:
            return None
        return render_block([note_of(e) for e in await self.entries()], max_tokens=budget)

    async def chat_notes(self) -> list[Note]:
        """The chat's own notes (what a flush may see, in any chat)."""
        return [note_of(e) for e in await self.store.memories([self.chat])]

    async def remember(self, text: str, scope: Scope, replaces: int | None = None) -> Remembered:
        owner = self.person if scope == "me" else self.chat
        if owner is None:
            raise ToolInputError("nobody in particular is speaking here: use scope chat")
        if scope == "me" and not self.private:
            # A group's words, anyone's, must not reach a person's private-chat prompt
            # (docs/design.md#memory-scopes).
            raise ToolInputError(
                "notes about a person are kept only in their private chat with me: "
                "here, use scope chat"
            )
        if replaces is not None:
            old = await self.store.get_memory(replaces)
            if old is None or old.owner != owner or old.archived_at is not None:
                raise ToolInputError(f"there is no current note #{replaces} in that scope")
        source = self.source
        entry, new = await self.store.remember(
            NewMemory(
                owner, text, source.session_id, source.platform_message_id, source.learned_by
            ),
            replaces=replaces,
        )
        return Remembered(note_of(entry), new, replaces)

    async def forget(self, note_id: int) -> Note | None:
        entry = await self.store.get_memory(note_id)
        if entry is None or entry.owner not in self.visible:
            return None
        await self.store.forget_memory(note_id)
        return note_of(entry)

    async def search(self, query: str, limit: int) -> list[SearchResult]:
        """Notes visible here matching ``query``, replaced ones included."""
        found = await self.store.search_memories(self.visible, query, limit)
        return [
            SearchResult(
                "memory",
                f"note #{e.id}: {e.text}"
                + (f" (replaced by #{e.replaced_by})" if e.replaced_by else ""),
                e.created_at,
                e.archived_at is not None,
            )
            for e in found
        ]


def note_of(entry: MemoryEntry) -> Note:
    return Note(entry.id, entry.text, entry.owner.scope == "user", entry.last_used_at)


class Memories:
    """Builds the :class:`ChatMemory` of a turn, a command or a flush."""

    def __init__(self, store: MemoryStore, max_tokens: int, platforms: Platforms) -> None:
        self.store = store
        self.max_tokens = max_tokens
        #: How a message's chat is keyed, and whether a key's chat is private
        #: (docs/design.md#platform-traits).
        self.platforms = platforms

    def for_turn(
        self, key: str, entries: Sequence[InboxEntry], session_id: str | None = None
    ) -> ChatMemory:
        """The memory of the turn that answers ``entries``: "me" is who addressed the bot."""
        addressed = [e for e in entries if e.addressed] or list(entries)
        target = addressed[-1] if addressed else None
        person = f"{target.platform}:{target.user_id}" if target and target.user_id else None
        return ChatMemory(
            self.store,
            key,
            person,
            private=target is not None and target.chat_type in PRIVATE_CHAT_TYPES,
            max_tokens=self.max_tokens,
            source=Source(session_id, target.platform_message_id if target else None),
        )

    def for_message(self, message: InboundMessage) -> ChatMemory:
        """The memory a command sees: its chat's, and the sender's in a private chat."""
        return ChatMemory(
            self.store,
            self.platforms.session_key(message),
            f"{message.platform}:{message.user_id}" if message.user_id else None,
            private=message.chat_type in PRIVATE_CHAT_TYPES,
            max_tokens=self.max_tokens,
        )

    def for_chat(self, key: str, source: Source | None = None) -> ChatMemory:
        """A chat's memory with nobody in particular speaking (a flush)."""
        return ChatMemory(self.store, key, max_tokens=self.max_tokens, source=source)
