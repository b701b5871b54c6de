"""The flush before every compression (docs/design.md#memory-flush), whoever triggers it:
hygiene, the agent's in-loop gates, /compress, idle compression and overflow recovery.

Each scenario plants a fact early, lets its trigger compact the conversation, and checks
that one silent call read the span while its rows were still in the active context, kept
the fact as a chat note, answered nobody — and that a flush that fails or hangs never
stops the compression.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.store import NewMessage, SessionOrigin
from tests import db
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.fakes.memory_model import MemoryModel
from tests.harness import (
    RecordingAdapter,
    is_turn_request,
    make_config,
    memory_block,
    running_gateway,
    turns_done,
)

PLANTED = "fact: the night code is 5521"
TELEMETRY = "memory flush telemetry: "
GROUP: dict[str, Any] = {"chat_id": "-7", "chat_type": "group", "user_name": "Ann"}
IDLE_MINUTES = 30


async def ask(adapter: RecordingAdapter, text: str, **where: Any) -> None:
    count = len(adapter.sent)
    await adapter.say(text, **where)
    await adapter.wait_sent(count + 1)


# -- the triggers: each returns the session key it compacted ----------------------------


async def by_hygiene(gateway: Gateway, adapter: RecordingAdapter, llm: FakeLLM) -> str:
    await ask(adapter, "good evening", **GROUP)
    await adapter.say(PLANTED, addressed=False, **GROUP)
    for i in range(70):  # a night of chatter past 85% of the window
        await adapter.say(f"note {i} " + "n" * 400, addressed=False, **GROUP)
    await turns_done(gateway)
    await ask(adapter, "good morning, what happened?", **GROUP)
    return "telegram:-7"


# The first exchange is the head a first compression keeps: the fact comes after it.


async def in_the_loop(gateway: Gateway, adapter: RecordingAdapter, llm: FakeLLM) -> str:
    await ask(adapter, "hello", chat_id="c")
    await ask(adapter, PLANTED + ". " + "x" * 2_000, chat_id="c")
    # ~250 tokens a message and as much for its echo: a turn's step is smaller than the
    # band between the agent's gate (75%) and hygiene (85%), so one turn starts inside it.
    for i in range(28):
        await ask(adapter, f"more {i} " + "y" * 1_000, chat_id="c")
    return "console:c"


async def by_command(gateway: Gateway, adapter: RecordingAdapter, llm: FakeLLM) -> str:
    await ask(adapter, "hello", chat_id="c")
    await ask(adapter, PLANTED, chat_id="c")
    for i in range(8):
        await ask(adapter, f"more {i} " + "y" * 1_500, chat_id="c")
    await ask(adapter, "/compress", chat_id="c")
    return "console:c"


async def when_idle(gateway: Gateway, adapter: RecordingAdapter, llm: FakeLLM) -> str:
    counter = gateway.counter
    system = {"role": "system", "content": "You are nightowl."}
    record = await gateway.store.conversation.start_session(
        SessionOrigin("console:night", "console", "night"),
        "fake-model",
        NewMessage(system, counter.count(system)),
    )
    rows = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": PLANTED},
    ] + [
        {"role": "user" if i % 2 else "assistant", "content": f"row {i} " + "lorem " * 100}
        for i in range(24)
    ]
    await gateway.store.conversation.commit_turn(
        record.id, [NewMessage(m, counter.count(m)) for m in rows]
    )
    gateway.scheduler.idle.clock = lambda: time.time() + (IDLE_MINUTES + 1) * 60
    assert await gateway.scheduler.idle.scan() == ["console:night"]
    return "console:night"


async def on_overflow(gateway: Gateway, adapter: RecordingAdapter, llm: FakeLLM) -> str:
    llm.context_window = 5_000  # the server's real window, under the 75% the config implies
    await ask(adapter, "hello", chat_id="c")
    await ask(adapter, PLANTED, chat_id="c")
    for i in range(6):  # the server refuses one; the gateway learns its window
        await ask(adapter, f"part {i}: " + "lorem ipsum dolor " * 250, chat_id="c")
    return "console:c"


Trigger = Callable[[Gateway, RecordingAdapter, FakeLLM], Awaitable[str]]
TRIGGERS: dict[str, tuple[Trigger, tuple[str, ...]]] = {
    "hygiene": (by_hygiene, ("gateway_hygiene",)),
    "in-loop": (in_the_loop, ("turn_start_threshold", "pre_api", "post_tool")),
    "/compress": (by_command, ("manual",)),
    "idle": (when_idle, ("idle",)),
    "overflow": (on_overflow, ("overflow",)),
}


def flush_config(tmp_path: Path, llm: FakeLLM, **compression: Any):
    return make_config(
        tmp_path,
        llm,
        model={"context_length": 8_192, "max_output_tokens": 512},
        platforms={"telegram": {"allowed_chats": ["-7"], "allowed_users": ["u1"]}},
        compression={"idle_after_minutes": IDLE_MINUTES, "protect_last_n": 4, **compression},
    )


def telemetry(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(TELEMETRY)]
    return [json.loads(line[len(TELEMETRY) :]) for line in lines]


async def run(
    name: str, tmp_path: Path, llm: FakeLLM, model: MemoryModel, **compression: Any
) -> tuple[str, list[dict[str, Any]]]:
    trigger, _ = TRIGGERS[name]
    llm.responder = model
    adapter = RecordingAdapter("telegram" if name == "hygiene" else "console")
    compressions: list[dict[str, Any]] = []
    async with running_gateway(flush_config(tmp_path, llm, **compression), adapter) as gateway:
        gateway.events.subscribe(["session:compress"], lambda _, p: compressions.append(p))
        key = await trigger(gateway, adapter, llm)
        await turns_done(gateway)
        await gateway.events.drain(5)
    assert not [m.text for m in adapter.sent if "night code" in m.text]  # it answers nobody
    return key, compressions


@pytest.mark.parametrize("name", list(TRIGGERS))
async def test_every_compaction_is_flushed_first(
    name: str, tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    still_active: list[int] = []

    def witness(request: Recorded) -> None:  # what the database holds while it flushes
        still_active.append(
            db.value(
                tmp_path,
                "SELECT count(*) FROM messages WHERE active = 1 AND content LIKE ?",
                f"%{PLANTED}%",
            )
        )

    model = MemoryModel(on_flush=witness)
    key, compressions = await run(name, tmp_path, fake_llm, model)
    _, triggers = TRIGGERS[name]
    committed = [c for c in compressions if c["trigger_source"] in triggers]
    assert committed, compressions
    flushed = [t for t in telemetry(caplog) if t["trigger"] in triggers]
    assert flushed and flushed[0]["status"] == "saved", telemetry(caplog)
    # The first flush read the planted fact while it was still in the active context.
    assert still_active[0] == 1
    assert db.rows(
        tmp_path, "SELECT scope, owner, learned_by FROM memories WHERE text = ?", PLANTED
    ) == [("chat", key, "flush")]
    assert len(model.flushes) == len(compressions)  # once per compression, never more


@pytest.mark.parametrize("name", list(TRIGGERS))
async def test_a_failing_flush_never_stops_the_compaction(
    name: str, tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    model = MemoryModel(flush_reply=Reply(status=500))
    _, compressions = await run(name, tmp_path, fake_llm, model)
    _, triggers = TRIGGERS[name]
    assert [c for c in compressions if c["trigger_source"] in triggers]
    failed = [t for t in telemetry(caplog) if t["trigger"] in triggers]
    assert failed and failed[0]["status"] == "failed" and failed[0]["failure"] == "other"
    assert db.value(tmp_path, "SELECT count(*) FROM memories") == 0


async def test_a_hanging_flush_is_given_up_and_the_compaction_goes_on(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    model = MemoryModel(flush_reply=Reply(hang=True))
    # The flush waits no longer than a summary may take (here 1 s).
    _, compressions = await run("/compress", tmp_path, fake_llm, model, context_timeout_seconds=1)
    assert [c["trigger_source"] for c in compressions] == ["manual"]
    [flushed] = telemetry(caplog)
    assert flushed["status"] == "timeout" and flushed["trigger"] == "manual"
    assert "5521" not in json.dumps(flushed)  # telemetry never carries content


async def test_what_hygiene_flushed_is_in_the_same_turns_prompt(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    await run("hygiene", tmp_path, fake_llm, MemoryModel(lossy=True))
    morning = [r for r in fake_llm.requests if is_turn_request(r)][-1]
    assert "good morning" in morning.last_user_text
    assert PLANTED in (memory_block(morning) or "")  # the summary lost it; memory did not
