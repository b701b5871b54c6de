"""The model each chat chose with /model (docs/design.md#model-choice): one row per chat
in ``chat_models``, apart from its sessions so the choice outlives ``/new``."""

from __future__ import annotations

import time

from gateway.store.dialect import Database
from gateway.store.session_rows import set_anchor


class SqlChatModels:
    """The chat-model part of :class:`~gateway.store.protocols.ConversationStore`."""

    connection: Database

    async def chat_model(self, session_key: str) -> str | None:
        async with self.connection.read() as db:
            rows = list(
                await db.fetch_all(
                    "SELECT choice FROM chat_models WHERE session_key = ?", (session_key,)
                )
            )
        return str(rows[0][0]) if rows else None

    async def choose_model(self, session_key: str, choice: str | None, model: str) -> None:
        now = time.time()
        async with self.connection.transaction() as db:
            if choice is None:
                await db.execute("DELETE FROM chat_models WHERE session_key = ?", (session_key,))
            else:
                await db.execute(
                    "INSERT INTO chat_models(session_key, choice, chosen_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (session_key) DO UPDATE"
                    " SET choice = excluded.choice, chosen_at = excluded.chosen_at",
                    (session_key, choice, now),
                )
            await db.execute(
                "UPDATE sessions SET model = ?, updated_at = ?"
                " WHERE session_key = ? AND ended_at IS NULL",
                (model, now, session_key),
            )
            current = await db.fetch_all(
                "SELECT id FROM sessions WHERE session_key = ? AND ended_at IS NULL",
                (session_key,),
            )
            for (session_id,) in current:
                await set_anchor(db, session_id, None)  # counts of another model
