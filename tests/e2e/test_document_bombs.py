"""Documents built to hurt, through the real Telegram adapter (docs/design.md#documents):
a .docx zip bomb, a PDF whose compressed stream expands past any bound, a PDF built to
be slow, a book longer than the bounds. The sender gets a sentence, the row says what was
kept, memory stays bounded, and another chat is answered while a file is being read."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.db import session_rows
from tests.e2e.telegram_helpers import telegram_config, telegram_gateway, visible
from tests.fakes.llm_server import FakeLLM
from tests.fakes.media_files import flate_bomb_pdf, pdf, zip_bomb_docx
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import turns_done

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ANN, BOB = 42, 43
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PDF = "application/pdf"


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def rss_mb() -> float:
    """This process's resident memory now."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def reader_peak_mb(caplog: pytest.LogCaptureFixture) -> int:
    """The largest resident memory the document reader's process reached, as it said."""
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("document read in")]
    assert said, "the reader said nothing"
    return max(int(line.split()[3]) for line in said)


def shown(telegram: FakeTelegram) -> list[str]:
    return [visible(telegram.shown(message)) for message in telegram.sent]


@pytest.mark.parametrize(
    ("name", "build", "mime", "reason"),
    [
        (
            "bomb.docx",
            lambda: zip_bomb_docx(300),
            DOCX,
            "it would expand to 300 MB, past the limit",
        ),
        (
            "bomb.pdf",
            lambda: flate_bomb_pdf(40),
            PDF,
            "it would expand far past the size limit (a compression bomb)",
        ),
    ],
    ids=["zip bomb", "flate bomb"],
)
async def test_a_document_bomb_gets_a_sentence_and_costs_no_memory(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    caplog: pytest.LogCaptureFixture,
    name: str,
    build: object,
    mime: str,
    reason: str,
) -> None:
    bomb = build()  # type: ignore[operator]
    config = telegram_config(tmp_path, fake_llm, telegram)
    caplog.set_level(logging.DEBUG, logger="gateway.media.documents")
    async with telegram_gateway(config) as gateway:
        before = rss_mb()
        telegram.push_file(ANN, "document", bomb, file_name=name, mime_type=mime, caption="look")
        await telegram.wait_sent(2)
        await turns_done(gateway)
        grown = rss_mb() - before
    assert grown < 40  # the gateway never held the expanded text
    assert reader_peak_mb(caplog) < 150  # nor did the process that read it
    assert f"I could not read {name}: {reason}." in shown(telegram)
    [(_, row, _)] = [r for r in session_rows(config, f"telegram:{ANN}") if r[0] == "user"]
    assert f'[document "{name}"' in row and f"not read: {reason}]" in row


async def test_another_chat_is_answered_while_a_slow_document_is_read(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(
        tmp_path,
        fake_llm,
        telegram,
        users=(ANN, BOB),
        sections={"media": {"documents": {"read_seconds": 2}}},
    )
    async with telegram_gateway(config) as gateway:
        slow = flate_bomb_pdf(2)  # a couple of MB of text operators: pypdf takes its time
        telegram.push_file(ANN, "document", slow, file_name="slow.pdf", mime_type=PDF)
        telegram.push_text(BOB, "hello, anyone?")
        await telegram.wait_sent(3)
        await turns_done(gateway)
    texts = shown(telegram)
    notice = "I could not read slow.pdf: it needs more than 2 seconds of work to read."
    assert notice in texts
    # Bob's answer came while Ann's file was still being read, not after it.
    assert texts.index("echo: hello, anyone?") < texts.index(notice)


async def test_a_document_past_the_bounds_is_kept_in_part_and_says_so(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    config = telegram_config(
        tmp_path, fake_llm, telegram, sections={"media": {"documents": {"max_pages": 3}}}
    )
    book = pdf([f"chapter {n}: the tale goes on" for n in range(1, 11)])
    async with telegram_gateway(config) as gateway:
        telegram.push_file(ANN, "document", book, file_name="book.pdf", mime_type=PDF)
        await telegram.wait_sent(2)
        await turns_done(gateway)
    assert (
        "I read only 3 of the 10 pages of book.pdf: that is as much as I read of one file."
        in shown(telegram)
    )
    [(_, row, _)] = [r for r in session_rows(config, f"telegram:{ANN}") if r[0] == "user"]
    assert "only 3 of the 10 pages read" in row
    assert "chapter 3" in row and "chapter 4" not in row
