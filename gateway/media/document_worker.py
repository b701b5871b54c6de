"""Reading one document's text, in a process of its own with hard limits
(docs/design.md#documents): ``python -m gateway.media.document_worker KIND MAX_CHARS
MAX_PAGES SECONDS MEMORY_MB`` reads the file's bytes from stdin and writes one JSON object
to stdout — ``{"parts": [...], "paged": bool, "kept": "..." | null, "sha256": "..."}``, or
``{"unreadable": "<reason>"}``.

A document is bytes a stranger chose. A .docx is a zip whose XML can expand a thousand
times; a PDF's content streams are compressed and can expand as much, and parsing them
costs CPU in proportion. So the work runs here, where the kernel bounds it — address
space (``RLIMIT_AS``) and CPU seconds (``RLIMIT_CPU``) — and the libraries are held to
smaller limits than their own: zip entries whose declared sizes add up past a bound, or
that expand more than any real document does, are refused before parsing; pypdf's
decompressors stop at a bound; pages and characters past their bounds are left out, and
the answer says what was kept. Whatever happens here, the gateway's event loop and
memory are not touched: the parent only waits for this process (gateway/media/documents.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import resource
import signal
import sys
import zipfile
from typing import Any

from gateway.media.document_text import (
    OutOfTime,
    Unreadable,
    docx_text,
    pdf_pages,
    plain_text,
    plural,
)

#: A .docx whose entries declare more than this share of the reader's memory in all is
#: not read (its XML parsed takes about that many times more)...
EXPANDED_SHARE = 1 / 8
#: ...nor one with an entry compressed more than this (XML compresses ten to twenty times,
#: a blank form's a few hundred; a zip bomb thousands).
MAX_COMPRESSION_RATIO = 1_000
#: What a PDF stream may expand to (pypdf's own bound is 75 MB).
MAX_STREAM_BYTES = 16_000_000
#: A file yields at most this many characters per byte (plus a floor): text compresses a
#: few times, so more is a file built to expand (a 4 KB PDF that reads as a megabyte).
CHARS_PER_BYTE = 20
CHARS_FLOOR = 20_000


def limit_resources(seconds: int, memory_mb: int) -> None:
    """The kernel's bounds on this process: address space, and CPU seconds — at the soft
    limit SIGXCPU stops the reading (what was read is kept), two seconds later the
    kernel kills the process whatever it is doing. Never above a limit the process was
    started under (a systemd ``LimitCPU=`` or ``LimitAS=``): those hold instead."""
    for which, soft, hard in (
        (resource.RLIMIT_CPU, seconds, seconds + 2),
        (resource.RLIMIT_AS, memory_mb * 1024 * 1024, memory_mb * 1024 * 1024),
    ):
        _, ceiling = resource.getrlimit(which)
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        resource.setrlimit(which, (soft, hard))

    def time_is_up(signum: int, frame: object) -> None:
        raise OutOfTime

    signal.signal(signal.SIGXCPU, time_is_up)


def check_zip(data: bytes, memory_mb: int) -> None:
    """Refuse a .docx that would expand too far, before any of it is inflated."""
    try:
        entries = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError):
        raise Unreadable("is damaged or not really a .docx file") from None
    expanded = sum(entry.file_size for entry in entries)
    if expanded > memory_mb * 1_000_000 * EXPANDED_SHARE:
        raise Unreadable(f"would expand to {expanded // 1_000_000:,} MB, past the limit")
    for entry in entries:
        if entry.file_size > 1_000_000 and entry.file_size > MAX_COMPRESSION_RATIO * max(
            1, entry.compress_size
        ):
            raise Unreadable("is compressed like a zip bomb, not like a document")


def read(data: bytes, kind: str, max_chars: int, max_pages: int, memory_mb: int) -> dict[str, Any]:
    """The document's parts, cut at the bounds, and what was kept when they cut it."""
    import pypdf

    pypdf.overwrite_configuration(
        zlib_maximum_output_length=MAX_STREAM_BYTES,
        lzw_maximum_output_length=MAX_STREAM_BYTES,
        run_length_maximum_output_length=MAX_STREAM_BYTES,
        array_based_stream_maximum_output_length=MAX_STREAM_BYTES,
        maximum_declared_stream_length=MAX_STREAM_BYTES,
    )
    max_chars = min(max_chars, CHARS_PER_BYTE * len(data) + CHARS_FLOOR)
    if kind == "pdf":
        pages, total, out_of_time = pdf_pages(data, max_pages, max_chars)
        parts, kept = _bounded(pages, max_chars)
        if len(pages) < total:
            why = " (its time ran out)" if out_of_time else ""
            kept = f"{len(pages):,} of the {plural(total, 'page')}{why}"
        return {"parts": parts, "paged": True, "kept": kept}
    if kind == "docx":
        check_zip(data, memory_mb)
        text = docx_text(data, max_chars)
    else:
        text = plain_text(data)
    chunks, kept = _bounded([text], max_chars)
    return {"parts": chunks, "paged": False, "kept": kept}


def _bounded(parts: list[str], max_chars: int) -> tuple[list[str], str | None]:
    kept: list[str] = []
    room = max_chars
    for part in parts:
        if room <= 0:
            break
        kept.append(part[:room])
        room -= len(kept[-1])
    if sum(len(part) for part in parts) <= max_chars:
        return kept, None
    return kept, f"the first {max_chars:,} characters"


def _peak_mb() -> int:
    """This process's resident peak since it started (``VmHWM``: unlike ``ru_maxrss``,
    which Linux carries over from the forked parent through exec)."""
    for line in open("/proc/self/status", encoding="ascii"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return 0


def main(argv: list[str]) -> int:
    kind, max_chars, max_pages, seconds, memory_mb = argv[1], *map(int, argv[2:6])
    limit_resources(seconds, memory_mb)
    logging.disable(logging.CRITICAL)  # pypdf's warnings: nobody reads this process's stderr
    data = sys.stdin.buffer.read()
    try:
        answer = read(data, kind, max_chars, max_pages, memory_mb)
    except Unreadable as unreadable:
        answer = {"unreadable": unreadable.reason}
    except MemoryError:
        answer = {"unreadable": "needs more memory to read than a document may take"}
    except OutOfTime:
        answer = {"unreadable": f"needs more than {plural(seconds, 'second')} of work to read"}
    answer["sha256"] = hashlib.sha256(data).hexdigest()
    answer["peak_mb"] = _peak_mb()
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
