"""Chats that continue under another id (docs/design.md#chat-moves).

Telegram gives a group a new id when it becomes a supergroup. The conversation follows:
its sessions, waiting messages, reminders and documents move to the new id in one
transaction, and the new id is allowed wherever the old one was, so nobody has to edit
the config. The moves are kept in the database and read at start.
"""

from __future__ import annotations

import logging

from gateway.conversation.lanes import Lanes
from gateway.store import ChatStore

log = logging.getLogger(__name__)

#: Hops followed back from a chat to the id the config names (a chain of upgrades).
_MAX_HOPS = 8


class ChatMoves:
    def __init__(self, store: ChatStore | None, lanes: Lanes | None = None) -> None:
        self.store = store
        self.lanes = lanes
        self._from: dict[tuple[str, str], str] = {}  # (platform, new id) -> old id

    async def load(self) -> None:
        if self.store is None:  # a store that keeps no moves (docs/design.md#chat-moves)
            return
        for platform, old, new in await self.store.moved_chats():
            self._from[(platform, new)] = old

    def earlier_ids(self, platform: str, chat_id: str) -> list[str]:
        """The ids ``chat_id`` had before, newest first."""
        found: list[str] = []
        while len(found) < _MAX_HOPS and (old := self._from.get((platform, chat_id))) is not None:
            if old in found:
                break
            found.append(old)
            chat_id = old
        return found

    async def follow(self, platform: str, old_chat_id: str, new_chat_id: str) -> bool:
        """Move the chat; False when it had moved there before (nothing to do)."""
        if old_chat_id == new_chat_id or self.store is None:
            return False
        moved = await self.store.move_chat(platform, old_chat_id, new_chat_id)
        self._from[(platform, new_chat_id)] = old_chat_id
        if moved:
            log.info("%s chat %s continues as %s", platform, old_chat_id, new_chat_id)
            old_key, new_key = f"{platform}:{old_chat_id}", f"{platform}:{new_chat_id}"
            if self.lanes is not None and self.lanes.busy(old_key):
                # A turn of the old id still runs: the new id's lane waits for it, so the
                # session never has two turns at once.
                self.lanes.submit(new_key, lambda: self._after(old_key))
        return moved

    async def _after(self, old_key: str) -> None:
        assert self.lanes is not None
        await self.lanes.finished(old_key)
