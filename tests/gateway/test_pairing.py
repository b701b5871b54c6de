"""Pairing (docs/design.md#pairing): codes, their hour, three per platform, approvals seen
by another instance on the same database, revoke, deny, and /pair for the owner only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from adapters.base import InboundMessage
from gateway.config.schema import Config
from gateway.conversation.pairing import (
    CODE_ALPHABET,
    FULL,
    NOT_OWNER,
    Pairing,
)
from gateway.store import SQLiteStore
from gateway.store.postgres import PostgresStore
from tests.harness import RecordingAdapter, make_config, running_gateway

CODE = re.compile(r"\b([" + CODE_ALPHABET + r"]{8})\b")
START = 1_700_000_000.0


class Clock:
    """Epoch seconds the test moves by hand."""

    def __init__(self, now: float = START) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def code_in(text: str) -> str:
    found = CODE.findall(text)
    assert len(found) == 1, text
    return str(found[0])


@pytest.fixture
async def store(backend_store: Any) -> Any:
    """The gateway's store, opened as a running gateway holds it, on each backend."""
    return backend_store


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def pairing(store: SQLiteStore, clock: Clock) -> Pairing:
    loaded = Pairing(store.pairing, clock)
    await loaded.load()
    return loaded


async def test_a_stranger_gets_one_code_of_eight_unambiguous_characters(
    pairing: Pairing, store: SQLiteStore
) -> None:
    text = await pairing.request("telegram", "666", "Eve", "666")
    code = code_in(text)
    assert len(code) == 8 and not set(code) & set("01OIL")
    assert "60 more minutes" in text
    # Writing again gets the same code, not a second request.
    assert code_in(await pairing.request("telegram", "666", "Eve", "666")) == code
    [request] = await pairing.pending()
    assert (request.platform, request.user_id, request.user_name, request.chat_id) == (
        "telegram",
        "666",
        "Eve",
        "666",
    )
    assert not await pairing.is_approved("telegram", "666")


async def test_codes_differ_between_strangers(pairing: Pairing) -> None:
    codes = {code_in(await pairing.request("telegram", str(n), "", str(n))) for n in range(3)}
    assert len(codes) == 3


async def test_a_code_expires_after_an_hour(pairing: Pairing, clock: Clock) -> None:
    first = code_in(await pairing.request("telegram", "666", "Eve", "666"))
    clock.now += 3599
    assert [r.code for r in await pairing.pending()] == [first]
    assert "up to 1 more minute " in await pairing.request("telegram", "666", "Eve", "666")
    clock.now += 1
    assert await pairing.pending() == []
    assert await pairing.approve(first, "cli") is None
    assert not await pairing.is_approved("telegram", "666")
    second = code_in(await pairing.request("telegram", "666", "Eve", "666"))
    assert second != first
    assert await pairing.approve(second, "cli") is not None


async def test_at_most_three_codes_wait_per_platform(pairing: Pairing, clock: Clock) -> None:
    codes = [code_in(await pairing.request("discord", f"s{n}", "", f"c{n}")) for n in range(3)]
    assert await pairing.request("discord", "s3", "", "c3") == FULL
    assert "s3" not in {r.user_id for r in await pairing.pending()}
    # The limit is per platform, and the three can still ask for their code.
    code_in(await pairing.request("telegram", "t1", "", "t1"))
    assert code_in(await pairing.request("discord", "s0", "", "c0")) == codes[0]
    # An answered request makes room; so does an expired one.
    assert await pairing.deny(codes[0])
    code_in(await pairing.request("discord", "s3", "", "c3"))
    assert await pairing.request("discord", "s4", "", "c4") == FULL
    clock.now += 3600
    code_in(await pairing.request("discord", "s4", "", "c4"))


async def test_once_the_places_are_taken_every_waiting_code_ends_within_a_quarter_hour(
    pairing: Pairing, clock: Clock
) -> None:
    """Throwaway accounts cannot hold the three places for an hour."""
    first = await pairing.request("telegram", "s0", "", "c0")
    assert "60 more minutes" in first
    clock.now += 600
    await pairing.request("telegram", "s1", "", "c1")
    third = await pairing.request("telegram", "s2", "", "c2")
    assert "15 more minutes" in third
    assert all(r.expires_at <= clock.now + 900 for r in await pairing.pending())
    clock.now += 900
    assert await pairing.pending() == []
    code_in(await pairing.request("telegram", "s3", "", "c3"))


async def test_a_stranger_who_leaves_and_the_operator_free_the_places(pairing: Pairing) -> None:
    for n in range(3):
        code_in(await pairing.request("telegram", f"s{n}", "", f"c{n}"))
    assert await pairing.request("telegram", "s3", "", "c3") == FULL
    assert await pairing.withdraw("telegram", "s1")  # they blocked the bot
    assert not await pairing.withdraw("telegram", "s1")
    code_in(await pairing.request("telegram", "s3", "", "c3"))
    code_in(await pairing.request("discord", "d0", "", "d0"))
    cleared = await pairing.clear("telegram")
    assert sorted(r.user_id for r in cleared) == ["s0", "s2", "s3"]
    assert [r.user_id for r in await pairing.pending()] == ["d0"]


async def test_an_approval_counts_in_another_instance_on_the_same_database(
    store: SQLiteStore, pairing: Pairing, clock: Clock
) -> None:
    """The running-gateway case: the gateway's Pairing loaded at start; the CLI approves
    through its own connection (opened shared beside the exclusive one)."""
    code = code_in(await pairing.request("telegram", "666", "Eve", "666"))
    assert not await pairing.is_approved("telegram", "666")
    async with _shared(store, clock) as cli:
        user = await cli.approve(f"{code[:4].lower()}-{code[4:].lower()}", "cli")
        assert user is not None and (user.user_name, user.approved_by) == ("Eve", "cli")
    assert await pairing.is_approved("telegram", "666")
    assert not await pairing.is_approved("discord", "666")
    assert await pairing.pending() == []
    [approved] = await pairing.approved()
    assert (approved.platform, approved.user_id) == ("telegram", "666")
    async with _shared(store, clock) as cli:
        assert await cli.revoke("telegram", "666")
    assert not await pairing.is_approved("telegram", "666")


