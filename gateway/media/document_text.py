"""A document's bytes -> its text: PDF pages through pypdf, .docx paragraphs and tables
through python-docx, every kind of plain text decoded (docs/design.md#documents).

Pure functions on bytes, run in the document worker's process (document_worker.py), never
on the gateway's event loop. Any failure is :class:`Unreadable` with a sentence for the
user, never a traceback.
"""

from __future__ import annotations

import io
import logging

from nightowl_errors import NightowlError

log = logging.getLogger(__name__)


class Unreadable(NightowlError):
    """A document that cannot be read; ``reason`` completes "…: it <reason>"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class OutOfTime(BaseException):
    """Raised by the worker when its CPU time is up: stop, and keep what was read. A
    BaseException, so that no library's ``except Exception`` swallows it."""


def pdf_pages(
    data: bytes, max_pages: int, max_chars: int | None = None
) -> tuple[list[str], int, bool]:
    """The text of the first ``max_pages`` pages (stopping once ``max_chars`` are read),
    how many pages there are, and whether the time was up before they were read (the
    pages read so far are kept)."""
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, LimitReachedError

    pages: list[str] = []
    out_of_time = False
    total = 0
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unreadable("is encrypted (protected by a password)")
        total = len(reader.pages)
        read = 0
        for index in range(min(total, max_pages)):
            pages.append(_page_text(reader.pages[index].extract_text() or ""))
            read += len(pages[-1])
            if max_chars is not None and read >= max_chars:
                break
    except OutOfTime:
        if not pages:
            raise
        out_of_time = True
    except Unreadable:
        raise
    except FileNotDecryptedError:
        raise Unreadable("is encrypted (protected by a password)") from None
    except LimitReachedError:
        raise Unreadable("would expand far past the size limit (a compression bomb)") from None
    except MemoryError:
        raise
    except Exception as error:  # pypdf raises many kinds on broken input: one sentence
        log.info("PDF not readable: %s: %s", type(error).__name__, error)
        if "crypt" in str(error).lower() or "AES" in str(error):
            raise Unreadable("is encrypted (protected by a password)") from None
        raise Unreadable("is damaged or not really a PDF") from None
    if not pages:
        raise Unreadable("has no pages")
    if not any(page.strip() for page in pages):
        raise Unreadable(f"has no text layer ({plural(len(pages), 'page')} of images: a scan?)")
    return pages, total, out_of_time


def _page_text(text: str) -> str:
    return text.strip() + "\n\n"


def docx_text(data: bytes, max_chars: int) -> str:
    """Paragraphs, then tables, one per line; reading stops past ``max_chars``."""
    import docx

    try:
        document = docx.Document(io.BytesIO(data))
        lines: list[str] = []
        length = 0
        for paragraph in document.paragraphs:
            lines.append(paragraph.text)
            length += len(lines[-1]) + 1
            if length > max_chars:
                return "\n".join(lines)
        for table in document.tables:
            for row in table.rows:
                lines.append(" | ".join(cell.text.strip() for cell in row.cells))
                length += len(lines[-1]) + 1
                if length > max_chars:
                    return "\n".join(lines)
    except MemoryError:
        raise
    except Exception as error:  # a broken .docx raises zip, XML or KeyError: one sentence
        log.info(".docx not readable: %s: %s", type(error).__name__, error)
        raise Unreadable("is damaged or not really a .docx file") from None
    text = "\n".join(lines)
    if not text.strip():
        raise Unreadable("holds no text")
    return text


def plain_text(data: bytes) -> str:
    """A text file decoded: UTF-16 by its mark, else UTF-8, else Windows-1252."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            raise Unreadable("is not valid UTF-16 text") from None
    elif b"\x00" in data[:8192]:
        raise Unreadable("is binary, not text")
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = data.decode("cp1252", errors="replace")
    if not text.strip():
        raise Unreadable("holds no text")
    return text


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
