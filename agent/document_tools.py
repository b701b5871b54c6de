"""``read_document``: the rest of a document the chat holds, on demand (docs/design.md#documents).

A document's row shows a header and a bounded excerpt; the full text is kept once in the
store. The model reads on by page (a PDF's) or by character offset, a bounded slice per
call, so a 300-page PDF never costs more than what the model chose to read.
"""

from __future__ import annotations

from typing import Any

from agent.messages import JSON
from agent.tools import Tool, ToolContext, ToolInputError

#: Characters one call returns (below the default ``agent.tool_result_max_chars``).
READ_CHARS = 6000


async def _read_document(arguments: JSON, context: ToolContext) -> str:
    document_id = str(arguments.get("document_id") or "").strip()
    if not document_id:
        raise ToolInputError("document_id is required (the id in the document's header)")
    page = _whole_number(arguments.get("page"), "page", minimum=1)
    offset = _whole_number(arguments.get("offset"), "offset", minimum=0) or 0
    part = await context.transcript.read_document(
        document_id, page=page, offset=offset, max_chars=READ_CHARS
    )
    if part is None:
        raise ToolInputError(f"this chat holds no document with the id {document_id!r}")
    if part.pages is not None and page is not None and page > part.pages:
        raise ToolInputError(f"{part.name} has {part.pages} pages; ask for 1 to {part.pages}")
    if not part.text:
        return (
            f"[{part.name}: nothing at offset {offset:,}; the text has {part.chars:,} characters]"
        )
    where = f"page {part.page} of {part.pages}, " if part.page is not None else ""
    more = (
        f"next: read_document(document_id={part.document_id!r}, offset={part.end})"
        if part.end < part.chars
        else "this is the end of the document"
    )
    header = (
        f'[document "{part.name}" · id {part.document_id} · {where}characters'
        f" {part.start:,}-{part.end:,} of {part.chars:,} · {more}]"
    )
    return f"{header}\n{part.text}"


def _whole_number(value: Any, name: str, *, minimum: int) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ToolInputError(f"{name} must be a whole number") from None
    if number < minimum:
        raise ToolInputError(f"{name} must be at least {minimum}")
    return number


READ_DOCUMENT = Tool(
    name="read_document",
    description=(
        "Read a document someone sent in this chat (PDF, .docx, text, code...) beyond the "
        "excerpt its message shows. Give the id from the document's header, and a page "
        "(PDFs) or a character offset; returns up to 6000 characters and where to go on."
    ),
    parameters={
        "type": "object",
        "properties": {
            "document_id": {"type": "string", "description": "the id in the document's header"},
            "page": {"type": "integer", "minimum": 1, "description": "a PDF page, 1-based"},
            "offset": {"type": "integer", "minimum": 0, "description": "a character offset"},
        },
        "required": ["document_id"],
    },
    handler=_read_document,
)
