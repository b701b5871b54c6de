"""Where a platform's catch-up starts: the newest message id stored per chat.

Derived from the rows themselves (the user rows of every transcript, and the inbox), so
a cursor can never run ahead of what is durably stored and needs no table of its own.
"""

from __future__ import annotations

from gateway.store.connection import Connection

# Platform ids are numeric text (Discord snowflakes); other ids, such as
# "interaction:<id>", say nothing about a channel's history.
_NEWEST_STORED_IDS = """
SELECT chat_id, MAX(CAST(platform_message_id AS INTEGER)) AS newest FROM (
    SELECT s.chat_id AS chat_id, m.platform_message_id AS platform_message_id
    FROM sessions s JOIN messages m ON m.session_id = s.id
    WHERE s.platform = :platform AND m.role = 'user' AND m.created_at >= :since
    UNION ALL
    SELECT chat_id, platform_message_id FROM inbox
    WHERE platform = :platform AND created_at >= :since
)
WHERE chat_id IS NOT NULL AND platform_message_id <> ''
    AND platform_message_id NOT GLOB '*[^0-9]*'
GROUP BY chat_id
"""


class CursorQueries(Connection):
    async def newest_stored_message_ids(self, platform: str, since: float) -> dict[str, int]:
        """``{chat id: newest platform message id}`` over the user messages of
        ``platform`` stored since ``since`` (epoch seconds), in transcripts or the inbox.

        A chat with nothing stored since then is left out: it had no recent activity.
        """
        async with self._read() as db:
            rows = await db.execute_fetchall(
                _NEWEST_STORED_IDS, {"platform": platform, "since": since}
            )
        return {row["chat_id"]: int(row["newest"]) for row in rows}
