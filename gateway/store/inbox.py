"""Group commit for the inbox: messages stored at the same moment share one transaction.

Every inbound message must be durable before its platform is told it arrived, which
costs a synced commit. When a poll brings fifty messages, fifty commits one after
another would make the poller the bottleneck (docs/design.md#group-commit). Here the
first message is written at once; the ones that arrive while that commit runs wait for
the next, which takes them all — one transaction, one sync, two statements whatever
their number, one trip to SQLite's thread. Each caller still learns whether its own
message was new; a message that cannot be made a row fails alone, and a failed write
fails its batch.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from gateway.store.dialect import Database
from gateway.store.errors import StoreError
from gateway.store.records import InboxEntry

#: At most this many messages share a transaction (SQLite's limit on parameters is far).
MAX_BATCH = 200

_INSERT_INBOX = (
    "INSERT INTO inbox(session_key, platform, chat_id, thread_id, user_id, message,"
    " token_count, addressed, platform_message_id, created_at, chat_type)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class InboxWriter:
    """Stores inbox entries in batches; see the module's docstring."""

    def __init__(self, connection: Database) -> None:
        self._connection = connection
        self._waiting: list[tuple[InboxEntry, asyncio.Future[bool]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def enqueue(self, entry: InboxEntry) -> bool:
        """Store ``entry`` durably; False when its dedupe key was seen before."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((entry, future))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush(), name="inbox-group-commit")
        # A caller cancelled meanwhile leaves its entry to the commit: stored without its
        # platform being told, so it comes again and is recognised by its dedupe key.
        return await asyncio.shield(future)

    async def _flush(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
                await self._settle(batch)
        finally:  # cancelled (the loop is closing): nobody waits forever
            batch, self._waiting = self._waiting, []
            for _, future in batch:
                if not future.done():
                    future.set_exception(StoreError("the inbox writer stopped"))

    async def _settle(self, batch: list[tuple[InboxEntry, asyncio.Future[bool]]]) -> None:
        """Write ``batch`` in one transaction. A message that cannot even be turned into
        a row fails alone; a failed write fails the batch (the same cause for all)."""
        now = time.time()
        rows: list[tuple[InboxEntry, asyncio.Future[bool], tuple[Any, ...]]] = []
        for entry, future in batch:
            try:
                rows.append((entry, future, _row(entry, now)))
            except Exception as error:
                future.set_exception(error)
        if not rows:
            return
        try:
            stored = await self._write([(entry, row) for entry, _, row in rows], now)
        except Exception as error:
            for _, future, _ in rows:
                if not future.done():
                    future.set_exception(error)
            return
        for (_, future, _), new in zip(rows, stored, strict=True):
            if not future.done():
                future.set_result(new)

    async def _write(
        self, entries: Sequence[tuple[InboxEntry, tuple[Any, ...]]], now: float
    ) -> list[bool]:
        keys = [entry.dedupe_key for entry, _ in entries if entry.dedupe_key is not None]

        async def write(db: Any) -> list[bool]:
            new_keys: set[str] = set()
            if keys:
                values = ", ".join(["(?, ?)"] * len(keys))
                found = await db.fetch_all(
                    f"INSERT INTO inbound_seen(dedupe_key, seen_at) VALUES {values}"
                    " ON CONFLICT DO NOTHING RETURNING dedupe_key",
                    [value for key in keys for value in (key, now)],
                )
                new_keys = {row[0] for row in found}
            stored = []
            for entry, _ in entries:  # a key twice in one batch: the first one is new
                key = entry.dedupe_key
                stored.append(key is None or key in new_keys)
                if key is not None:
                    new_keys.discard(key)
            rows = [row for (_, row), new in zip(entries, stored, strict=True) if new]
            if rows:
                await db.execute_many(_INSERT_INBOX, rows)
            return stored

        return await self._connection.atomically(write)


def _row(entry: InboxEntry, now: float) -> tuple[Any, ...]:
    return (
        entry.session_key,
        entry.platform,
        entry.chat_id,
        entry.thread_id,
        entry.user_id,
        json.dumps(entry.message, ensure_ascii=False),
        entry.token_count,
        int(entry.addressed),
        entry.platform_message_id,
        now,
        entry.chat_type,
    )
