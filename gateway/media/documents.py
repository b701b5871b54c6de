"""A document's bytes -> its text, in parts (docs/design.md#documents).

PDF pages through pypdf, .docx paragraphs and tables through python-docx, and every
kind of plain text (Markdown, CSV, JSON, source code...) decoded (document_text.py).
Parsing is CPU and memory spent on bytes a stranger chose: :func:`extract_document` runs
it in a process of its own, bounded by the kernel and by :class:`ReadingLimits`
(document_worker.py), and any failure becomes :class:`Unreadable` with a sentence for the
user, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gateway.config.media import DocumentsConfig
from gateway.media.document_text import Unreadable, plural
from gateway.store import DocumentText

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


#: The reading process's address space: with the gateway's own ~100 MB, the whole process
#: tree stays under 500 MB whatever a document holds.
WORKER_MEMORY_MB = 256


@dataclass(frozen=True)
class ReadingLimits:
    """How much of one document is read, and with what (docs/design.md#documents)."""

    max_chars: int
    max_pages: int
    #: CPU seconds the reading may take; it may wait for a core as long again.
    seconds: int
    memory_mb: int = WORKER_MEMORY_MB

    @classmethod
    def of(cls, settings: DocumentsConfig) -> ReadingLimits:
        return cls(settings.max_chars, settings.max_pages, settings.read_seconds)


async def extract_document(
    data: bytes, name: str, mime_type: str, limits: ReadingLimits | None = None
) -> DocumentText:
    """The text of ``data``, read in a process of its own with hard limits
    (gateway/media/document_worker.py); raises :class:`Unreadable` with the reason."""
    kind = document_kind(name, mime_type)
    if kind is None:
        raise Unreadable("is not a kind of file I can read")
    limits = limits or ReadingLimits.of(DocumentsConfig())
    answer = await _read_in_worker(data, kind, limits)
    if "unreadable" in answer:
        raise Unreadable(str(answer["unreadable"]))
    paged = bool(answer["paged"])
    parts = list(answer["parts"]) if paged else list(_text_parts("".join(answer["parts"])))
    kept = answer.get("kept")
    return DocumentText(
        str(answer["sha256"]), kind, mime_type, len(data), parts, paged=paged, kept=kept
    )


async def _read_in_worker(data: bytes, kind: str, limits: ReadingLimits) -> dict[str, Any]:
    arguments = [kind, limits.max_chars, limits.max_pages, limits.seconds, limits.memory_mb]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.media.document_worker",
        *map(str, arguments),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_worker_environment(),
    )
    try:
        async with asyncio.timeout(2 * limits.seconds + 5):
            out, err = await process.communicate(data)
    except TimeoutError:
        raise Unreadable("took too long to read") from None
    finally:
        # A cancelled turn or a timeout leaves no reader behind.
        if process.returncode is None:
            process.kill()
            await process.wait()
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if isinstance(answer, dict):
        log.debug("document read in %s MB at most (%s)", answer.get("peak_mb"), kind)
        return answer
    if process.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise Unreadable(f"needs more than {plural(limits.seconds, 'second')} of work to read")
    log.warning(
        "the document reader ended with %s: %s",
        process.returncode,
        err.decode("utf-8", "replace")[-500:],
    )
    raise Unreadable("could not be read")


def _worker_environment() -> dict[str, str]:
    """What the reader inherits: enough to start Python, none of the gateway's secrets."""
    kept = ("PATH", "LANG", "LC_ALL", "PYTHONPATH", "VIRTUAL_ENV", "TMPDIR")
    return {name: os.environ[name] for name in kept if name in os.environ}


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
