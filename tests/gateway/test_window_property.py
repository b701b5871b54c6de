"""A property of the whole context engine: whatever the conversation holds and however
the summary model behaves, no request passes the window, the newest message always
reaches the model, and every message is stored exactly once.

Each example runs the real gateway (group chat, observed rows, hygiene, the compressor,
the store) with the OpenAI SDK against the fake server, which enforces the window.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.window import Window
from tests import db
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.harness import (
    RecordingAdapter,
    is_summary_request,
    make_config,
    running_gateway,
    turns_done,
)

GROUP = {"chat_id": "-7", "chat_type": "group", "user_name": "Ann"}
#: Row sizes in characters, from one character to a megabyte.
SIZES = st.sampled_from([1, 30, 700, 4_000, 30_000, 250_000, 1_000_000])
BEHAVIOURS = ["works", "error 500", "length cut", "garbage", "longer than its input"]

message = st.tuples(SIZES, st.booleans())  # (characters, addressed to the bot)


def text_of(index: int, size: int) -> str:
    marker = f"m{index}:"
    return (marker + " the quick brown fox jumps" * (size // 25 + 1))[: max(size, len(marker))]


def summary_reply(behaviour: str, request: Recorded) -> Reply:
    if behaviour == "works":
        return Reply("## Goal\nKeep chatting.\n\n## Critical Context\n- " + request.all_text[-300:])
    if behaviour == "error 500":
        return Reply(status=500)
    if behaviour == "length cut":
        return Reply("## Goal\nhalf a summ", finish_reason="length")
    if behaviour == "garbage":
        return Reply("}{ ☃ \x07 not a summary at all ]]")
    return Reply("LONGER " * (len(request.all_text) // 3 + 10))


async def run_example(
    messages: list[tuple[int, bool]], window: int, behaviour: str, data: Path
) -> None:
    async with FakeLLM(context_window=window) as llm:

        def respond(request: Recorded) -> Reply:
            if is_summary_request(request):
                return summary_reply(behaviour, request)
            return Reply("echo " + request.last_user_text[:30])

        llm.responder = respond
        config = make_config(
            data,
            llm,
            model={"context_length": window, "max_output_tokens": 1_024},
            platforms={"telegram": {"allowed_chats": ["-7"], "allowed_users": ["u1"]}},
        )
        adapter = RecordingAdapter("telegram")
        texts = [text_of(i, size) for i, (size, _) in enumerate(messages)]
        newest_seen: dict[int, str] = {}
        async with running_gateway(config, adapter) as gateway:
            for i, ((_, addressed), text) in enumerate(zip(messages, texts, strict=True)):
                before = len(llm.requests)
                await adapter.say(text, addressed=addressed, **GROUP)
                await turns_done(gateway)
                answers = [r for r in llm.requests[before:] if not is_summary_request(r)]
                if addressed:
                    assert answers, f"message {i} got no turn"
                    newest_seen[i] = answers[-1].last_user_text
        requests = list(llm.requests)

    for request in requests:  # 1. no request ever passes the window
        assert request.prompt_tokens + request.max_tokens <= window, (
            request.prompt_tokens,
            request.max_tokens,
        )
    share = int(Window(window, 1_024).newest_cap * 4 * 0.5)
    for i, seen in newest_seen.items():  # 2. the newest message gets its guaranteed share
        row = f"Ann: {texts[i]}"
        assert row[: min(len(row), share)] in seen
    stored = db.rows(  # 3. every message stored once
        data, "SELECT content FROM messages WHERE role = 'user' AND content LIKE 'Ann: m%'"
    )
    counts = Counter(content.split(":", 2)[1].strip() for (content,) in stored)
    assert counts == Counter(f"m{i}" for i in range(len(messages)))


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    messages=st.lists(message, min_size=1, max_size=14).map(lambda m: [*m[:-1], (m[-1][0], True)]),
    window=st.sampled_from([2_048, 4_096, 8_192, 32_768, 200_000]),
    behaviour=st.sampled_from(BEHAVIOURS),
)
def test_every_request_fits_and_nothing_is_lost(
    messages: list[tuple[int, bool]], window: int, behaviour: str
) -> None:
    with tempfile.TemporaryDirectory() as data:
        asyncio.run(run_example(messages, window, behaviour, Path(data)))
