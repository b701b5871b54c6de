"""A group chat overnight: 1,000 observed messages and 100 addressed ones through a model
whose window is only 8K tokens. Nothing may overflow and nothing may be lost."""

from __future__ import annotations

import logging
import random
import sys
from pathlib import Path

import pytest

from tests import db
from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, make_config, running_gateway, summarizing, turns_done

WINDOW = 8_192

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
