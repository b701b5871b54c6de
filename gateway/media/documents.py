"""A document's bytes -> its text, in parts (docs/design.md#documents).

PDF pages through pypdf, .docx paragraphs and tables through python-docx, and every
kind of plain text (Markdown, CSV, JSON, source code...) decoded. Parsing is CPU work
on untrusted bytes: :func:`extract_document` runs it in a worker thread, and any
failure becomes :class:`Unreadable` with a sentence for the user, never a traceback.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
from collections.abc import Iterator

from gateway.store import DocumentText
from nightowl_errors import NightowlError

log = logging.getLogger(__name__)

PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
#: A plain text is stored in parts of about this many characters (cut at line ends).
TEXT_PART_CHARS = 4000
_TEXT_MIMES = {
    "application/json",
    "application/xml",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
    "application/javascript",
    "application/x-sh",
    "application/sql",
    "application/x-ndjson",
}
_TEXT_SUFFIXES = set(
    ".txt .text .md .markdown .rst .org .tex .csv .tsv .json .jsonl .ndjson .yaml .yml "
    ".toml .ini .cfg .conf .properties .log .xml .html .htm .css .scss .sql .sh .bash .zsh "
    ".fish .ps1 .bat .py .pyi .ipynb .js .mjs .cjs .ts .tsx .jsx .vue .svelte .java .kt "
    ".kts .scala .groovy .gradle .c .h .cc .cpp .cxx .hpp .hh .cs .go .rs .rb .php .pl .pm "
    ".lua .r .swift .m .mm .dart .ex .exs .erl .hrl .hs .ml .mli .clj .cljs .elm .nim .zig "
    ".jl .f90 .asm .s .proto .graphql .tf .hcl .dockerfile .makefile .cmake .diff .patch "
    ".srt .vtt .env.example".split()
)
_TEXT_NAMES = {"makefile", "dockerfile", "readme", "license", "changelog", "procfile"}


class Unreadable(NightowlError):
    """A document that cannot be read; ``reason`` completes "…: it <reason>"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def document_kind(name: str, mime_type: str) -> str | None:
    """ "pdf", "docx" or "text" for a file nightowl can read, else None."""
    base = os.path.basename(name).lower()
    suffix = os.path.splitext(base)[1]
    if mime_type == PDF or suffix == ".pdf":
        return "pdf"
    if mime_type == DOCX or suffix == ".docx":
        return "docx"
    if mime_type.startswith("text/") or mime_type in _TEXT_MIMES:
        return "text"
    if suffix in _TEXT_SUFFIXES or base in _TEXT_NAMES:
        return "text"
    return None


async def extract_document(data: bytes, name: str, mime_type: str) -> DocumentText:
    """The text of ``data``; raises :class:`Unreadable` with the reason."""
    kind = document_kind(name, mime_type)
    if kind is None:
        raise Unreadable("is not a kind of file I can read")
    return await asyncio.to_thread(_extract, data, kind, mime_type)


def _extract(data: bytes, kind: str, mime_type: str) -> DocumentText:
    sha256 = hashlib.sha256(data).hexdigest()
    if kind == "pdf":
        pages = _pdf_pages(data)
        return DocumentText(sha256, kind, mime_type, len(data), pages, paged=True)
    text = _docx_text(data) if kind == "docx" else _decoded(data)
    if not text.strip():
        raise Unreadable("holds no text")
    return DocumentText(sha256, kind, mime_type, len(data), list(_text_parts(text)))


def _pdf_pages(data: bytes) -> list[str]:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable("is encrypted (protected by a password)")
        pages = [_page_text(page.extract_text() or "") for page in reader.pages]
    except Unreadable:
        raise
    except FileNotDecryptedError:
        raise Unreadable("is encrypted (protected by a password)") from None
    except Exception as error:  # pypdf raises many kinds on broken input: one sentence
        log.info("PDF not readable: %s: %s", type(error).__name__, error)
        if "crypt" in str(error).lower() or "AES" in str(error):
            raise Unreadable("is encrypted (protected by a password)") from None
        raise Unreadable("is damaged or not really a PDF") from None
    if not pages:
        raise Unreadable("has no pages")
    if not any(page.strip() for page in pages):
        raise Unreadable(f"has no text layer ({_plural(len(pages), 'page')} of images: a scan?)")
    return pages


def _page_text(text: str) -> str:
    return text.strip() + "\n\n"


def _docx_text(data: bytes) -> str:
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
        lines = [paragraph.text for paragraph in document.paragraphs]
        for table in document.tables:
            for row in table.rows:
                lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    except Exception as error:  # a broken .docx raises zip, XML or KeyError: one sentence
        log.info(".docx not readable: %s: %s", type(error).__name__, error)
        raise Unreadable("is damaged or not really a .docx file") from None
    return "\n".join(lines)


def _decoded(data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise Unreadable("is not valid UTF-16 text") from None
    if b"\x00" in data[:8192]:
        raise Unreadable("is binary, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _text_parts(text: str) -> Iterator[str]:
    """``text`` in parts of about :data:`TEXT_PART_CHARS`, cut after a line end where
    one is near; the parts joined are ``text`` exactly."""
    start = 0
    while start < len(text):
        end = min(len(text), start + TEXT_PART_CHARS)
        if end < len(text):
            newline = text.rfind("\n", start + TEXT_PART_CHARS // 2, end)
            end = newline + 1 if newline != -1 else end
        yield text[start:end]
        start = end


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
