"""Slow models end to end (docs/design.md#slow-models): the real gateway and
python-telegram-bot against the fake Bot API, and a fake model that writes 8 tokens a
second the way llama.cpp, Ollama and vLLM stream (tests/fakes/llm_server.py).

``model.timeout_seconds`` is set below the time the whole reply takes: a model still
writing is never cut off, one that falls silent for that long is. Times come from the
fakes' own stamps (``Recorded.tokens``, ``SentMessage.at``, ``Edit.at``: one clock)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config.schema import Config
from tests.e2e.telegram_helpers import telegram_config, telegram_gateway, visible
from tests.fakes.llm_server import FakeLLM, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.harness import turns_done

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

#: 36 words at 8 a second: 4.4 s from the first token to the last.
ANSWER = " ".join(f"word{i}" for i in range(36))
TOKENS_PER_SECOND = 8
TIMEOUT = 2  # model.timeout_seconds, well under the reply's 4.4 s
TIMED_OUT = "The model took too long to answer. Please try again."


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as server:
        yield server


def slow_config(
    tmp_path: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    *,
    stream: bool,
    timeout: float = TIMEOUT,
    **model: Any,
) -> Config:
    """Telegram (``stream`` or not) and the model on ``llm`` with ``timeout_seconds``."""
    model = {"timeout_seconds": timeout, **model}
    return telegram_config(tmp_path, llm, telegram, stream=stream, sections={"model": model})


async def test_a_slow_model_streamed_to_telegram_shows_text_at_once_and_the_reply_once(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    fake_llm.script(Reply(ANSWER, tokens_per_second=TOKENS_PER_SECOND))
    config = slow_config(tmp_path, fake_llm, telegram, stream=True)
    # Telegram's own pace: one edit a second per chat (the tests elsewhere run faster).
    async with telegram_gateway(config, stream_edit_interval=1.0) as gateway:
        telegram.push_text(42, "tell me slowly")
        await telegram.wait_for(lambda: any(e.parse_mode == "HTML" for e in telegram.edits))
        await turns_done(gateway)

    [request] = fake_llm.requests
    first_token, last_token = request.tokens[0][0], request.tokens[-1][0]
    assert last_token - first_token > TIMEOUT  # slower than the timeout, and not cut off
    [draft] = telegram.sent  # one message: the draft, edited into the reply
    assert draft.at - first_token < 2.0, f"first text {draft.at - first_token:.2f} s late"
    *partial, final = telegram.edits
    assert (final.parse_mode, visible(final.text)) == ("HTML", ANSWER)  # whole, once
    assert all(ANSWER.startswith(e.text) and e.parse_mode is None for e in partial)
    assert partial, "no text shown between the first and the last"
    stamps = [draft.at] + [e.at for e in telegram.edits]
    assert min(b - a for a, b in itertools.pairwise(stamps)) >= 1.0  # one edit a second


async def test_a_slow_model_not_streamed_to_the_chat_is_answered_not_killed(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    fake_llm.script(Reply(ANSWER, tokens_per_second=TOKENS_PER_SECOND))
    config = slow_config(tmp_path, fake_llm, telegram, stream=False)
    async with telegram_gateway(config) as gateway:
        telegram.push_text(42, "tell me slowly")
        [reply] = await telegram.wait_sent(1)
        await turns_done(gateway)

    [request] = fake_llm.requests
    assert request.stream  # the chat sees nothing until the end; the timeout sees tokens
    assert request.tokens[-1][0] - request.tokens[0][0] > TIMEOUT
    assert visible(reply.text) == ANSWER and telegram.edits == []
    assert len(telegram.sent) == 1


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
async def test_a_stalled_model_gets_the_timeout_sentence_once(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, api: str, stream: bool
) -> None:
    model: dict[str, Any] = {}
    if api == "anthropic":
        model = {"provider": "anthropic", "name": "claude-test-4-5", "api_key": "k"}
        model["base_url"] = fake_llm.anthropic_base_url
    fake_llm.script(Reply(ANSWER, tokens_per_second=TOKENS_PER_SECOND, stall_after=5))
    config = slow_config(tmp_path, fake_llm, telegram, stream=stream, timeout=1, **model)
    async with telegram_gateway(config) as gateway:
        telegram.push_text(42, "and then?")
        await telegram.wait_for(
            lambda: any(visible(m.text) == TIMED_OUT for m in [*telegram.sent, *telegram.edits])
        )
        await turns_done(gateway)

    [request] = fake_llm.requests  # asked once: a stalled stream is not asked again
    assert [text for _, text in request.tokens] == ANSWER.split(" ")[:1] + [
        f" word{i}" for i in range(1, 5)
    ]
    [message] = telegram.sent  # one message: the draft (or the answer) became the sentence
    shown = [*telegram.sent, *telegram.edits][-1]
    assert visible(shown.text) == TIMED_OUT
    # Said after the model had been silent for the whole timeout, not before.
    assert shown.at - request.tokens[-1][0] >= 1.0
    if stream:
        assert ANSWER.startswith(visible(message.text))  # what came before the stall
