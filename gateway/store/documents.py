"""Documents, on either database: the extracted text, kept once by content hash and read in parts
(:class:`~gateway.store.protocols.DocumentStore`, docs/design.md#documents).

A document's text lives in ``document_parts`` (a PDF's pages, a text's chunks) with its
own full-text index; ``chat_documents`` says which chats hold it and under which name.
A chat reads and finds only the documents it holds.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from gateway.store.dialect import Database, Handle
from gateway.store.records import DocumentHit, DocumentInfo, DocumentSlice, DocumentText

#: The id in a row's document header (gateway/media/reading.py: document_note).
DOCUMENT_HEADER = re.compile(r'\[document "[^"\n]*" · id ([0-9a-f]{12,64}) ·')
#: The id a document is known by: the start of its content hash, longer on a collision.
_ID_LENGTHS = (12, 16, 64)

_INFO = "d.id, d.kind, d.size, d.chars, d.pages, c.name, c.created_at"


class SqlDocuments:
    """:class:`~gateway.store.protocols.DocumentStore` on a :class:`Connection`."""

    def __init__(self, connection: Database) -> None:
        self.connection = connection

    async def keep_document(
        self, session_key: str, name: str, document: DocumentText
    ) -> DocumentInfo:
        now = time.time()
        async with self.connection.transaction() as db:
            rows = list(
                await db.fetch_all(
                    "SELECT n, id FROM documents WHERE sha256 = ?", (document.sha256,)
                )
            )
            if rows:
                number, document_id = rows[0]
            else:
                number, document_id = await _insert(db, document, now)
            await db.execute(
                "INSERT INTO chat_documents(session_key, document, name, created_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT(session_key, document) DO UPDATE"
                " SET name = excluded.name",
                (session_key, number, name, now),
            )
        pages = len(document.parts) if document.paged else None
        return DocumentInfo(document_id, name, document.kind, document.size, document.chars, pages)

    async def read_document(
        self,
        session_key: str,
        document_id: str,
        *,
        page: int | None = None,
        offset: int = 0,
        max_chars: int = 6000,
    ) -> DocumentSlice | None:
        async with self.connection.read() as db:
            found = list(
                await db.fetch_all(
                    f"SELECT d.n, {_INFO} FROM documents d JOIN chat_documents c"
                    " ON c.document = d.n AND c.session_key = ? WHERE d.id = ?",
                    (session_key, document_id.strip().lower()),
                )
            )
            if not found:
                return None
            number, info = found[0][0], _info(found[0])
            if page is not None:
                parts = await db.fetch_all(
                    "SELECT part, start, text FROM document_parts WHERE document = ? AND part = ?",
                    (number, page),
                )
                offset = 0
            else:
                parts = await db.fetch_all(
                    "SELECT part, start, text FROM document_parts WHERE document = ?"
                    " AND start < ? AND start + length(text) > ? ORDER BY part",
                    (number, offset + max_chars, offset),
                )
        parts = list(parts)
        if not parts:
            return DocumentSlice(info, offset, offset, "", page)
        first_start = parts[0]["start"]
        joined = "".join(row["text"] for row in parts)
        begin = max(0, offset - first_start) if page is None else 0
        text = joined[begin : begin + max_chars]
        start = first_start + begin
        shown_page = parts[0]["part"] if info.pages is not None else None
        return DocumentSlice(info, start, start + len(text), text, shown_page)

    async def search_documents(
        self, session_key: str, query: str, limit: int = 5
    ) -> list[DocumentHit]:
        sql = self.connection.dialect
        match = sql.fts_query(query)
        if not match:
            return []
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                sql.DOCUMENT_SEARCH,
                {"key": session_key, "match": match, "scan": min(200, limit * 20)},
            )
        hits: dict[str, DocumentHit] = {}
        for row in rows:
            info = _info(row)
            if info.document_id in hits:
                continue  # each document once, at its best page
            page = row["part"] if info.pages is not None else None
            hits[info.document_id] = DocumentHit(info, row["snippet"], row["created_at"], page)
            if len(hits) == limit:
                break
        return list(hits.values())

    async def documents_in_messages(self, message_ids: Sequence[int]) -> dict[int, set[str]]:
        if not message_ids:
            return {}
        marks = ",".join("?" * len(message_ids))
        async with self.connection.read() as db:
            rows = await db.fetch_all(
                f"SELECT id, content FROM messages WHERE id IN ({marks})", list(message_ids)
            )
        return {row[0]: set(DOCUMENT_HEADER.findall(row[1] or "")) for row in rows}


async def _insert(db: Handle, document: DocumentText, now: float) -> tuple[int, str]:
    for length in _ID_LENGTHS:
        document_id = document.sha256[:length]
        taken = await db.fetch_all("SELECT 1 FROM documents WHERE id = ?", (document_id,))
        if not list(taken):
            break
    cursor = await db.execute(
        "INSERT INTO documents(id, sha256, kind, mime_type, size, chars, pages, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
        (
            document_id,
            document.sha256,
            document.kind,
            document.mime_type,
            document.size,
            document.chars,
            len(document.parts) if document.paged else None,
            now,
        ),
    )
    if cursor.rowcount == 0:  # another chat kept the same file meanwhile (a replica)
        [(number, document_id)] = await db.fetch_all(
            "SELECT n, id FROM documents WHERE sha256 = ?", (document.sha256,)
        )
        return int(number), str(document_id)
    number = int(cursor.lastrowid or 0)
    rows, start = [], 0
    for index, text in enumerate(document.parts, start=1):
        rows.append((number, index, start, text))
        start += len(text)
    await db.execute_many(
        "INSERT INTO document_parts(document, part, start, text) VALUES (?, ?, ?, ?)", rows
    )
    return number, document_id


async def forget_documents(db: Any, session_key: str) -> None:
    """Inside ``OperatorStore.forget``: the chat's links, and every document no chat
    holds any more (its text and index entries with it)."""
    await db.execute("DELETE FROM chat_documents WHERE session_key = ?", (session_key,))
    orphans = "SELECT n FROM documents WHERE n NOT IN (SELECT document FROM chat_documents)"
    await db.execute(f"DELETE FROM document_parts WHERE document IN ({orphans})")
    await db.execute(f"DELETE FROM documents WHERE n IN ({orphans})")


def _info(row: Any) -> DocumentInfo:
    return DocumentInfo(
        document_id=row["id"],
        name=row["name"],
        kind=row["kind"],
        size=row["size"],
        chars=row["chars"],
        pages=row["pages"],
    )
