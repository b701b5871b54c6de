"""A group chat overnight: 1,000 observed messages and 100 addressed ones through a model
whose window is only 8K tokens. Nothing may overflow and nothing may be lost."""

from __future__ import annotations

import json
import logging
import random
import sys
from pathlib import Path

import pytest

from tests import db
from tests.fakes.llm_server import FakeLLM
from tests.fakes.local_servers import FakeVllm
from tests.harness import (
    RecordingAdapter,
    is_summary_request,
    make_config,
    running_gateway,
    summarizing,
    turns_done,
)

WINDOW = 8_192
WORDS = "we move the meeting to thursday check the numbers and send the draft".split()
RUSSIAN = "переносим встречу на четверг проверяем цифры и отправляем черновик".split()

HOOK_MODULE = """
payloads = []

def record(event, payload):
    payloads.append(payload)
"""


@pytest.fixture
def hook_payloads(tmp_path: Path):
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "overnight_hooks.py").write_text(HOOK_MODULE)
    yield lambda: sys.modules["overnight_hooks"].payloads
    sys.modules.pop("overnight_hooks", None)


async def test_an_overnight_group_stays_inside_the_window_and_loses_nothing(
    tmp_path: Path, fake_llm: FakeLLM, hook_payloads, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.conversation_compression")
    fake_llm.context_window = WINDOW
    fake_llm.responder = summarizing()
    config = make_config(
        tmp_path,
        fake_llm,
        model={"context_length": WINDOW, "max_output_tokens": 1024},
        platforms={"telegram": {"allowed_chats": ["-42"], "group_members": "all"}},
        hooks=[{"events": ["session:compress"], "handler": "overnight_hooks:record"}],
    )
    rng = random.Random(7)
    batches = [rng.randint(0, 16) for _ in range(100)]
    batches[-1] += 1_000 - sum(batches)  # the last night is the longest
    assert sum(batches) == 1_000 and batches[-1] > 0

    adapter = RecordingAdapter("telegram")
    said: list[str] = []
    async with running_gateway(config, adapter) as gateway:
        for turn, observed in enumerate(batches):
            for i in range(observed):
                text = f"turn {turn} chatter {i}: " + rng.choice("abcdef") * 380
                said.append(text)
                await adapter.say(
                    text, chat_id="-42", chat_type="group", user_name="Ann", addressed=False
                )
            question = f"question {turn}?"
            said.append(question)
            await adapter.say(question, chat_id="-42", chat_type="group", user_name="Bob")
            await adapter.wait_sent(turn + 1)
        await turns_done(gateway)
        await gateway.events.drain()

    # No request ever asked for more than the window holds.
    assert fake_llm.requests
    for request in fake_llm.requests:
        assert request.prompt_tokens + request.max_tokens <= WINDOW
    assert all(text == "ok" for text in adapter.texts())  # every question was answered

    # Both safety layers worked: hygiene before turns, the compressor inside them.
    triggers = {p["trigger_source"] for p in hook_payloads()}
    assert "gateway_hygiene" in triggers
    assert triggers & {"turn_start_threshold", "pre_api", "post_tool"}
    telemetry = [r.getMessage() for r in caplog.records if "attempt telemetry" in r.getMessage()]
    assert any('"gateway_hygiene"' in line for line in telemetry)
    assert all(p["in_place"] is True and p["old_session_id"] == "" for p in hook_payloads())

    # Every message anyone wrote is still in the database, archived or active.
    rows = db.stored_messages(tmp_path, role="user")
    stored = {}
    for content, active, compacted in rows:
        stored.setdefault(content, []).append((active, compacted))
    for text in said:
        sender = "Bob" if text.startswith("question") else "Ann"
        states = stored.get(f"{sender}: {text}")
        assert states, f"lost: {text[:40]}"
        assert all(state in ((1, 0), (0, 1)) for state in states)
    archived = sum(1 for _, active, compacted in rows if (active, compacted) == (0, 1))
    assert archived > 900  # most of the night was summarized, not dropped


@pytest.mark.parametrize("language", ["en", "ru"])
async def test_a_night_of_short_lines_on_a_4k_server_is_summarized_by_the_model_and_fits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, language: str
) -> None:
    """480 short group lines, then a question, on a vLLM serving 4,096 tokens (which
    refuses a prompt plus max_tokens over it) with a tokenizer heavier than the estimate
    (Russian 1.6 times): every summary call fits, from the first, and the summary is the
    model's, not the fallback."""
    rng = random.Random(11)
    words = WORDS if language == "en" else RUSSIAN
    async with FakeVllm(served=4_096) as vllm:
        vllm.responder = summarizing()
        config = make_config(
            tmp_path,
            vllm,
            model={"name": vllm.model},
            platforms={"telegram": {"allowed_chats": ["-42"], "group_members": "all"}},
        )
        adapter = RecordingAdapter("telegram")
        with caplog.at_level(logging.INFO):
            async with running_gateway(config, adapter) as gateway:
                for i in range(480):
                    line = " ".join(rng.choice(words) for _ in range(rng.randint(20, 40)))
                    text = f"fact: #{i} {line}" if i % 97 == 5 else f"msg {i}: {line}"
                    await adapter.say(
                        text, chat_id="-42", chat_type="group", user_name="Ann", addressed=False
                    )
                await adapter.say("what did we decide?", chat_id="-42", chat_type="group")
                await adapter.wait_sent(1)
                await turns_done(gateway)
    assert adapter.texts() == ["ok"]
    summaries = [r for r in vllm.requests if is_summary_request(r)]
    assert summaries
    for request in vllm.requests:  # the server refuses nothing, so none was over
        assert request.prompt_tokens + request.max_tokens <= 4_096, request.prompt_tokens
    told = "\n".join(r.getMessage() for r in caplog.records)
    assert "deterministic_fallback" not in told and "overflow" not in told
    # The memory flush before it was shown people's lines, not the model's alone.
    [flush] = [r.getMessage() for r in caplog.records if "memory flush telemetry" in r.getMessage()]
    assert json.loads(flush.split(": ", 1)[1])["span_rows"] > 10
