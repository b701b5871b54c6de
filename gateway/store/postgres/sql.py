"""What PostgreSQL says its own way: the statements the store's views take from their
connection's dialect (:class:`~gateway.store.dialect.Dialect`; SQLite's are in
:mod:`gateway.store.sql`). Placeholders are written as in SQLite (``?``, ``:name``); the
handle (:mod:`gateway.store.postgres.handle`) numbers them (docs/design.md#postgresql).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NAME = "postgresql"
#: Replicas check budgets one at a time: a lock held until the check's transaction ends,
#: waited for at most 5 s (a stalled replica holding it fails the others' checks closed,
#: with a WARNING, rather than hanging every budgeted call).
SERIALIZE_BUDGETS: tuple[str, ...] = (
    "SET LOCAL lock_timeout = '5s'",
    "SELECT pg_advisory_xact_lock(7104115103)",
)
_WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(query: str) -> str:
    """User text → a tsquery that cannot be a syntax error: its words, OR-ed."""
    words = [w.lower() for w in _WORD.findall(query)[:16]]
    return " | ".join(f"'{w}'" for w in words)


def id_list(ids: Iterable[int]) -> list[int]:
    """A list of row ids as one parameter (an array)."""
    return list(ids)


#: An appended row (seq NULL) gets its id as its place: a trigger sets it
#: (gateway/store/postgres/schema.py).
INSERT_MESSAGE = (
    "INSERT INTO messages(session_id, role, content, parts, tool_calls, tool_call_id,"
    " tool_name, created_at, token_count, platform_message_id, pending_delivery,"
    " active, compacted, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
ARCHIVE_EXCEPT = (
    "UPDATE messages SET active = 0, compacted = 1 WHERE session_id = ? AND active = 1"
    " AND NOT (id = ANY(CAST(? AS BIGINT[])))"
)
SEQS_OF = "SELECT id, seq FROM messages WHERE id = ANY(CAST(? AS BIGINT[]))"

DROP_IMAGES_OF_ARCHIVED = """
UPDATE messages SET
    content = coalesce(content, '') || chr(10) || '[' || (
        SELECT count(*) FROM jsonb_array_elements(parts::jsonb) AS part
        WHERE part ->> 'type' = 'image_url'
    ) || ' image(s) not kept once this part of the conversation was summarized]',
    parts = NULL
WHERE session_id = ? AND active = 1 AND parts IS NOT NULL
    AND NOT (id = ANY(CAST(? AS BIGINT[])))
    AND EXISTS (
        SELECT 1 FROM jsonb_array_elements(parts::jsonb) AS part
        WHERE part ->> 'type' = 'image_url'
    )
"""

SEARCH = """
WITH chat(id) AS (
    SELECT id FROM sessions WHERE session_key =
        (SELECT session_key FROM sessions WHERE id = CAST(:session AS TEXT))
), query AS (SELECT to_tsquery('simple', :match) AS q)
SELECT m.id, m.role, m.created_at,
    CASE WHEN m.session_id = CAST(:session AS TEXT) THEN m.active ELSE 0 END AS active,
    ts_headline('simple', coalesce(m.content, ''), query.q,
        'StartSel=«, StopSel=», MaxWords=24, MinWords=8, ShortWord=1') AS snippet
FROM messages m, query
WHERE m.tsv @@ query.q AND m.session_id IN (SELECT id FROM chat)
    AND (m.active = 1 OR m.compacted = 1) AND m.role IN ('user', 'assistant', 'tool')
    AND coalesce(m.content, '') NOT LIKE :summary
ORDER BY ts_rank(m.tsv, query.q) DESC, m.id LIMIT :limit
"""

DOCUMENT_SEARCH = """
WITH query AS (SELECT to_tsquery('simple', :match) AS q)
SELECT d.id, d.kind, d.size, d.chars, d.pages, c.name, c.created_at, p.part,
    ts_headline('simple', p.text, query.q,
        'StartSel=«, StopSel=», MaxWords=24, MinWords=8, ShortWord=1') AS snippet
FROM document_parts p
JOIN documents d ON d.n = p.document
JOIN chat_documents c ON c.document = d.n AND c.session_key = :key, query
WHERE p.tsv @@ query.q
ORDER BY ts_rank(p.tsv, query.q) DESC, p.n LIMIT :scan
"""

NEWEST_STORED_IDS = """
SELECT chat_id, MAX(CAST(platform_message_id AS BIGINT)) AS newest FROM (
    SELECT s.chat_id AS chat_id, m.platform_message_id AS platform_message_id
    FROM sessions s JOIN messages m ON m.session_id = s.id
    WHERE s.platform = :platform AND m.role = 'user' AND m.created_at >= :since
    UNION ALL
    SELECT chat_id, platform_message_id FROM inbox
    WHERE platform = :platform AND created_at >= :since
) AS stored
WHERE chat_id IS NOT NULL AND platform_message_id ~ '^[0-9]+$'
GROUP BY chat_id
"""

PENDING_DELIVERIES = """
SELECT m.id, m.content, s.session_key, s.platform, s.chat_id, s.thread_id,
    (SELECT u.platform_message_id FROM messages u WHERE u.session_id = m.session_id
        AND u.role = 'user' AND u.id < m.id AND u.platform_message_id IS NOT NULL
        ORDER BY u.id DESC LIMIT 1) AS reply_to
FROM messages m JOIN sessions s ON s.id = m.session_id
WHERE m.pending_delivery = 1 AND (CAST(:key AS TEXT) IS NULL OR s.session_key = :key)
ORDER BY m.id
"""
