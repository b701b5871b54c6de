"""Many stored conversations at once, for benchmarks of a big store (bench/big_store.py).

Rows go in through the store's own connection and schema, a batch per transaction, with
``executemany``: a million rows take seconds, not the hours a turn at a time would.
"""

from __future__ import annotations

import time

from gateway.store.connection import Connection, new_session_id

#: Sessions written per transaction.
BATCH_SESSIONS = 5_000


async def seed_conversations(
    connection: Connection,
    sessions: int,
    archived_per_session: int,
    *,
    platform: str,
    model: str = "bench-model",
) -> list[str]:
    """``sessions`` current sessions under the keys ``<platform>:c<n>``, each with its
    system row active and ``archived_per_session`` rows compacted away (``active=0,
    compacted=1``, as a compression leaves them), oldest first; returns the keys."""
    keys = [f"{platform}:c{n}" for n in range(sessions)]
    system = "You are a benchmark."
    now = time.time()
    for start in range(0, sessions, BATCH_SESSIONS):
        batch = [(new_session_id(), key) for key in keys[start : start + BATCH_SESSIONS]]
        session_rows = [
            (sid, key, platform, key.split(":", 1)[1], None, "u", model, None, now, now, 1, "{}")
            for sid, key in batch
        ]
        async with connection.transaction() as db:
            found = await db.fetch_all("SELECT COALESCE(MAX(id), 0) FROM messages")
            next_id = int(found[0][0]) + 1
            message_rows = []
            for sid, _ in batch:
                for n in range(archived_per_session):
                    role = "user" if n % 2 == 0 else "assistant"
                    text = f"archived row {n}: " + "words of an old conversation " * 6
                    message_rows.append((next_id, sid, role, text, now - 86_400, 50, 0, 1))
                    next_id += 1
                # The system row last: the conversation's place is its seq, not its id.
                message_rows.append((next_id, sid, "system", system, now, 6, 1, 0))
                next_id += 1
            await db.execute_many(
                "INSERT INTO sessions(id, session_key, platform, chat_id, thread_id, user_id,"
                " model, parent_session_id, created_at, updated_at, compression_count,"
                " engine_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                session_rows,
            )
            await db.execute_many(
                "INSERT INTO messages(id, session_id, role, content, created_at, token_count,"
                " active, compacted, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?1)",
                message_rows,
            )
    return keys
