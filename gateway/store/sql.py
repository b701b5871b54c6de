"""What SQLite says its own way: the statements the views take from their connection's
dialect (:class:`~gateway.store.dialect.Dialect`; PostgreSQL's are in
:mod:`gateway.store.postgres.sql`). Everything else the views write once, in SQL both
databases accept (docs/design.md#postgresql)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

NAME = "sqlite"
#: One writer (this process, its one thread) already checks budgets one at a time.
SERIALIZE_BUDGETS: tuple[str, ...] = ()
_WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(query: str) -> str:
    """User text → an FTS5 query that cannot be a syntax error: quoted words, OR-ed."""
    words = _WORD.findall(query)
    return " OR ".join(f'"{w}"' for w in words[:16])


def id_list(ids: Iterable[int]) -> str:
    """A list of row ids as one parameter (a JSON array, read with json_each)."""
    return json.dumps(list(ids))


#: Appended rows get, as their place (seq), the id they are about to get.
INSERT_MESSAGE = (
    "INSERT INTO messages(session_id, role, content, parts, tool_calls, tool_call_id,"
    " tool_name, created_at, token_count, platform_message_id, pending_delivery,"
    " active, compacted, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " COALESCE(?, (SELECT COALESCE(MAX(id), 0) + 1 FROM messages)))"
)
#: A chat's document parts matching a search, best first (:key, :match, :scan); a
#: document's best part is its hit (docs/design.md#documents).
DOCUMENT_SEARCH = """
SELECT d.id, d.kind, d.size, d.chars, d.pages, c.name, c.created_at, p.part,
    snippet(document_parts_fts, 0, '«', '»', '…', 24) AS snippet
FROM document_parts_fts
JOIN document_parts p ON p.n = document_parts_fts.rowid
JOIN documents d ON d.n = p.document
JOIN chat_documents c ON c.document = d.n AND c.session_key = :key
WHERE document_parts_fts MATCH :match
ORDER BY bm25(document_parts_fts) LIMIT :scan
"""
#: A compression archives the session's active rows but the ones it keeps (an id list).
ARCHIVE_EXCEPT = (
    "UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1"
    " AND id NOT IN (SELECT value FROM json_each(?))"
)
SEQS_OF = "SELECT id, seq FROM messages WHERE id IN (SELECT value FROM json_each(?))"

# Platform ids are numeric text (Discord snowflakes); other ids, such as
# "interaction:<id>", say nothing about a channel's history.
NEWEST_STORED_IDS = """
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


#: A conversation's full-text search: archived rows included, and every session its chat
#: had before — ended by /new, or rotated (docs/design.md#search-across-sessions) — but
#: never another chat's. Rows outside the session's active context count as archived.
#: Summaries repeat what the originals say (and each supersedes the last): the
#: originals are what a search finds, once each.
SEARCH = """
WITH chat(id) AS (
    SELECT id FROM sessions
    WHERE session_key = (SELECT session_key FROM sessions WHERE id = :session)
)
SELECT m.id, m.role, m.created_at,
    CASE WHEN m.session_id = :session THEN m.active ELSE 0 END AS active,
    snippet(messages_fts, 0, '«', '»', '…', 24) AS snippet
FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
WHERE messages_fts MATCH :match AND m.session_id IN (SELECT id FROM chat)
    AND (m.active = 1 OR m.compacted = 1) AND m.role IN ('user', 'assistant', 'tool')
    AND coalesce(m.content, '') NOT LIKE :summary
ORDER BY bm25(messages_fts) LIMIT :limit
"""

#: Replies stored but not handed to their platform (all, or one session key's), oldest
#: first, each with the platform id of the user message it answers (to thread it).
PENDING_DELIVERIES = """
SELECT m.id, m.content, s.session_key, s.platform, s.chat_id, s.thread_id,
    (SELECT u.platform_message_id FROM messages u WHERE u.session_id = m.session_id
        AND u.role = 'user' AND u.id < m.id AND u.platform_message_id IS NOT NULL
        ORDER BY u.id DESC LIMIT 1) AS reply_to
FROM messages m JOIN sessions s ON s.id = m.session_id
WHERE m.pending_delivery = 1 AND (:key IS NULL OR s.session_key = :key)
ORDER BY m.id
"""

#: Images leave a row when the row leaves the context: the summary has named them, and a
#: chat's photos must not pile up in the database for ever (docs/design.md#groups). The
#: row's text stays, with a note of what it carried.
DROP_IMAGES_OF_ARCHIVED = """
UPDATE messages SET
    content = coalesce(content, '') || char(10) || '[' || (
        SELECT count(*) FROM json_each(parts) WHERE json_extract(value, '$.type') = 'image_url'
    ) || ' image(s) not kept once this part of the conversation was summarized]',
    parts = NULL
WHERE session_id = ? AND active = 1 AND parts IS NOT NULL
    AND id NOT IN (SELECT value FROM json_each(?))
    AND EXISTS (
        SELECT 1 FROM json_each(parts) WHERE json_extract(value, '$.type') = 'image_url'
    )
"""
