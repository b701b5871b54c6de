"""The database schema as forward migrations; ``PRAGMA user_version`` records the last one.

Opening an older database applies the missing migrations in order (docs/design.md#migrations). Never edit
a released migration: add a new one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from gateway.store import migrate_copies
from gateway.store.dialect import Handle

# 1: sessions, messages with soft-archive flags and per-row token counts, FTS5 (docs/design.md#storage, #compression-commit, #usage-anchor).
_V1 = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT,
    thread_id TEXT,
    user_id TEXT,
    model TEXT,
    parent_session_id TEXT REFERENCES sessions(id),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    anchor_prompt_tokens INTEGER,
    anchor_completion_tokens INTEGER,
    anchor_message_id INTEGER,
    anchor_fingerprint TEXT,
    anchor_route TEXT,
    engine_state TEXT NOT NULL DEFAULT '{}',
    compression_count INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX sessions_current ON sessions(session_key) WHERE ended_at IS NULL;
CREATE INDEX sessions_key ON sessions(session_key);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    parts TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    created_at REAL NOT NULL,
    token_count INTEGER NOT NULL DEFAULT 0,
    platform_message_id TEXT,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX messages_active ON messages(session_id, active, id);

CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content='messages', content_rowid='id', tokenize='unicode61'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END;
"""

# 2: exactly-once intake and delivery (docs/design.md#lanes, #delivery-guarantee), usage totals for /usage.
_V2 = """
CREATE TABLE inbox (
    id INTEGER PRIMARY KEY,
    session_key TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT,
    user_id TEXT,
    message TEXT NOT NULL,
    token_count INTEGER NOT NULL DEFAULT 0,
    addressed INTEGER NOT NULL DEFAULT 1,
    platform_message_id TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX inbox_session ON inbox(session_key, id);
CREATE TABLE inbound_seen (
    dedupe_key TEXT PRIMARY KEY,
    seen_at REAL NOT NULL
);
ALTER TABLE messages ADD COLUMN pending_delivery INTEGER NOT NULL DEFAULT 0;
CREATE INDEX messages_pending_delivery ON messages(pending_delivery) WHERE pending_delivery = 1;
ALTER TABLE sessions ADD COLUMN usage_prompt INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_completion INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_cache_read INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_cache_write INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN usage_requests INTEGER NOT NULL DEFAULT 0;
"""

# 3: reminders the agent scheduled (docs/design.md#tools) and the idle-compression mark (docs/design.md#idle-compression).
_V3 = """
CREATE TABLE reminders (
    id INTEGER PRIMARY KEY,
    session_key TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT,
    text TEXT NOT NULL,
    due_at REAL NOT NULL,
    created_at REAL NOT NULL,
    sent_at REAL
);
CREATE INDEX reminders_pending ON reminders(due_at) WHERE sent_at IS NULL;
ALTER TABLE sessions ADD COLUMN idle_compressed_through INTEGER;
"""

# 4: an inbox entry a compression already wrote into the history stays in the inbox until
# its turn is answered, marked, so a crash in between re-runs the turn without a duplicate.
_V4 = """
ALTER TABLE inbox ADD COLUMN in_history INTEGER NOT NULL DEFAULT 0;
"""

# 5: every row has its place in the conversation (seq), so compression keeps rows instead
# of copying them; the copies older versions wrote are removed (see migrate_copies).
_V5 = migrate_copies.migrate

# 6: pairing (docs/design.md#pairing): strangers' pending requests (never their messages)
# and the users the owner approved. Triggers move the revision with every change to the
# approved users, whoever makes it (the CLI beside a running gateway, an operator's sqlite3
# shell), so a running gateway knows when to re-read them.
_V6 = """
CREATE TABLE pairing_requests (
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT NOT NULL DEFAULT '',
    chat_id TEXT NOT NULL,
    code TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (platform, user_id)
);
CREATE TABLE paired_users (
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT NOT NULL DEFAULT '',
    approved_at REAL NOT NULL,
    approved_by TEXT NOT NULL,
    PRIMARY KEY (platform, user_id)
);
CREATE TABLE pairing_revision (revision INTEGER NOT NULL);
INSERT INTO pairing_revision(revision) VALUES (0);
CREATE TRIGGER paired_users_inserted AFTER INSERT ON paired_users BEGIN
    UPDATE pairing_revision SET revision = revision + 1;
END;
CREATE TRIGGER paired_users_updated AFTER UPDATE ON paired_users BEGIN
    UPDATE pairing_revision SET revision = revision + 1;
END;
CREATE TRIGGER paired_users_deleted AFTER DELETE ON paired_users BEGIN
    UPDATE pairing_revision SET revision = revision + 1;
END;
"""

