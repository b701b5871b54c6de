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


async def test_forget_numbers_are_the_list_the_person_was_shown(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """/memory showed 1, 2, 3; /forget 1 then /forget 2 removes the second one shown, not
    what the renumbered list has at 2 (deletion is for good)."""
    fake_llm.responder = MemoryModel()
    config = str(write_config(tmp_path, fake_llm))
    for note in ("my server is owlbox", "I use vim", "I live in Lisbon"):  # a turn each
        told = f"remember me: {note}\n"
        code, _, err = await nightowl("chat", "-c", config, stdin=told, cwd=tmp_path)
        assert code == 0, err
    commands = "/memory\n/forget 1\n/forget 2\n/forget 1\n/memory\n"
    code, out, err = await nightowl("chat", "-c", config, stdin=commands, cwd=tmp_path)
    assert code == 0, err
    assert "1. my server is owlbox\n2. I use vim\n3. I live in Lisbon" in out
    assert "Forgot: my server is owlbox" in out and "Forgot: I use vim" in out
    assert "Number 1 is already forgotten" in out
    assert out.rstrip().endswith(
        "1. I live in Lisbon\n\n/forget N removes one; /forget all removes everything about you."
    )
