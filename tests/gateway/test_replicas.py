"""Replicas on one PostgreSQL database, in one process: each "replica" is its own store
(pool and coordination connection) and its own lanes, as two gateways would have
(docs/design.md#replicas). The end-to-end run with child processes is
tests/e2e/test_replicas.py."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg
import pytest

from gateway.conversation.lanes import Lanes
from gateway.store import InboxEntry
from gateway.store.postgres import PostgresStore
from tests.waiting import CEILING


@dataclass
class Replica:
    """A store and lanes whose drain records what it ran and can be held open."""

    name: str
    store: PostgresStore
    ran: list[str] = field(default_factory=list)
    running: set[str] = field(default_factory=set)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    #: The messages waiting, shared by the pair as their inbox table would be.
    inbox: list[str] = field(default_factory=list)
    announced: defaultdict[str, asyncio.Event] = field(
        default_factory=lambda: defaultdict(asyncio.Event)
    )
    lanes: Lanes = field(init=False)

    def __post_init__(self) -> None:
        self.release.set()
        self.lanes = Lanes(self.drain, self.store.coordination)

    async def drain(self, key: str) -> None:
        self.running.add(key)
        self.started.set()
        try:
            await self.release.wait()
            self.ran.append(key)
            self.inbox.clear()  # a turn takes everything waiting
        finally:
            self.running.discard(key)

    def heard(self, key: str) -> None:
        self.announced[key].set()


@pytest.fixture
async def replicas(postgres_dsn: str) -> AsyncIterator[tuple[Replica, Replica]]:
    pair = []
    inbox: list[str] = []
    for name in ("a", "b"):
        store = await PostgresStore(postgres_dsn, pool_size=2).open()
        replica = Replica(name, store, inbox=inbox)
        await store.coordination.start(replica.heard)
        pair.append(replica)
    yield pair[0], pair[1]
    for replica in pair:
        await replica.lanes.cancel_all()
        await replica.store.close()


async def test_a_session_held_by_one_replica_is_left_to_it(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    a.release.clear()
    a.lanes.notify("telegram:1")
    await asyncio.wait_for(a.started.wait(), CEILING)
    b.lanes.notify("telegram:1")  # a message stored on b: a, the holder, was woken too
    assert await b.lanes.wait_idle(CEILING)
    assert b.ran == [] and "telegram:1" in a.running
    b.lanes.notify("telegram:2")  # another session is b's to run
    assert await b.lanes.wait_idle(CEILING)
    assert b.ran == ["telegram:2"]
    a.release.set()
    assert await a.lanes.wait_idle(CEILING)
    assert a.ran == ["telegram:1"]


async def test_a_job_waits_until_the_holder_lets_go(replicas: tuple[Replica, Replica]) -> None:
    a, b = replicas
    a.release.clear()
    a.lanes.notify("discord:9")
    await asyncio.wait_for(a.started.wait(), CEILING)
    order: list[str] = []

    async def job() -> str:
        order.append("b's job" if "discord:9" not in a.running else "b's job during a's turn")
        return "done"

    tried = asyncio.Event()
    try_hold = b.store.coordination.try_hold

    async def tried_to_hold(key: str) -> bool:  # b's own coordination, watched
        held = await try_hold(key)
        tried.set()
        return held

    b.store.coordination.try_hold = tried_to_hold  # type: ignore[method-assign]
    future = b.lanes.submit("discord:9", job)
    await asyncio.wait_for(tried.wait(), CEILING)  # b asked, and was told a holds it
    assert not future.done()
    a.release.set()
    assert await asyncio.wait_for(future, CEILING) == "done"
    assert order == ["b's job"]


async def test_a_stored_message_is_announced_to_every_replica(
    replicas: tuple[Replica, Replica],
) -> None:
    a, b = replicas
    entry = InboxEntry(
        session_key="telegram:5",
        platform="telegram",
        chat_id="5",
        thread_id=None,
        user_id="7",
        message={"role": "user", "content": "hi"},
        token_count=3,
        addressed=True,
        dedupe_key="telegram:5:1",
    )
    await a.store.conversation.enqueue(entry)

    for replica in (a, b):
        await asyncio.wait_for(replica.announced["telegram:5"].wait(), CEILING)


async def test_a_dead_replicas_sessions_are_free_at_once(
    replicas: tuple[Replica, Replica], postgres_dsn: str
) -> None:
    a, b = replicas
    assert await a.store.coordination.try_hold("telegram:3")
    assert not await b.store.coordination.try_hold("telegram:3")
    # The server ends a's coordination connection, as when a's process is killed.
    admin = await asyncpg.connect(postgres_dsn)
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid, 30000) FROM pg_locks"  # waits for the exit
            " WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
            " AND pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())"
            " AND granted"
        )
    finally:
        await admin.close()
    assert await b.store.coordination.try_hold("telegram:3")


async def test_a_message_left_to_a_holder_that_let_go_is_drained_by_the_next_holder(
    replicas: tuple[Replica, Replica],
) -> None:
    """b holds the session and is letting go; a message arrives and a, not holding it,
    leaves it to b — which had already looked. The next replica to hold the session,
    here for a job, looks at the inbox too."""
    a, b = replicas
    assert await b.store.coordination.try_hold("telegram:8")
    a.inbox.append("telegram:8: are you there?")
    a.lanes.notify("telegram:8")
    assert await a.lanes.wait_idle(CEILING) and a.ran == []
    await b.store.coordination.release("telegram:8")
    job = a.lanes.submit("telegram:8", lambda: asyncio.sleep(0))
    await asyncio.wait_for(job, CEILING)
    assert await a.lanes.wait_idle(CEILING)
    assert a.ran == ["telegram:8"] and a.inbox == []
