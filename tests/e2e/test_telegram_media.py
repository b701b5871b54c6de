"""Voice notes, documents and everything else people send on Telegram, end to end: the
real gateway and python-telegram-bot against the fake Bot API, the fake LLM and its
fake transcription endpoint (issue 13). Also a group that becomes a supergroup."""

from __future__ import annotations

import hashlib
from decimal import Decimal
from pathlib import Path

import pytest

from tests.db import session_keys, session_rows
from tests.e2e.telegram_helpers import (
    ANN,
    push_mention,
    telegram_config,
    telegram_gateway,
    user_texts,
    visible,
)
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.fakes.media_files import docx, encrypted_pdf, ogg_opus, pdf
from tests.fakes.telegram_server import FakeTelegram
from tests.fakes.transcription import Transcript
from tests.harness import HeldAnswers, turns_done

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

STRANGER = {"id": 99, "is_bot": False, "first_name": "Eve"}
BASIC_GROUP, SUPERGROUP = -4001, -1004001
PDF_MIME = "application/pdf"


async def test_a_voice_note_is_transcribed_and_its_text_reaches_the_model(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram)
    voice = ogg_opus(42.0)
    async with telegram_gateway(config):
        telegram.push_file(42, "voice", voice, duration=42, mime_type="audio/ogg")
        [reply] = await telegram.wait_sent(1)
    [upload] = fake_llm.transcriptions.uploads
    assert (upload.model, upload.file_name, upload.data) == ("whisper-1", "voice.ogg", voice)
    assert upload.data.startswith(b"OggS") and b"OpusHead" in upload.data
    assert user_texts(fake_llm.requests[-1]) == ["[voice 0:42] hello from a voice note"]
    assert visible(reply.text) == "echo: [voice 0:42] hello from a voice note"


async def test_only_an_allowed_users_voice_note_is_downloaded_and_transcribed(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram, pairing=False)
    ann = ogg_opus(1.0)
    async with telegram_gateway(config):
        telegram.push_file(99, "voice", ogg_opus(2.0), duration=2, user=STRANGER)
        [refusal] = await telegram.wait_sent(1)
        telegram.push_file(42, "voice", ann, duration=1)
        await telegram.wait_sent(2)
    assert "private bot" in refusal.text
    [fetched] = telegram.method_calls("getFile")  # Ann's: the stranger's never left Telegram
    [upload] = fake_llm.transcriptions.uploads
    assert upload.data == ann and fetched["file_id"] != ""


async def test_a_failed_transcription_is_told_in_a_sentence_and_the_row_is_kept(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    fake_llm.transcriptions.default = Transcript(status=503)
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config) as gateway:
        telegram.push_file(42, "voice", ogg_opus(7.0), duration=7, caption="listen")
        await telegram.wait_sent(2)
        await turns_done(gateway)
    texts = sorted(visible(sent.text) for sent in telegram.sent)
    note = (
        "[voice 0:07, not transcribed: the transcription service answered with an error (HTTP 503)]"
    )
    assert texts == [
        "I could not transcribe your voice message (the transcription service answered"
        " with an error (HTTP 503)).",
        f"echo: listen\n{note}",
    ]
    assert session_rows(config, "telegram:42")[0] == ("user", f"listen\n{note}", 1)