# 7: documents (docs/design.md#documents): the text extracted from a file, kept once by
# content hash, in parts (a PDF's pages, a text's chunks) with their own full-text index;
# which chats hold which document, under the name it was sent with there; and chats
# that continue under another id (docs/design.md#chat-moves).
_V7 = """
CREATE TABLE documents (
    n INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    mime_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    chars INTEGER NOT NULL,
    pages INTEGER,
    created_at REAL NOT NULL
);
CREATE TABLE document_parts (
    n INTEGER PRIMARY KEY,
    document INTEGER NOT NULL REFERENCES documents(n),
    part INTEGER NOT NULL,
    start INTEGER NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (document, part)
);
CREATE VIRTUAL TABLE document_parts_fts USING fts5(
    text, content='document_parts', content_rowid='n', tokenize='unicode61'
);
CREATE TRIGGER document_parts_fts_insert AFTER INSERT ON document_parts BEGIN
    INSERT INTO document_parts_fts(rowid, text) VALUES (new.n, new.text);
END;
CREATE TRIGGER document_parts_fts_delete AFTER DELETE ON document_parts BEGIN
    INSERT INTO document_parts_fts(document_parts_fts, rowid, text)
        VALUES ('delete', old.n, old.text);
END;
CREATE TABLE chat_documents (
    session_key TEXT NOT NULL,
    document INTEGER NOT NULL REFERENCES documents(n),
    name TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_key, document)
);
CREATE INDEX chat_documents_document ON chat_documents(document);
CREATE TABLE chat_moves (
    platform TEXT NOT NULL,
    old_chat_id TEXT NOT NULL,
    new_chat_id TEXT NOT NULL,
    moved_at REAL NOT NULL,
    PRIMARY KEY (platform, old_chat_id)
);
"""

# 8: long-term memory (docs/design.md#memory): notes about a person (scope 'user', owner
# "<platform>:<user id>") or a chat (scope 'chat', owner its session key), with when and
# from which message each was learned and when it was last used. A replaced note is
# archived (archived_at, replaced_by), never deleted; only a user's /forget or the
# operator deletes. The inbox keeps each message's chat type, so a turn knows whether
# it runs in the speaker's private chat (docs/design.md#memory-scopes).
_V8 = """
CREATE TABLE memories (
    id INTEGER PRIMARY KEY,
    scope TEXT NOT NULL CHECK (scope IN ('user', 'chat')),
    owner TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    last_used_at DOUBLE PRECISION NOT NULL,
    session_id TEXT,
    platform_message_id TEXT,
    learned_by TEXT NOT NULL DEFAULT 'tool',
    archived_at DOUBLE PRECISION,
    replaced_by INTEGER
);
CREATE INDEX memories_owner ON memories(scope, owner, archived_at);
ALTER TABLE inbox ADD COLUMN chat_type TEXT;
"""

# 10: the model each chat chose with /model (docs/design.md#model-choice), kept apart from
# its sessions so the choice outlives /new and restarts; no row: the configured model.
_V10 = """
CREATE TABLE chat_models (
    session_key TEXT PRIMARY KEY,
    choice TEXT NOT NULL,
    chosen_at DOUBLE PRECISION NOT NULL
);
"""

# 9: what the operator's dashboard charts (docs/design.md#dashboard): one row per turn
# (the prompt size the model last saw, the turn's usage), written in the turn's own
# commit, and one per compression (trigger, tokens before and after), written in the
# compression's. The same script on PostgreSQL (gateway/store/postgres/schema.py).
DASHBOARD_TABLES = """
CREATE TABLE turn_stats (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    at DOUBLE PRECISION NOT NULL,
    prompt_tokens BIGINT,
    usage_prompt BIGINT NOT NULL DEFAULT 0,
    usage_completion BIGINT NOT NULL DEFAULT 0,
    usage_cache_read BIGINT NOT NULL DEFAULT 0,
    requests INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX turn_stats_session ON turn_stats(session_id, at);
CREATE INDEX turn_stats_at ON turn_stats(at);
CREATE TABLE compactions (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    at DOUBLE PRECISION NOT NULL,
    trigger_source TEXT NOT NULL,
    method TEXT NOT NULL,
    tokens_before BIGINT NOT NULL,
    tokens_after BIGINT NOT NULL,
    messages_before INTEGER NOT NULL,
    messages_after INTEGER NOT NULL
);
CREATE INDEX compactions_session ON compactions(session_id, at);
"""

