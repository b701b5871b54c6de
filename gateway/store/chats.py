"""Chats that continue under another id, in SQL both databases read alike (:class:`~gateway.store.protocols.ChatStore`,
docs/design.md#chat-moves): a Telegram group upgraded to a supergroup."""

from __future__ import annotations

import logging
import time

from gateway.store.dialect import Database, Handle

log = logging.getLogger(__name__)

#: The session keys of a chat: ``<platform>:<chat>`` and its topics ``<platform>:<chat>:<topic>``.
_OF_CHAT = "({column} = :old OR substr({column}, 1, length(:old) + 1) = :old || ':')"
_RENAMED = ":new || substr({column}, length(:old) + 1)"


class SqlChats:
    """:class:`~gateway.store.protocols.ChatStore` on a :class:`Connection`."""

    def __init__(self, connection: Database) -> None:
        self.connection = connection

    async def move_chat(self, platform: str, old_chat_id: str, new_chat_id: str) -> bool:
        names = {"old": f"{platform}:{old_chat_id}", "new": f"{platform}:{new_chat_id}"}
        async with self.connection.transaction() as db:
            cursor = await db.execute(
                "INSERT INTO chat_moves(platform, old_chat_id, new_chat_id, moved_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (platform, old_chat_id, new_chat_id, time.time()),
            )
            if cursor.rowcount == 0:
                return False
            await _end_younger_sessions(db, names)
            of_key = _OF_CHAT.format(column="session_key")
            renamed = _RENAMED.format(column="session_key")
            ids = {**names, "chat": new_chat_id, "platform": platform}
            await db.execute(
                f"UPDATE sessions SET session_key = {renamed}, chat_id = :chat"
                f" WHERE platform = :platform AND {of_key}",
                ids,
            )
            for table in ("inbox", "reminders"):
                await db.execute(
                    f"UPDATE {table} SET session_key = {renamed}, chat_id = :chat WHERE {of_key}",
                    ids,
                )
            await db.execute(  # the chat's memory notes follow it (docs/design.md#memory-scopes)
                f"UPDATE memories SET owner = {_RENAMED.format(column='owner')}"
                f" WHERE scope = 'chat' AND {_OF_CHAT.format(column='owner')}",
                names,
            )
            # A document both chats hold stays once, under the new chat's name for it.
            await db.execute(
                f"DELETE FROM chat_documents WHERE {of_key} AND EXISTS (SELECT 1 FROM"
                " chat_documents d WHERE d.document = chat_documents.document AND"
                f" d.session_key = {_RENAMED.format(column='chat_documents.session_key')})",
                names,
            )
            await db.execute(
                f"UPDATE chat_documents SET session_key = {renamed} WHERE {of_key}", names
            )
        return True

    async def moved_chats(self) -> list[tuple[str, str, str]]:
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                "SELECT platform, old_chat_id, new_chat_id FROM chat_moves ORDER BY moved_at"
            )
        return [(row[0], row[1], row[2]) for row in rows]


async def _end_younger_sessions(db: Handle, names: dict[str, str]) -> None:
    """A session already current under the new id (a message there was handled before
    the move) ends: the older conversation continues. Its rows stay stored."""
    of_new = _OF_CHAT.format(column="session_key").replace(":old", ":new")
    cursor = await db.execute(
        "UPDATE sessions SET ended_at = :now, end_reason = 'moved', updated_at = :now"
        f" WHERE ended_at IS NULL AND {of_new}"
        " AND :old || substr(session_key, length(:new) + 1) IN"
        " (SELECT session_key FROM sessions WHERE ended_at IS NULL)",
        {**names, "now": time.time()},
    )
    if cursor.rowcount:
        log.warning(
            "%s had its own conversation when %s moved there; it ended (its rows are kept)",
            names["new"],
            names["old"],
        )
