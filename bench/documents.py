"""Benchmark: documents -> text (docs/design.md#documents).

    python bench/documents.py

1. Extraction of a 300-page PDF and of a 20 MB text file, each in a child process of
   its own: wall time, and peak RSS before and after (bench/rss.py), so the extraction's
   own memory shows apart from the interpreter's and the file's.
2. Prompt tokens per turn for a session that receives ten such documents (five PDFs,
   five text files, all different) through the real gateway, router and store, against
   the fake LLM with a 128K window: each turn's prompt should grow by about one excerpt
   (media.documents.excerpt_tokens, 1500) — not by the document.

Targets: the per-turn prompt bounded by the excerpts (ten documents < 20K tokens); the
extraction's peak memory a small multiple of the text it returns.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.fakes, bench.support

from rss import peak_rss_mb  # bench/rss.py (the script's own folder)

PAGES = 300
TEXT_BYTES = 20_000_000
WINDOW = 128_000


def pdf_bytes(seed: int = 0) -> bytes:
    from tests.fakes.media_files import pdf

    lines = [f"Document {seed}, page {{page}}, line {n}: the quick brown fox." for n in range(40)]
    return pdf(["\n".join(lines).format(page=page) for page in range(1, PAGES + 1)])


def text_bytes(seed: int = 0) -> bytes:
    """A server log of distinct lines (request ids and timings vary, as in a real one)."""
    lines, size, n = [], 0, 0
    while size < TEXT_BYTES:
        line = f"{seed:02d} 2025-01-01 12:{n // 60 % 60:02d}:{n % 60:02d} INFO req-{n:08x}"
        line += f" served /api/items/{n * 7919 % 100003} in {n % 97} ms\n"
        lines.append(line)
        size += len(line)
        n += 1
    return "".join(lines).encode()[:TEXT_BYTES]


def child(kind: str) -> None:
    """Extract one file; print time, sizes and peak RSS as JSON."""
    from gateway.media.documents import extract_document

    data = pdf_bytes() if kind == "pdf" else text_bytes()
    name, mime = ("big.pdf", "application/pdf") if kind == "pdf" else ("big.log", "text/plain")
    before = peak_rss_mb()
    started = time.perf_counter()
    text = asyncio.run(extract_document(data, name, mime))
    seconds = time.perf_counter() - started
    after = peak_rss_mb()
    print(
        json.dumps(
            {
                "kind": kind,
                "bytes": len(data),
                "chars": text.chars,
                "parts": len(text.parts),
                "seconds": round(seconds, 2),
                "rss_before_mb": round(before, 1),
                "rss_peak_mb": round(after, 1),
            }
        )
    )


def extraction() -> None:
    print(f"1. extraction (each in its own process; {PAGES}-page PDF, {TEXT_BYTES:,}-byte text)")
    for kind in ("pdf", "text"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", kind],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
        ).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(
            f"   {kind:4}: {r['bytes'] / 1e6:6.1f} MB -> {r['chars']:>10,} chars in"
            f" {r['parts']:>5} parts, {r['seconds']:6.2f} s, peak RSS {r['rss_peak_mb']:.0f} MB"
            f" (before extraction {r['rss_before_mb']:.0f} MB)"
        )


async def prompt_tokens() -> None:
    from adapters.base import Attachment, InboundMessage
    from bench.support import SignalAdapter
    from gateway.app import Gateway
    from tests.fakes.llm_server import FakeLLM
    from tests.harness import make_config

    print("2. prompt tokens per turn, a session receiving ten documents (128K window)")
    async with FakeLLM() as llm:
        with tempfile.TemporaryDirectory() as data_dir:
            config = make_config(Path(data_dir), llm, model={"context_length": WINDOW})
            adapter = SignalAdapter()
            gateway = Gateway(config, [adapter])
            await gateway.start()
            try:
                for n in range(10):
                    if n % 2 == 0:
                        data, name, mime = pdf_bytes(n), f"doc{n}.pdf", "application/pdf"
                    else:
                        data, name, mime = text_bytes(n), f"doc{n}.log", "text/plain"
                    adapter.replied.clear()
                    started = time.perf_counter()
                    await adapter.sink(
                        InboundMessage(
                            platform="console",
                            chat_id="bench",
                            user_id="u",
                            text=f"here is {name}",
                            chat_type="console",
                            attachments=(Attachment("document", mime, data=data, name=name),),
                        )
                    )
                    stored = time.perf_counter() - started
                    await adapter.replied.wait()
                    request = llm.requests[-1]
                    print(
                        f"   after document {n + 1:2} ({len(data) / 1e6:5.1f} MB):"
                        f" prompt {request.prompt_tokens:>6,} tokens"
                        f" (read and stored in {stored:5.2f} s)"
                    )
            finally:
                await gateway.stop()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        extraction()
        asyncio.run(prompt_tokens())