async def test_approvals_survive_a_restart(tmp_path: Path, clock: Clock) -> None:
    async with SQLiteStore(tmp_path / "state.db") as store:
        first = Pairing(store.pairing, clock)
        code = code_in(await first.request("telegram", "666", "Eve", "666"))
        assert await first.approve(code, "telegram:1") is not None
    async with SQLiteStore(tmp_path / "state.db") as store:
        again = Pairing(store.pairing, clock)
        await again.load()
        assert await again.is_approved("telegram", "666")


async def test_revoke_takes_an_approval_back(pairing: Pairing) -> None:
    code = code_in(await pairing.request("telegram", "666", "Eve", "666"))
    await pairing.approve(code, "cli")
    assert await pairing.is_approved("telegram", "666")
    assert await pairing.revoke("telegram", "666")
    assert not await pairing.is_approved("telegram", "666")
    assert await pairing.approved() == []
    assert not await pairing.revoke("telegram", "666")


async def test_deny_drops_the_request_and_its_code(pairing: Pairing) -> None:
    code = code_in(await pairing.request("telegram", "666", "Eve", "666"))
    assert await pairing.deny(code)
    assert await pairing.pending() == []
    assert await pairing.approve(code, "cli") is None
    assert not await pairing.deny(code)
    assert not await pairing.is_approved("telegram", "666")


async def test_a_stranger_leaves_only_the_request_row(store: SQLiteStore, pairing: Pairing) -> None:
    name = "Eve" * 40
    await pairing.request("telegram", "666", name, "666")
    async with store.connection.read() as handle:
        rows = await handle.fetch_all("SELECT user_name FROM pairing_requests")
        assert [tuple(row) for row in rows] == [(name[:64],)]
        for table in ("messages", "inbox", "sessions"):
            [(count,)] = await handle.fetch_all(f"SELECT COUNT(*) FROM {table}")
            assert count == 0


# -- /pair ------------------------------------------------------------------------------------


def owner_config(tmp_path: Path, fake_llm) -> Config:
    return make_config(
        tmp_path,
        fake_llm,
        platforms={"telegram": {"allowed_users": ["1"], "allowed_chats": ["-100", "55"]}},
    )


async def test_pair_approve_works_only_in_an_allowlisted_owners_private_chat(
    tmp_path: Path, fake_llm
) -> None:
    telegram = RecordingAdapter("telegram")
    config = owner_config(tmp_path, fake_llm)
    async with running_gateway(config, telegram) as gateway:
        pairing = gateway.pairing
        code = code_in(await pairing.request("telegram", "666", "Eve", "666"))

        # The owner, in an allowed group: not here.
        await telegram.say(f"/pair approve {code}", chat_id="-100", user_id="1", chat_type="group")
        # Allowed to talk (a private chat on allowed_chats) but not on allowed_users.
        await telegram.say(f"/pair approve {code}", chat_id="55", user_id="55")
        assert await telegram.wait_sent(2) == [NOT_OWNER, NOT_OWNER]
        assert not await pairing.is_approved("telegram", "666")

        await telegram.say("/pair", chat_id="1", user_id="1")
        listing = (await telegram.wait_sent(3))[-1]
        assert code in listing and "telegram:666 (Eve)" in listing
        await telegram.say(f"/pair approve {code}", chat_id="1", user_id="1")
        answer = (await telegram.wait_sent(4))[-1]
        assert answer == "Approved telegram:666 (Eve): their next message gets an answer."
        assert await pairing.is_approved("telegram", "666")
        [user] = await pairing.approved()
        assert user.approved_by == "telegram:1"
    assert fake_llm.requests == []  # commands, never turns


async def test_a_paired_user_is_no_owner(pairing: Pairing) -> None:
    code = code_in(await pairing.request("telegram", "666", "Eve", "666"))
    await pairing.approve(code, "cli")
    stranger = code_in(await pairing.request("telegram", "777", "Mallory", "777"))
    owners = Pairing(pairing.store, pairing.clock, owners={"telegram": ["1"]})

    async def pair(user_id: str, argument: str) -> str:
        private = InboundMessage(platform="telegram", chat_id=user_id, user_id=user_id, text="")
        return await owners.command(private, argument)

    assert await pair("666", f"approve {stranger}") == NOT_OWNER
    assert (await pair("1", "frobnicate")).startswith("Usage: /pair")
    assert (await pair("1", "deny nosuchcode")).startswith(
        "No pending request has the code NOSUCHCODE"
    )
    assert await pair("1", f"deny {stranger}") == "Denied telegram:777 (Mallory)."
    assert await owners.pending() == []
    assert not await owners.is_approved("telegram", "777")


class _shared:
    """A second instance on the same database, opened as ``nightowl pairing`` opens it
    beside a running gateway."""

    def __init__(self, running: Any, clock: Clock) -> None:
        self.store: Any = (
            PostgresStore(running.connection.dsn)
            if isinstance(running, PostgresStore)
            else SQLiteStore(running.path)
        )
        self.clock = clock

    async def __aenter__(self) -> Pairing:
        await self.store.open("shared")
        return Pairing(self.store.pairing, self.clock)

    async def __aexit__(self, *exc: object) -> None:
        await self.store.close()
