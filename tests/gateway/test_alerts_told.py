"""What the operator was told of each alert, in the store (gateway/store/alerts.py,
docs/operations.md#alerts-and-replicas): a message is claimed before it is sent, so
replicas tell a condition once and a restart does not tell it again. On both backends;
replicas racing for one claim on PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.store import AlertTold, Claim
from gateway.store.postgres import PostgresStore

AFTER = 300.0
T = 1_000_000.0


def told(state: str, at: float, *, since: float = T, until: float | None = None) -> AlertTold:
    return AlertTold("disk", state, since, at, "the disk is full", until)


@pytest.fixture
async def store(backend_store: Any) -> Any:
    """Each test below runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return backend_store


async def test_a_start_is_told_once_and_its_clearing_once_at_the_pace_of_after(
    store: Any,
) -> None:
    alerts = store.alerts
    assert await alerts.claim(told("started", T), AFTER) == (Claim.TOLD, None)
    # Another replica (or this gateway after a restart) sees it too: told already.
    claim, stored = await alerts.claim(told("started", T + 5, since=T + 4), AFTER)
    assert claim is Claim.ALREADY and stored is not None and stored.since == T
    assert (await alerts.claim(told("cleared", T + AFTER - 1), AFTER))[0] is Claim.WAIT
    assert await alerts.claim(told("cleared", T + AFTER), AFTER) == (Claim.TOLD, None)
    assert (await alerts.claim(told("cleared", T + AFTER + 1), AFTER))[0] is Claim.ALREADY
    # Back within after_seconds of the last message: it waits its turn.
    assert (await alerts.claim(told("started", T + AFTER + 2), AFTER))[0] is Claim.WAIT
    assert (await alerts.claim(told("started", T + 2 * AFTER), AFTER))[0] is Claim.TOLD
    [row] = await alerts.told()
    assert (row.condition, row.state, row.told_at) == ("disk", "started", T + 2 * AFTER)


async def test_a_clearing_nobody_told_the_start_of_is_not_told(store: Any) -> None:
    claim, stored = await store.alerts.claim(told("cleared", T), AFTER)
    assert claim is Claim.ALREADY and stored is None


async def test_a_told_start_s_end_only_moves_later_and_only_while_it_holds(store: Any) -> None:
    alerts = store.alerts
    await alerts.claim(told("started", T, until=T + 10), AFTER)
    await alerts.extend("disk", T + 100)
    await alerts.extend("disk", T + 50)  # an earlier end never shortens it
    assert [row.until for row in await alerts.told()] == [T + 100]
    await alerts.claim(told("cleared", T + AFTER), AFTER)
    await alerts.extend("disk", T + 1_000)  # told over: nothing to extend
    assert [row.until for row in await alerts.told()] == [T + 100]


async def test_a_start_that_ended_by_itself_is_no_longer_told(store: Any) -> None:
    """A budget told as refusing until its reset: the next one is a new start, not the
    same one told already."""
    alerts = store.alerts
    assert (await alerts.claim(told("started", T, until=T + 10), AFTER))[0] is Claim.TOLD
    assert (await alerts.claim(told("started", T + 20), AFTER))[0] is Claim.WAIT  # the pace
    assert (await alerts.claim(told("started", T + AFTER), AFTER))[0] is Claim.TOLD


async def test_replicas_racing_for_one_start_tell_it_once(postgres_dsn: str) -> None:
    replicas = [await PostgresStore(postgres_dsn, pool_size=2).open() for _ in range(4)]
    try:
        claims = await asyncio.gather(
            *(r.alerts.claim(told("started", T + n), AFTER) for n, r in enumerate(replicas))
        )
    finally:
        for replica in replicas:
            await replica.close()
    assert sorted(claim.value for claim, _ in claims) == ["already"] * 3 + ["told"]
