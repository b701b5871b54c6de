"""What the gateway says at start, and to words that look like commands: a database
damaged in its middle is named in one sentence with what to do; a command that does not
exist gets a sentence instead of reaching the model (docs/design.md#errors,
docs/design.md#commands)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.fakes.llm_server import FakeLLM
from tests.harness import RecordingAdapter, make_config, running_gateway, turns_done


async def test_a_database_damaged_in_its_middle_is_named_at_start(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, fake_llm)
    adapter = RecordingAdapter()
    async with running_gateway(config, adapter) as gateway:
        for n in range(40):  # pages enough that one in the middle holds only rows
            await adapter.say(f"message {n} " + "x" * 2_000)
            await adapter.wait_sent(n + 1)
        await turns_done(gateway)
    path = config.database_path
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")  # the page size, from the file's header
    btree = [n for n in range(1, len(data) // size) if data[n * size] in (0x02, 0x05, 0x0A, 0x0D)]
    middle = btree[len(btree) // 2] * size
    data[middle : middle + 16] = b"\xde\xad" * 8  # a b-tree page's header, mid-file
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR, logger="gateway"):
        async with running_gateway(config, RecordingAdapter()) as gateway:
            assert gateway.database_checked is not None
            await gateway.database_checked
    [line] = [r.getMessage() for r in caplog.records if "is damaged" in r.getMessage()]
    assert line.startswith(f"{path} is damaged (")
    assert "nightowl sessions export" in line and "restore a backup" in line


async def test_a_sound_database_is_not_complained_about(
    tmp_path: Path, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="gateway"):
        async with running_gateway(make_config(tmp_path, fake_llm)) as gateway:
            assert gateway.database_checked is not None
            await gateway.database_checked
    assert "damaged" not in caplog.text


async def test_a_command_that_does_not_exist_gets_a_sentence_not_the_model(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    adapter = RecordingAdapter()
    async with running_gateway(make_config(tmp_path, fake_llm), adapter):
        await adapter.say("/statsu")
        [answer] = await adapter.wait_sent(1)
        await adapter.say("/etc/hosts lists my machines")  # a path, not a command
        await adapter.wait_sent(2)
    assert answer == "There is no /statsu command here. /help lists them."
    assert [r.last_user_text for r in fake_llm.requests] == ["/etc/hosts lists my machines"]
