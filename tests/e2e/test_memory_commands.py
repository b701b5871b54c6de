"""/memory and /forget on every platform, end to end (docs/design.md#memory-commands):
Telegram and Discord through their real libraries against the fakes, the console as the
real `nightowl chat` process. The model is the fake LLM that calls remember when asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.child_process import nightowl, write_config
from tests.e2e.discord_stack import running_stack
from tests.e2e.telegram_helpers import push_command, telegram_config, telegram_gateway, visible
from tests.fakes.discord_world import DM_CHANNEL_ID
from tests.fakes.llm_server import FakeLLM
from tests.fakes.memory_model import MemoryModel
from tests.fakes.telegram_server import FakeTelegram

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

ANN = 42


async def test_telegram_memory_and_forget(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    fake_llm.responder = MemoryModel()
    async with telegram_gateway(telegram_config(tmp_path, fake_llm, telegram)):
        telegram.push_text(ANN, "remember me: I sleep in on Sundays")
        await telegram.wait_sent(1)
        push_command(telegram, ANN, "/memory")
        push_command(telegram, ANN, "/forget 1")
        push_command(telegram, ANN, "/memory")
        sent = await telegram.wait_sent(4)
    listed, forgot, empty = (visible(m.text) for m in sent[1:])
    assert "About you (shown only here, in our private chat):\n1. I sleep in on Sundays" in listed
    assert forgot == "Forgot: I sleep in on Sundays"
    assert empty == "I don't remember anything here yet."
    registered = {c["command"] for c in telegram.commands[-1]}
    assert {"memory", "forget"} <= registered


async def test_discord_memory_and_forget(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.responder = MemoryModel()
    async with running_stack(tmp_path, fake_llm) as stack:
        fake = stack.fake
        await fake.dispatch_message(DM_CHANNEL_ID, "remember chat: we plan the trip here")
        await fake.wait_for_sent(1)
        await fake.dispatch_interaction("memory", channel_id=DM_CHANNEL_ID)
        await fake.wait_for_sent(2)
        await fake.dispatch_interaction("forget", "1", channel_id=DM_CHANNEL_ID)
        await fake.wait_for_sent(3)
        registered = {c["name"] for c in fake.registered_commands[None]}
    assert "What I remember in this chat:\n1. we plan the trip here" in fake.sent[1].content
    assert fake.sent[2].content == "Forgot: we plan the trip here"
    assert {"memory", "forget"} <= registered


async def test_console_memory_and_forget(tmp_path: Path, fake_llm: FakeLLM) -> None:
    fake_llm.responder = MemoryModel()
    config = str(write_config(tmp_path, fake_llm))
    code, _, err = await nightowl(
        "chat", "-c", config, stdin="remember me: my editor is vim\n", cwd=tmp_path
    )
    assert code == 0, err
    code, out, err = await nightowl("chat", "-c", config, stdin="/memory\n", cwd=tmp_path)
    assert code == 0, err
    assert "1. my editor is vim" in out
    code, out, err = await nightowl("chat", "-c", config, stdin="/forget 1\n", cwd=tmp_path)
    assert code == 0, err
    assert "Forgot: my editor is vim" in out
