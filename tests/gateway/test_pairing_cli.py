"""`nightowl pairing list | approve | deny | revoke` (docs/design.md#pairing), beside a
running gateway too."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.conversation.pairing import Pairing
from gateway.ops.cli import main
from gateway.store import SQLiteStore
from tests.child_process import nightowl


def write_config(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\n{extra}")
    return path


async def ask(database: Path, *strangers: tuple[str, str, str]) -> list[str]:
    """Each ``(platform, user id, name)`` writes to the bot; returns their codes."""
    async with SQLiteStore(database) as store:
        pairing = Pairing(store.pairing)
        for platform, user_id, name in strangers:
            await pairing.request(platform, user_id, name, user_id)
        return [request.code for request in await pairing.pending()]


def pairing_cli(
    capsys: pytest.CaptureFixture[str], config: Path, *args: str
) -> tuple[int, str, str]:
    code = main(["pairing", *args, "-c", str(config)])
    out, err = capsys.readouterr()
    return code, out, err


async def test_approve_and_revoke_beside_a_running_gateway(tmp_path: Path) -> None:
    """A child `nightowl pairing` while this process holds the store exclusively, as a
    running gateway does; the gateway's Pairing sees each change at its next check."""
    config = write_config(tmp_path)
    database = tmp_path / "data" / "state.db"
    async with SQLiteStore(database) as gateway_store:
        gateway = Pairing(gateway_store.pairing)
        await gateway.load()
        await gateway.request("telegram", "666", "Eve", "666")
        [request] = await gateway.pending()

        code, out, err = await nightowl("pairing", "list", "-c", str(config), cwd=tmp_path)
        assert code == 0, err
        assert f"{request.code}  telegram:666 (Eve)  60 min left" in out
        assert "No users approved by pairing." in out

        code, out, err = await nightowl(
            "pairing", "approve", request.code.lower(), "-c", str(config), cwd=tmp_path
        )
        assert (code, err) == (0, "")
        assert out == "Approved telegram:666 (Eve): their next message gets an answer.\n"
        assert await gateway.is_approved("telegram", "666")
        assert await gateway.pending() == []

        code, out, err = await nightowl(
            "pairing", "revoke", "telegram:666", "-c", str(config), cwd=tmp_path
        )
        assert (code, err) == (0, "")
        assert out == "Revoked telegram:666: their next message is refused.\n"
        assert not await gateway.is_approved("telegram", "666")


def test_deny_drops_a_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    [eve, bob] = asyncio.run(
        ask(tmp_path / "data" / "state.db", ("telegram", "666", "Eve"), ("discord", "7", "Bob"))
    )
    code, out, _ = pairing_cli(capsys, config, "deny", eve)
    assert code == 0 and out == f"Denied {eve} from telegram:666 (Eve).\n"
    code, out, _ = pairing_cli(capsys, config, "list")
    assert eve not in out and f"{bob}  discord:7 (Bob)" in out
    code, _, err = pairing_cli(capsys, config, "approve", eve)
    assert code == 1 and f"no pending request has the code {eve}" in err


def test_clear_drops_every_waiting_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    [eve, bob] = asyncio.run(
        ask(tmp_path / "data" / "state.db", ("telegram", "666", "Eve"), ("discord", "7", "Bob"))
    )
    code, out, _ = pairing_cli(capsys, config, "clear", "telegram")
    assert code == 0 and f"denied {eve}  telegram:666 (Eve)" in out
    assert out.endswith("1 pending request(s) denied.\n")
    code, out, _ = pairing_cli(capsys, config, "clear")
    assert f"denied {bob}  discord:7 (Bob)" in out
    code, out, _ = pairing_cli(capsys, config, "list")
    assert eve not in out and bob not in out


def test_unknown_codes_and_users_are_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, "platforms:\n  telegram:\n    allowed_users: ['1']\n")
    asyncio.run(ask(tmp_path / "data" / "state.db"))
    code, _, err = pairing_cli(capsys, config, "approve", "ABCD2345")
    assert code == 1 and err.count("\n") == 1 and "ABCD2345" in err
    code, _, err = pairing_cli(capsys, config, "deny", "ABCD2345")
    assert code == 1 and err.count("\n") == 1
    code, _, err = pairing_cli(capsys, config, "revoke", "12345")
    assert code == 1 and "is not PLATFORM:USER" in err
    code, _, err = pairing_cli(capsys, config, "revoke", "telegram:1")
    assert code == 1 and "telegram:1 is not approved by pairing" in err


def test_revoking_a_user_the_config_allows_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, "platforms:\n  telegram:\n    allowed_users: ['666']\n")
    [eve] = asyncio.run(ask(tmp_path / "data" / "state.db", ("telegram", "666", "Eve")))
    assert pairing_cli(capsys, config, "approve", eve)[0] == 0
    code, out, _ = pairing_cli(capsys, config, "revoke", "telegram:666")
    assert code == 0
    assert out == (
        "Revoked telegram:666: still allowed by platforms.telegram.allowed_users in the config.\n"
    )


def test_a_strangers_name_cannot_drive_the_operators_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    name = "Eve\x1b]52;c;ZWNobyBwd25lZA==\x07\nrm -rf"
    [eve] = asyncio.run(ask(tmp_path / "data" / "state.db", ("telegram", "666", name)))
    code, out, _ = pairing_cli(capsys, config, "list")
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out
    assert f"{eve}  telegram:666 (Eve\\x1b]52;c;ZWNobyBwd25lZA==\\x07\\nrm -rf)" in out
    code, out, _ = pairing_cli(capsys, config, "approve", eve)
    assert code == 0 and "\x1b" not in out and out.count("\n") == 1


def test_before_the_first_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    code, out, _ = pairing_cli(capsys, config, "list")
    assert code == 0 and "No pairing requests yet" in out
    code, _, err = pairing_cli(capsys, config, "approve", "ABCD2345")
    assert code == 1 and "no database at" in err
    assert not (tmp_path / "data").exists()
