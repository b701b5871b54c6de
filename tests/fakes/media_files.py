"""Real media files made by the tests: an OGG/Opus voice note, PDFs, a .docx.

- :func:`ogg_opus`: a valid Ogg stream (RFC 3533 pages with their CRC) carrying Opus
  (RFC 7845: OpusHead, OpusTags, then 20 ms packets of silence), what Telegram and
  Discord send for a voice message. The fake transcription endpoint does not decode it.
- :func:`pdf`: one page per text, each line drawn with Helvetica, so pypdf reads the text
  back; :func:`encrypted_pdf` locks one with a password.
- :func:`docx`: paragraphs and a table, written by python-docx.
- :func:`zip_bomb_docx` and :func:`flate_bomb_pdf`: small files that expand hundreds of
  megabytes when read (the document bombs of docs/design.md#documents).
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

# -- Ogg/Opus ------------------------------------------------------------------------------

_SILENCE = b"\xf8\xff\xfe"  # one 20 ms Opus frame (CELT, fullband, mono) of silence
_SAMPLES_PER_PACKET = 960  # 20 ms at 48 kHz
_PRE_SKIP = 312


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7) if crc & 0x80000000 else crc << 1
        table.append(crc & 0xFFFFFFFF)
    return table


_CRC = _crc_table()


def _ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _CRC[((crc >> 24) & 0xFF) ^ byte]
    return crc


def _page(packets: list[bytes], *, granule: int, serial: int, sequence: int, flags: int) -> bytes:
    segments = []
    for packet in packets:
        segments += [255] * (len(packet) // 255) + [len(packet) % 255]
    header = struct.pack(
        "<4sBBqIIIB", b"OggS", 0, flags, granule, serial, sequence, 0, len(segments)
    )
    page = header + bytes(segments) + b"".join(packets)
    crc = _ogg_crc(page)
    return page[:22] + struct.pack("<I", crc) + page[26:]


def ogg_opus(seconds: float, *, serial: int = 0x4E4F574C) -> bytes:
    """A mono Opus voice note of ``seconds`` of silence in an Ogg container."""
    head = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, _PRE_SKIP, 48000, 0, 0)
    vendor = b"nightowl tests"
    tags = b"OpusTags" + struct.pack("<I", len(vendor)) + vendor + struct.pack("<I", 0)
    pages = [
        _page([head], granule=0, serial=serial, sequence=0, flags=0x02),
        _page([tags], granule=0, serial=serial, sequence=1, flags=0),
    ]
    count = max(1, round(seconds * 50))
    done, sequence = 0, 2
    while done < count:
        batch = min(50, count - done)
        done += batch
        last = done == count
        pages.append(
            _page(
                [_SILENCE] * batch,
                granule=_PRE_SKIP + done * _SAMPLES_PER_PACKET,
                serial=serial,
                sequence=sequence,
                flags=0x04 if last else 0,
            )
        )
        sequence += 1
    return b"".join(pages)


# -- PDF -----------------------------------------------------------------------------------


def _pdf_text(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf(pages: list[str]) -> bytes:
    """A PDF with one page per entry of ``pages`` (lines split on newlines)."""
    objects: list[bytes] = []
    kids = []
    first_page = 4
    for index, text in enumerate(pages):
        page_number = first_page + 2 * index
        kids.append(f"{page_number} 0 R")
        lines = "".join(f"({_pdf_text(line)}) Tj T*\n" for line in text.split("\n"))
        stream = f"BT /F1 11 Tf 14 TL 56 780 Td\n{lines}ET".encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents {page_number + 1} 0 R"
            " /Resources << /Font << /F1 3 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    head = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(pages)} >>".encode(),
        _HELVETICA,
    ]
    return _assemble(head + objects)


_HELVETICA = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def _assemble(objects: list[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1; the first is the catalog)."""
    body = io.BytesIO()
    body.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, content in enumerate(objects, start=1):
        offsets.append(body.tell())
        body.write(b"%d 0 obj\n" % number + content + b"\nendobj\n")
    xref = body.tell()
    body.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1))
    for offset in offsets:
        body.write(b"%010d 00000 n \n" % offset)
    body.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(offsets) + 1, xref)
    )
    return body.getvalue()


def encrypted_pdf(pages: list[str], password: str = "secret") -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf(pages))))
    writer.encrypt(user_password=password, owner_password=password, algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# -- .docx ---------------------------------------------------------------------------------


def docx(paragraphs: list[str], table: list[list[str]] | None = None) -> bytes:
    import docx as python_docx

    document = python_docx.Document()
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, values in zip(grid.rows, table, strict=True):
            for cell, value in zip(row.cells, values, strict=True):
                cell.text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


# -- bombs: small files that expand past any sane bound ------------------------------------


def zip_bomb_docx(expanded_mb: int) -> bytes:
    """A .docx whose word/document.xml is ``expanded_mb`` MB of paragraphs, compressed
    about a thousand times (real ones compress ten to twenty): a few hundred KB."""
    original = zipfile.ZipFile(io.BytesIO(docx(["a normal start"])))
    paragraph = b"<w:p><w:r><w:t>boom</w:t></w:r></w:p>"
    chunk = paragraph * (1_000_000 // len(paragraph))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bomb:
        for entry in original.infolist():
            if entry.filename != "word/document.xml":
                bomb.writestr(entry, original.read(entry))
                continue
            head, _, tail = original.read(entry).partition(b"<w:body>")
            with bomb.open("word/document.xml", "w", force_zip64=True) as xml:
                xml.write(head + b"<w:body>")
                for _ in range(expanded_mb):
                    xml.write(chunk)
                xml.write(tail)
    return out.getvalue()


def flate_bomb_pdf(expanded_mb: int) -> bytes:
    """A one-page PDF whose content stream is ``expanded_mb`` MB of text operators,
    FlateDecode-compressed to a few KB per MB."""
    line = b"(the same few words again) Tj T*\n"
    stream = (
        b"BT /F1 11 Tf 14 TL 56 780 Td\n" + line * (expanded_mb * 1_000_000 // len(line)) + b"ET"
    )
    packed = zlib.compress(stream, 9)
    return _assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            _HELVETICA,
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 5 0 R"
            b" /Resources << /Font << /F1 3 0 R >> >> >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed)
            + packed
            + b"\nendstream",
        ]
    )
