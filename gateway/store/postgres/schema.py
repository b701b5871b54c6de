"""The PostgreSQL schema as forward migrations, numbered like SQLite's
(:mod:`gateway.store.schema`), so "schema version N" means the same tables on both.

PostgreSQL joined at version 6: its first migration creates at once what SQLite reached
through 1-6. Every later migration has a script for each database. The applied version
is the one row of ``nightowl_schema``; migrations run inside one transaction under an
advisory lock, so two replicas starting together migrate once (docs/design.md#postgresql).
"""

from __future__ import annotations

# 9: the dashboard's turn stats and compression marks: SQLite's script, which both read alike.
from gateway.store.schema import (
    ALERT_TABLES,
    COST_DAYS_POSTGRES,
    COST_HOLDS,
    COST_TABLES,
    DASHBOARD_TABLES,
)

_BASE = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    session_key TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT,
    thread_id TEXT,
    user_id TEXT,
    model TEXT,
    parent_session_id TEXT REFERENCES sessions(id),
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    ended_at DOUBLE PRECISION,
    end_reason TEXT,
    anchor_prompt_tokens BIGINT,
    anchor_completion_tokens BIGINT,
    anchor_message_id BIGINT,
    anchor_fingerprint TEXT,
    anchor_route TEXT,
    engine_state TEXT NOT NULL DEFAULT '{}',
    compression_count INTEGER NOT NULL DEFAULT 0,
    usage_prompt BIGINT NOT NULL DEFAULT 0,
    usage_completion BIGINT NOT NULL DEFAULT 0,
    usage_cache_read BIGINT NOT NULL DEFAULT 0,
    usage_cache_write BIGINT NOT NULL DEFAULT 0,
    usage_requests BIGINT NOT NULL DEFAULT 0,
    idle_compressed_through BIGINT
);
CREATE UNIQUE INDEX sessions_current ON sessions(session_key) WHERE ended_at IS NULL;
CREATE INDEX sessions_key ON sessions(session_key);

CREATE TABLE messages (
    id BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    parts TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    token_count INTEGER NOT NULL DEFAULT 0,
    platform_message_id TEXT,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0,
    pending_delivery INTEGER NOT NULL DEFAULT 0,
    seq DOUBLE PRECISION,
    -- Full-text search over every row, archived ones included; 'simple' knows no
    -- language, as SQLite's unicode61 tokenizer does not.
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', coalesce(content, ''))) STORED
);
CREATE INDEX messages_active ON messages(session_id, active, seq);
CREATE INDEX messages_pending_delivery ON messages(pending_delivery) WHERE pending_delivery = 1;
CREATE INDEX messages_tsv ON messages USING GIN (tsv);
-- An appended row's place in the conversation is its id (defaults come before BEFORE
-- triggers, so the id is known here).
CREATE FUNCTION nightowl_message_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.seq IS NULL THEN
        NEW.seq := NEW.id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER messages_seq BEFORE INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION nightowl_message_seq();