# 11: the usage anchor keeps how the server counts against the estimate (the
# calibration's ratio, docs/design.md#calibration) and what travelled beside the messages
# it counts (docs/design.md#silent-truncation), so both outlive a restart.
_V11 = """
ALTER TABLE sessions ADD COLUMN anchor_ratio DOUBLE PRECISION;
ALTER TABLE sessions ADD COLUMN anchor_overhead BIGINT;
"""

# 12: what every model call cost (docs/cost.md#what-is-stored): one row per call, with
# the chat (its session key), the person whose message started the turn (NULL for
# housekeeping: summaries, memory flushes), the kind, the model, the usage, and the cost
# in whole picodollars (10^-12 USD, exact for any price to six decimals per million
# tokens; NULL: the price is unknown). A message a budget refused is kept, out of the
# active rows and never sent to a model (``refused = 1``, ``active = 0``,
# ``compacted = 0``: search skips it too). The same script on PostgreSQL.
COST_TABLES = """
CREATE TABLE costs (
    at DOUBLE PRECISION NOT NULL,
    session_key TEXT,
    person TEXT,
    kind TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt_tokens BIGINT NOT NULL DEFAULT 0,
    completion_tokens BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    cost_pusd BIGINT
);
CREATE INDEX costs_at ON costs(at);
CREATE INDEX costs_chat ON costs(session_key, at);
CREATE INDEX costs_person ON costs(person, at);
ALTER TABLE messages ADD COLUMN refused INTEGER NOT NULL DEFAULT 0;
"""

# 13: the budget check before every call, cheap however many calls a month holds
# (docs/cost.md#how-budgets-are-enforced): a person's and a chat's day read from covering
# indexes, the month from one row per UTC day (``day``: its 00:00 in epoch seconds) that
# ``CostStore.record`` adds to in the call's own transaction. PostgreSQL's says a day
# its own way (``COST_DAYS_POSTGRES``).
_COST_DAYS = """
CREATE TABLE cost_days (
    day BIGINT PRIMARY KEY,
    cost_pusd BIGINT NOT NULL DEFAULT 0
);
INSERT INTO cost_days(day, cost_pusd)
    SELECT {day}, SUM(cost_pusd) FROM costs WHERE cost_pusd IS NOT NULL GROUP BY 1;
DROP INDEX costs_chat;
DROP INDEX costs_person;
CREATE INDEX costs_chat_spent ON costs(session_key, at, cost_pusd);
CREATE INDEX costs_person_spent ON costs(person, at, cost_pusd);
"""
COST_DAYS = _COST_DAYS.format(day="CAST(at / 86400 AS INTEGER) * 86400")
COST_DAYS_POSTGRES = _COST_DAYS.format(day="(floor(at / 86400) * 86400)::bigint")

# 14: what the operator was last told of each alert condition (docs/operations.md#alerts),
# so replicas on one database tell it once and a restart does not tell it again
# (gateway/store/alerts.py). The same script on PostgreSQL.
ALERT_TABLES = """
CREATE TABLE alerts_told (
    condition TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    since DOUBLE PRECISION NOT NULL,
    told_at DOUBLE PRECISION NOT NULL,
    what TEXT NOT NULL,
    until DOUBLE PRECISION
);
"""

# 15: the estimates of budgeted calls in flight (docs/cost.md#calls-side-by-side), so
# replicas on one database see each other's; a row goes when its call's cost is kept,
# or at ``expires_at`` when its process died. The same script on PostgreSQL.
COST_HOLDS = """
CREATE TABLE cost_holds (
    id TEXT PRIMARY KEY,
    person TEXT,
    session_key TEXT,
    at DOUBLE PRECISION NOT NULL,
    amount_pusd BIGINT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
"""

#: A migration is a script, or a coroutine function run inside the migration's transaction.
Migration = str | Callable[[Handle], Awaitable[None]]

MIGRATIONS: list[tuple[int, Migration]] = [
    (1, _V1),
    (2, _V2),
    (3, _V3),
    (4, _V4),
    (5, _V5),
    (6, _V6),
    (7, _V7),
    (8, _V8),
    (9, DASHBOARD_TABLES),
    (10, _V10),
    (11, _V11),
    (12, COST_TABLES),
    (13, COST_DAYS),
    (14, ALERT_TABLES),
    (15, COST_HOLDS),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
