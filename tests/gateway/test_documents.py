"""Documents through the gateway (docs/design.md#documents): a huge file costs a bounded
row and never blocks compression; its text is stored once however many chats hold it
and is erased with the last of them; an empty answer from the model is asked again once
(docs/design.md#empty-answer)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest

from adapters.base import Attachment
from agent.turn_result import EMPTY_ANSWER
from gateway.config.media import TranscriptionConfig, transcription_route
from gateway.config.routes import ModelRoute
from gateway.media.documents import ReadingLimits, extract_document
from tests import db
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.media_files import flate_bomb_pdf
from tests.harness import RecordingAdapter, make_config, running_gateway, summarizing, turns_done

WINDOW = 8192
#: The threshold of an 8K window: 0.85 (tiny windows) of the input budget (the window less
#: its reserve, a quarter of it).
THRESHOLD = int(0.85 * (WINDOW - WINDOW // 4))


def _big_log(size: int) -> bytes:
    line = b"2025-01-01 12:00:00 INFO request served in 12 ms from the cache\n"
    return line * (size // len(line))


async def test_a_2_mb_text_file_in_an_8k_window_still_compresses_under_the_threshold(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.responder = summarizing()
    config = make_config(tmp_path, fake_llm, model={"context_length": WINDOW})
    adapter = RecordingAdapter()
    data = _big_log(2_000_000)
    async with running_gateway(config, adapter) as gateway:
        await adapter.say("fact: the server is called owl-1")
        await adapter.wait_sent(1)
        log = Attachment("document", "text/plain", data=data, name="server.log")
        await adapter.say("what is in this log?", attachments=(log,))
        await adapter.wait_sent(2)
        for n in range(6):
            await adapter.say(f"fact: note {n} " + "x" * 2400)
            await adapter.wait_sent(3 + n)
        await turns_done(gateway)
    assert db.value(tmp_path, "SELECT MAX(compression_count) FROM sessions") >= 1
    assert all(request.prompt_tokens < THRESHOLD for request in fake_llm.requests[-3:])
    [(row_tokens,)] = db.rows(
        tmp_path, "SELECT token_count FROM messages WHERE content LIKE '%server.log%'"
    )
    assert row_tokens < 1500 + 200  # the excerpt and its header, not 500K tokens
    assert db.value(tmp_path, "SELECT chars FROM documents") == len(data)
    assert db.value(tmp_path, "SELECT sum(length(text)) FROM document_parts") == len(data)


async def count(store: Any, table: str) -> int:
    async with store.connection.read() as handle:
        [(rows,)] = await handle.fetch_all(f"SELECT count(*) FROM {table}")
    return int(rows)


async def test_a_document_is_stored_once_and_erased_with_the_last_chat_holding_it(
    backend_store: Any,
) -> None:
    store = backend_store
    text = await extract_document(b"alpha beta gamma\n" * 100, "notes.md", "text/markdown")
    first = await store.documents.keep_document("telegram:1", "notes.md", text)
    second = await store.documents.keep_document("discord:2", "copy.md", text)
    assert first.document_id == second.document_id == text.sha256[:12]
    assert second.name == "copy.md"  # each chat knows it by its own name
    assert await store.documents.read_document("telegram:3", first.document_id) is None
    await store.operator.forget("telegram:1")
    assert await count(store, "document_parts") == 1
    [hit] = await store.documents.search_documents("discord:2", "gamma")
    assert hit.document.name == "copy.md" and "«gamma»" in hit.snippet
    await store.operator.forget("discord:2")
    assert await store.documents.search_documents("discord:2", "gamma") == []
    assert await count(store, "documents") == 0
    assert await count(store, "document_parts") == 0


async def test_a_moved_chat_keeps_its_documents_once(backend_store: Any) -> None:
    store = backend_store
    text = await extract_document(b"alpha beta gamma\n" * 100, "notes.md", "text/markdown")
    other = await extract_document(b"delta epsilon\n" * 100, "other.md", "text/markdown")
    await store.documents.keep_document("telegram:-1", "notes.md", text)
    await store.documents.keep_document("telegram:-1:7", "other.md", other)
    await store.documents.keep_document("telegram:-100", "notes again.md", text)
    assert await store.chats.move_chat("telegram", "-1", "-100")
    assert not await store.chats.move_chat("telegram", "-1", "-100")  # told twice
    assert await store.chats.moved_chats() == [("telegram", "-1", "-100")]
    [hit] = await store.documents.search_documents("telegram:-100", "gamma")
    assert hit.document.name == "notes again.md"  # the new chat's name for it
    [topic] = await store.documents.search_documents("telegram:-100:7", "epsilon")
    assert topic.document.name == "other.md"
    assert await store.documents.search_documents("telegram:-1", "gamma") == []
    assert await count(store, "chat_documents") == 2


async def test_read_document_reads_a_text_on_by_offset(backend_store: Any) -> None:
    store = backend_store
    data = "".join(f"line {n:05d}\n" for n in range(3000)).encode()
    text = await extract_document(data, "lines.txt", "text/plain")
    kept = await store.documents.keep_document("console:x", "lines.txt", text)
    part = await store.documents.read_document(
        "console:x", kept.document_id, offset=12_000, max_chars=100
    )
    assert part is not None and (part.start, part.end) == (12_000, 12_100)
    assert part.text == data.decode()[12_000:12_100]
    assert kept.document_id == hashlib.sha256(data).hexdigest()[:12]


async def test_an_empty_answer_is_asked_again_once_then_the_user_gets_a_sentence(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.script(Reply(""), Reply("  "), Reply(""), Reply("here it is"))
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await adapter.say("hello?")
        await adapter.wait_sent(1)
        await adapter.say("hello again?")
        await adapter.wait_sent(2)
    assert adapter.texts() == [EMPTY_ANSWER, "here it is"]
    assert fake_llm.request_count == 4
    assert [m for m, _, _ in db.stored_messages(tmp_path, "assistant")] == [
        EMPTY_ANSWER,
        "here it is",
    ]


def test_transcription_goes_to_the_main_openai_endpoint_with_its_key_and_nowhere_else() -> None:
    local = ModelRoute("openai", "llama", "http://127.0.0.1:8080/v1", "main-key")
    route = transcription_route(TranscriptionConfig(), local)
    assert route == ModelRoute("openai", "whisper-1", "http://127.0.0.1:8080/v1", "main-key")
    elsewhere = TranscriptionConfig(base_url="http://127.0.0.1:9000/v1")
    assert transcription_route(elsewhere, local) == ModelRoute(
        "openai", "whisper-1", "http://127.0.0.1:9000/v1", None
    )
    claude = ModelRoute("anthropic", "claude", None, "anthropic-key")
    assert transcription_route(TranscriptionConfig(), claude) is None  # auto: no endpoint
    assert transcription_route(TranscriptionConfig(enabled=False), local) is None


async def test_the_reader_holds_no_secret_and_dies_with_a_cancelled_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-reader")
    started: asyncio.Future[asyncio.subprocess.Process] = asyncio.get_running_loop().create_future()
    spawn = asyncio.create_subprocess_exec

    async def watched(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        process = await spawn(*args, **kwargs)
        started.set_result(process)
        return process

    monkeypatch.setattr(asyncio, "create_subprocess_exec", watched)
    limits = ReadingLimits(10**6, 10, 20)
    slow = asyncio.create_task(
        extract_document(flate_bomb_pdf(2), "slow.pdf", "application/pdf", limits)
    )
    reader = await asyncio.wait_for(started, 10)
    environment = await asyncio.to_thread(Path(f"/proc/{reader.pid}/environ").read_bytes)
    assert b"sk-never-in-the-reader" not in environment and b"PATH=" in environment
    slow.cancel()
    with pytest.raises(asyncio.CancelledError):
        await slow
    assert reader.returncode is not None  # killed and reaped, not left reading