async def test_audio_longer_than_the_limit_is_refused_without_a_download(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    sections = {"media": {"transcription": {"max_seconds": 60}}}
    config = telegram_config(tmp_path, fake_llm, telegram, sections=sections)
    async with telegram_gateway(config):
        telegram.push_file(42, "audio", b"ID3 not really", duration=1000, file_name="talk.mp3")
        await telegram.wait_sent(2)
    assert "is 16:40 long; I transcribe up to 1:00" in " ".join(s.text for s in telegram.sent)
    assert telegram.method_calls("getFile") == [] and fake_llm.transcriptions.uploads == []
    assert user_texts(fake_llm.requests[-1]) == [
        '[audio "talk.mp3" 16:40, not transcribed: longer than the 1:00 limit]'
    ]


async def test_a_voice_note_longer_than_it_says_is_refused_by_its_size(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    # The client says 5 seconds; 60 s of Opus is at most ~480 KB, and this is 2 MB.
    sections = {"media": {"transcription": {"max_seconds": 60}}}
    config = telegram_config(tmp_path, fake_llm, telegram, sections=sections)
    async with telegram_gateway(config):
        telegram.push_file(42, "voice", ogg_opus(1) + b"\0" * 2_000_000, duration=5)
        await telegram.wait_sent(2)
    assert "Your voice message is too large to transcribe." in [s.text for s in telegram.sent]
    assert fake_llm.transcriptions.uploads == []


def _reads_page_forty(document_id: str):
    """A model that reads page 40, then searches, then answers with what it found."""

    def respond(request: Recorded) -> Reply:
        tools = [m for m in request.messages if m["role"] == "tool"]
        if not tools:
            return Reply(tool_calls=[("read_document", {"document_id": document_id, "page": 40})])
        if len(tools) == 1:
            return Reply(tool_calls=[("session_search", {"query": "zebra"})])
        return Reply("found it")

    return respond


async def test_a_long_pdf_is_a_bounded_row_read_by_page_and_found_by_search(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    filler = "\n".join(["Nothing to see on this page, only filler text."] * 8)
    pages = [f"Page {n} of the handbook.\n{filler}" for n in range(1, 61)]
    pages[39] = "Page 40 of the handbook.\nThe zebra key opens the cellar door."
    data = pdf(pages)
    document_id = hashlib.sha256(data).hexdigest()[:12]
    fake_llm.responder = _reads_page_forty(document_id)
    config = telegram_config(tmp_path, fake_llm, telegram)
    async with telegram_gateway(config):
        telegram.push_file(
            42, "document", data, file_name="handbook.pdf", mime_type=PDF_MIME, caption="read it"
        )
        [reply] = await telegram.wait_sent(1)
    assert visible(reply.text) == "found it"
    row = user_texts(fake_llm.requests[0])[0]
    assert row.startswith(f'read it\n[document "handbook.pdf" · id {document_id} · PDF, 60 pages')
    assert "zebra" not in row and len(row) < 1500 * 4 + 600  # the excerpt, not the PDF
    [read, search] = [m["content"] for m in fake_llm.requests[-1].messages if m["role"] == "tool"]
    assert "page 40 of 60" in read and "The zebra key opens the cellar door." in read
    assert search.count("zebra") == 1  # one hit, at its page
    assert f'document "handbook.pdf" (id {document_id}, page 40)' in search


async def test_docx_and_csv_files_are_read_and_broken_ones_get_a_sentence(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram)
    word = docx(["Minutes of the meeting.", "Budget approved."], [["item", "cost"], ["desk", "90"]])
    async with telegram_gateway(config) as gateway:
        telegram.push_file(42, "document", word, file_name="minutes.docx")
        await telegram.wait_sent(1)
        csv = b"name,score\nann,10\nbob,7\n"
        telegram.push_file(42, "document", csv, file_name="scores.csv", mime_type="text/csv")
        await telegram.wait_sent(2)
        locked = encrypted_pdf(["secret plans"])
        telegram.push_file(42, "document", locked, file_name="plans.pdf", mime_type=PDF_MIME)
        await telegram.wait_sent(4)
        await turns_done(gateway)
    rows = [content for role, content, _ in session_rows(config, "telegram:42") if role == "user"]
    assert "Minutes of the meeting.\nBudget approved.\nitem | cost\ndesk | 90" in rows[0]
    assert "name,score\nann,10\nbob,7" in rows[1]
    assert rows[2].startswith('[document "plans.pdf"') and rows[2].endswith(
        ", not read: it is encrypted (protected by a password)]"
    )
    assert "I could not read plans.pdf: it is encrypted (protected by a password)." in [
        visible(sent.text) for sent in telegram.sent
    ]


async def test_stickers_locations_polls_and_forwards_become_short_text(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram)
    poll = {"id": "p", "question": "Lunch?", "total_voter_count": 0, "is_closed": False,
            "is_anonymous": True, "type": "regular", "allows_multiple_answers": False,
            "allows_revoting": False, "members_only": False,
            "options": [{"text": "pizza", "voter_count": 0, "persistent_id": "a"},
                        {"text": "soup", "voter_count": 0, "persistent_id": "b"}]}  # fmt: skip
    sticker = {"file_id": "s", "file_unique_id": "s", "width": 512, "height": 512,
               "is_animated": False, "is_video": False, "type": "regular", "emoji": "😀"}  # fmt: skip
    origin = {
        "type": "user",
        "date": 0,
        "sender_user": {"id": 7, "is_bot": False, "first_name": "Cy"},
    }
    async with telegram_gateway(config) as gateway:
        for extra in (
            {"sticker": sticker},
            {"location": {"latitude": 52.52, "longitude": 13.405}},
            {"poll": poll},
            {"dice": {"emoji": "🎲", "value": 4}},
            {"forward_origin": origin},
        ):
            text = "see you at 5" if "forward_origin" in extra else None
            telegram.push_update({"message": telegram.make_message(42, text, **extra)})
        await telegram.wait_for(lambda: telegram.confirmed_offset > telegram.last_pushed)
        await turns_done(gateway)
    assert [c for r, c, _ in session_rows(config, "telegram:42") if r == "user"] == [
        "[sticker 😀]",
        "[location: 52.52000, 13.40500]",
        "[poll: Lunch? — options: pizza / soup]",
        "[dice 🎲 rolled 4]",
        "(forwarded from (untrusted) Cy)\n> see you at 5",
    ]


async def test_a_group_upgraded_to_a_supergroup_keeps_its_conversation(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    held = HeldAnswers(matching=lambda request: "fact: three" in request.all_text)
    fake_llm.responder = held.respond
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(BASIC_GROUP,))
    async with telegram_gateway(config) as gateway:
        push_mention(telegram, BASIC_GROUP, "fact: one", user=ANN, chat_type="group")
        await telegram.wait_sent(1)
        # A turn is in flight when the group is upgraded: its reply follows the chat.
        push_mention(telegram, BASIC_GROUP, "fact: three", user=ANN, chat_type="group")
        await held.wait_held()
        telegram.migrate_group(BASIC_GROUP, SUPERGROUP)
        await telegram.wait_for(lambda: telegram.confirmed_offset > telegram.last_pushed)
        held.release()
        await telegram.wait_sent(2)
        push_mention(telegram, SUPERGROUP, "which facts?", user=ANN, chat_type="supergroup")
        await telegram.wait_sent(3)
        await turns_done(gateway)
    assert [sent.chat_id for sent in telegram.sent] == [BASIC_GROUP, SUPERGROUP, SUPERGROUP]
    assert user_texts(fake_llm.requests[-1]) == [
        "Ann: fact: one",
        "Ann: fact: three",
        "Ann: which facts?",
    ]
    assert session_keys(config) == [f"telegram:{SUPERGROUP}"]
    assert [content for _, content, _ in session_rows(config, f"telegram:{SUPERGROUP}")] == [
        "Ann: fact: one", "ok", "Ann: fact: three", "ok", "Ann: which facts?", "ok",
    ]  # fmt: skip


async def test_a_send_refused_as_migrated_goes_to_the_new_chat(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(BASIC_GROUP,))
    async with telegram_gateway(config) as gateway:
        # The service messages were missed (the bot was away): only the send learns it.
        telegram.migrate_group(BASIC_GROUP, SUPERGROUP, service_messages=False)
        push_mention(telegram, BASIC_GROUP, "hello", user=ANN, chat_type="group")
        [reply] = await telegram.wait_sent(1)
        await turns_done(gateway)
        await gateway.lanes.wait_idle()
    assert reply.chat_id == SUPERGROUP and visible(reply.text) == "echo: Ann: hello"
    assert session_keys(config) == [f"telegram:{SUPERGROUP}"]


async def test_a_voice_note_s_transcription_is_priced_per_minute_for_its_sender(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    sections = {"media": {"transcription": {"price_per_minute": 0.006}}}
    config = telegram_config(tmp_path, fake_llm, telegram, sections=sections)
    async with telegram_gateway(config) as gateway:
        telegram.push_file(42, "voice", ogg_opus(42.0), duration=42, mime_type="audio/ogg")
        await telegram.wait_sent(1)
        await turns_done(gateway)
        lines = await gateway.store.costs.totals("kind", 0)
        calls = await gateway.store.costs.calls(0)
    [line] = [line for line in lines if line.group == "transcription"]
    assert (line.calls, line.cost) == (1, Decimal("0.0042"))  # 42 s at $0.006 a minute
    [heard] = [call for call in calls if call.kind == "transcription"]
    assert (heard.person, heard.session_key, heard.model) == (
        "telegram:42",
        "telegram:42",
        "whisper-1",
    )
