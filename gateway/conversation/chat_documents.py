"""One chat's documents as its transcript offers them to the agent: found by
``session_search`` beside the messages, read on by ``read_document``
(docs/design.md#documents)."""

from __future__ import annotations

from collections.abc import Sequence

from agent.transcript import DocumentPart, SearchResult
from gateway.store import DocumentStore, SearchHit


class ChatDocuments:
    def __init__(self, store: DocumentStore, session_key: str) -> None:
        self.store = store
        self.session_key = session_key

    async def search(
        self, query: str, limit: int, hits: Sequence[SearchHit], found: list[SearchResult]
    ) -> list[SearchResult]:
        """``found`` (the results for the message ``hits``) with the documents that match.

        Each hit once: a row found for the excerpt of a document that is found itself
        gives way to the document's hit, which says where in it the words are.
        """
        documents = await self.store.search_documents(self.session_key, query, limit)
        if not documents:
            return found
        matched = {hit.document.document_id for hit in documents}
        shown = await self.store.documents_in_messages([hit.message_id for hit in hits])
        kept = [
            result
            for hit, result in zip(hits, found[len(found) - len(hits) :], strict=True)
            if not shown.get(hit.message_id, set()) & matched
        ]
        results = found[: len(found) - len(hits)] + kept
        for hit in documents:
            page = f", page {hit.page}" if hit.page is not None else ""
            where = f'document "{hit.document.name}" (id {hit.document.document_id}{page})'
            results.append(SearchResult("document", hit.snippet, hit.created_at, False, where))
        return results

    async def read(
        self, document_id: str, *, page: int | None, offset: int, max_chars: int
    ) -> DocumentPart | None:
        part = await self.store.read_document(
            self.session_key, document_id, page=page, offset=offset, max_chars=max_chars
        )
        if part is None:
            return None
        info = part.document
        return DocumentPart(
            document_id=info.document_id,
            name=info.name,
            chars=info.chars,
            start=part.start,
            end=part.end,
            text=part.text,
            pages=info.pages,
            page=part.page,
        )