CREATE TABLE inbox (
    id BIGSERIAL PRIMARY KEY,
    session_key TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT,
    user_id TEXT,
    message TEXT NOT NULL,
    token_count INTEGER NOT NULL DEFAULT 0,
    addressed INTEGER NOT NULL DEFAULT 1,
    platform_message_id TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    in_history INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX inbox_session ON inbox(session_key, id);
-- Every replica LISTENs: a stored message wakes whichever holds its session
-- (docs/design.md#replicas). Delivered at commit; one per key per transaction.
CREATE FUNCTION nightowl_announce_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('nightowl_work', NEW.session_key);
    RETURN NULL;
END $$;
CREATE TRIGGER inbox_announced AFTER INSERT ON inbox
    FOR EACH ROW EXECUTE FUNCTION nightowl_announce_work();
CREATE TABLE inbound_seen (
    dedupe_key TEXT PRIMARY KEY,
    seen_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE reminders (
    id BIGSERIAL PRIMARY KEY,
    session_key TEXT NOT NULL,
    platform TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    thread_id TEXT,
    text TEXT NOT NULL,
    due_at DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    sent_at DOUBLE PRECISION
);
CREATE INDEX reminders_pending ON reminders(due_at) WHERE sent_at IS NULL;

CREATE TABLE pairing_requests (
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT NOT NULL DEFAULT '',
    chat_id TEXT NOT NULL,
    code TEXT NOT NULL UNIQUE,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (platform, user_id)
);
CREATE TABLE paired_users (
    platform TEXT NOT NULL,
    user_id TEXT NOT NULL,
    user_name TEXT NOT NULL DEFAULT '',
    approved_at DOUBLE PRECISION NOT NULL,
    approved_by TEXT NOT NULL,
    PRIMARY KEY (platform, user_id)
);
CREATE TABLE pairing_revision (revision BIGINT NOT NULL);
INSERT INTO pairing_revision(revision) VALUES (0);
CREATE FUNCTION nightowl_pairing_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE pairing_revision SET revision = revision + 1;
    RETURN NULL;
END $$;
CREATE TRIGGER paired_users_changed AFTER INSERT OR UPDATE OR DELETE ON paired_users
    FOR EACH STATEMENT EXECUTE FUNCTION nightowl_pairing_revision();
"""

# 7: documents (docs/design.md#documents), their text searched through a generated
# tsvector as messages are; chats that continue under another id (docs/design.md#chat-moves).
_V7 = """
CREATE TABLE documents (
    n BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    mime_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    chars BIGINT NOT NULL,
    pages INTEGER,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE document_parts (
    n BIGSERIAL PRIMARY KEY,
    document BIGINT NOT NULL REFERENCES documents(n),
    part INTEGER NOT NULL,
    start BIGINT NOT NULL,
    text TEXT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', text)) STORED,
    UNIQUE (document, part)
);
CREATE INDEX document_parts_tsv ON document_parts USING GIN (tsv);
CREATE TABLE chat_documents (
    session_key TEXT NOT NULL,
    document BIGINT NOT NULL REFERENCES documents(n),
    name TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_key, document)
);
CREATE INDEX chat_documents_document ON chat_documents(document);
CREATE TABLE chat_moves (
    platform TEXT NOT NULL,
    old_chat_id TEXT NOT NULL,
    new_chat_id TEXT NOT NULL,
    moved_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (platform, old_chat_id)
);
"""

# 8: long-term memory (docs/design.md#memory), as on SQLite with a generated id.
_V8 = """
CREATE TABLE memories (
    id BIGSERIAL PRIMARY KEY,
    scope TEXT NOT NULL CHECK (scope IN ('user', 'chat')),
    owner TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    last_used_at DOUBLE PRECISION NOT NULL,
    session_id TEXT,
    platform_message_id TEXT,
    learned_by TEXT NOT NULL DEFAULT 'tool',
    archived_at DOUBLE PRECISION,
    replaced_by BIGINT
);
CREATE INDEX memories_owner ON memories(scope, owner, archived_at);
ALTER TABLE inbox ADD COLUMN chat_type TEXT;
"""

# 10: the model each chat chose with /model (docs/design.md#model-choice), as on SQLite.
_V10 = """
CREATE TABLE chat_models (
    session_key TEXT PRIMARY KEY,
    choice TEXT NOT NULL,
    chosen_at DOUBLE PRECISION NOT NULL
);
"""

# 11: the usage anchor's ratio and overhead (docs/design.md#calibration), as on SQLite.
_V11 = """
ALTER TABLE sessions ADD COLUMN anchor_ratio DOUBLE PRECISION;
ALTER TABLE sessions ADD COLUMN anchor_overhead BIGINT;
"""

MIGRATIONS: list[tuple[int, str]] = [
    (6, _BASE),
    (7, _V7),
    (8, _V8),
    (9, DASHBOARD_TABLES),
    (10, _V10),
    (11, _V11),
    (12, COST_TABLES),  # what every model call cost (docs/cost.md#what-is-stored)
    (13, COST_DAYS_POSTGRES),  # the month's spend by day, for the budget check
    (14, ALERT_TABLES),  # what the operator was told of each alert (docs/operations.md#alerts)
    (15, COST_HOLDS),  # budgeted calls in flight, seen by every replica (docs/cost.md)
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
