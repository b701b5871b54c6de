"""Voice notes and budgets, through the real gateway, python-telegram-bot and the fake
Bot API and transcription endpoint (docs/cost.md#transcription)."""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path

import pytest

from gateway.store import CostRecord
from tests.e2e.telegram_helpers import ANN, push_mention, telegram_config, telegram_gateway
from tests.fakes.llm_server import FakeLLM
from tests.fakes.media_files import ogg_opus
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import turns_done

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

GROUP = -1004001
#: $6 a minute: a 42-second voice note could cost $4.20.
DEAR = {"price_per_minute": 6}


async def test_a_voice_note_over_the_budget_is_not_transcribed_and_its_sender_is_told(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    sections = {"media": {"transcription": DEAR}, "budgets": {"per_user_daily": 1}}
    config = telegram_config(tmp_path, fake_llm, telegram, sections=sections)
    async with telegram_gateway(config) as gateway:
        telegram.push_file(42, "voice", ogg_opus(42.0), duration=42, mime_type="audio/ogg")
        await telegram.wait_sent(2)
        await turns_done(gateway)
        calls = await gateway.store.costs.calls(0)
    assert fake_llm.transcriptions.uploads == []
    texts = [sent.text for sent in telegram.sent]
    assert (
        "This voice note could cost up to $4.20, and $1.00 is left of your daily $1.00;"
        " it resets at 00:00 UTC."
    ) in texts
    assert [call.kind for call in calls] == ["chat"]  # the turn (a free local model) only


async def test_an_observed_voice_note_is_the_chat_s_not_its_sender_s(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    media = {"transcription": {**DEAR, "observe": True}}
    sections = {"media": media, "budgets": {"per_user_daily": 1}}
    config = telegram_config(tmp_path, fake_llm, telegram, chats=(GROUP,), sections=sections)
    async with telegram_gateway(config) as gateway:
        spent = CostRecord(time.time(), "telegram:42", "telegram:42", "chat", "m", cost=Decimal(1))
        await gateway.store.costs.record(spent)  # Ann's day is used up elsewhere
        telegram.push_file(
            GROUP, "voice", ogg_opus(5.0), duration=5, user=ANN, chat_type="supergroup"
        )
        push_mention(telegram, GROUP, "what did I say?", user=ANN, chat_type="supergroup")
        await telegram.wait_sent(1)
        await turns_done(gateway)
        calls = await gateway.store.costs.calls(0)
    assert len(fake_llm.transcriptions.uploads) == 1  # the chat's budget allows it
    [heard] = [call for call in calls if call.kind == "transcription"]
    assert (heard.session_key, heard.person, heard.cost) == (
        f"telegram:{GROUP}",
        None,
        Decimal("0.5"),
    )
