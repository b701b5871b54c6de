"""Two gateway replicas on one PostgreSQL database, end to end: child processes as a
user runs them, Telegram in webhook mode behind a load balancer (the test), the fake
Bot API and the fake model (docs/design.md#replicas). Every message is stored once and
answered, in order per chat; no session runs two turns at once; a replica killed with
kill -9 loses nothing; reminders go out once."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from pathlib import Path

import asyncpg

from gateway.store import Reminder
from gateway.store.postgres import PostgresStore
from tests.child_process import Spawn
from tests.e2e.replica_stack import (
    FIRST_USER,
    Balancer,
    Replica,
    chat_traffic,
    free_port,
    replica_config,
    start_replica,
)
from tests.fakes.llm_server import FakeLLM, Recorded, Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.waiting import CEILING

USERS = 20
MESSAGES = 30
MARK = re.compile(r"u(\d+) m(\d+)")


def said(user_index: int, m: int) -> str:
    return f"u{user_index} m{m}: hello"


class OneTurnPerChat:
    """The model: answers after a short think, and notes how many turns of one chat it
    was ever inside at once (two replicas running one session would make it 2)."""

    def __init__(self) -> None:
        self.inside: Counter[str] = Counter()
        self.most_at_once = 0

    async def __call__(self, request: Recorded) -> Reply:
        found = MARK.findall(request.last_user_text)
        chat = found[-1][0] if found else "?"
        self.inside[chat] += 1
        self.most_at_once = max(self.most_at_once, self.inside[chat])
        try:
            await asyncio.sleep(0.02)  # the model's latency, so turns overlap
        finally:
            self.inside[chat] -= 1
        return Reply(text=f"echo: {request.last_user_text[-60:]}")


async def start_two(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, dsn: str, spawn: Spawn
) -> list[Replica]:
    replicas = []
    for name in ("a", "b"):
        port = free_port()
        config = replica_config(tmp_path / name, llm, telegram, dsn=dsn, port=port, users=USERS)
        replicas.append(await start_replica(name, config, port, tmp_path, spawn))
    return replicas


async def stored_user_texts(dsn: str) -> dict[int, list[str]]:
    """Per user, the messages stored in their chat, in the conversation's order."""
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch(
            "SELECT s.chat_id, m.content FROM messages m JOIN sessions s ON s.id = m.session_id"
            " WHERE m.role = 'user' ORDER BY s.chat_id, m.seq"
        )
        waiting = await connection.fetchval("SELECT count(*) FROM inbox")
        undelivered = await connection.fetchval(
            "SELECT count(*) FROM messages WHERE pending_delivery = 1"
        )
    finally:
        await connection.close()
    assert waiting == 0 and undelivered == 0
    texts: dict[int, list[str]] = {}
    for row in rows:
        for index, m in MARK.findall(row["content"]):
            texts.setdefault(int(row["chat_id"]), []).append(said(int(index), int(m)))
    return texts


async def everything_answered(telegram: FakeTelegram, dsn: str) -> None:
    """Each chat's last message answered, nothing waiting, no reply unsent."""

    def answered() -> bool:
        last = {f"u{i} m{MESSAGES - 1}" for i in range(USERS)}
        for sent in telegram.sent:
            last.difference_update(m for m in list(last) if m in sent.text)
        return not last

    await telegram.wait_for(answered, within=4 * CEILING)
    async with asyncio.timeout(CEILING):
        while True:  # the last replies were sent; their marks are cleared just after
            try:
                await stored_user_texts(dsn)
                return
            except AssertionError:
                await asyncio.sleep(0.05)  # polling the database: nothing to wait on


def expected() -> dict[int, list[str]]:
    return {FIRST_USER + i: [said(i, m) for m in range(MESSAGES)] for i in range(USERS)}


async def test_two_replicas_answer_every_message_once_and_in_order(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    postgres_dsn: str,
    spawn: Spawn,
) -> None:
    model = OneTurnPerChat()
    fake_llm.responder = model
    replicas = await start_two(tmp_path, fake_llm, telegram, postgres_dsn, spawn)
    async with Balancer(telegram, replicas) as balancer:
        await chat_traffic(balancer, USERS, MESSAGES, text=said)
        await everything_answered(telegram, postgres_dsn)
    shares = Counter(balancer.acknowledged.values())
    assert shares.total() == USERS * MESSAGES and shares["a"] > 0 and shares["b"] > 0
    assert await stored_user_texts(postgres_dsn) == expected()  # once each, in order
    assert model.most_at_once == 1
    replies = Counter((s.chat_id, s.text) for s in telegram.sent)
    assert max(replies.values()) == 1  # no reply sent twice
    assert all(r.alive for r in replicas)


async def test_a_replica_killed_mid_run_loses_nothing(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    postgres_dsn: str,
    spawn: Spawn,
) -> None:
    model = OneTurnPerChat()
    fake_llm.responder = model
    replicas = await start_two(tmp_path, fake_llm, telegram, postgres_dsn, spawn)
    killed = asyncio.Event()
    sent_before_kill = 0

    async def kill_halfway(index: int, m: int) -> None:
        nonlocal sent_before_kill
        if m == MESSAGES // 2 and index == 0 and not killed.is_set():
            await fake_llm.wait_for_requests(1)  # turns are running on both
            replicas[0].chat.process.kill()  # kill -9
            await replicas[0].chat.process.wait()
            sent_before_kill = len(telegram.sent)
            killed.set()
        elif m == MESSAGES // 2:
            await killed.wait()  # everyone's second half goes out after the kill

    async with Balancer(telegram, replicas) as balancer:
        await chat_traffic(balancer, USERS, MESSAGES, text=said, between=kill_halfway)
        await everything_answered(telegram, postgres_dsn)
    assert replicas[0].chat.process.returncode == -9 and replicas[1].alive
    # Every update acknowledged (by either replica) is stored once, in order.
    assert len(balancer.acknowledged) == USERS * MESSAGES
    assert await stored_user_texts(postgres_dsn) == expected()
    assert model.most_at_once == 1
    # A reply went out twice only when its first send was in flight at the kill.
    copies: dict[tuple[int | str, str], list[int]] = {}
    for position, sent in enumerate(telegram.sent):
        copies.setdefault((sent.chat_id, sent.text), []).append(position)
    for (chat, text), positions in copies.items():
        if len(positions) > 1:  # first sent by the killed replica, again by the other
            assert len(positions) == 2, (chat, text, positions)
            assert positions[0] < sent_before_kill <= positions[1], (chat, text, positions)


ARMED = re.compile(r"pending reminder\(s\) armed: ([\d, ]+)")
OUTCOME = re.compile(r"reminder (\d+): (sent already|sent)\b")


def armed_seen_through(text: str) -> bool:
    armed, outcomes = lines_of(text)
    return bool(armed) and armed <= set(outcomes)


def reminder_lines(replica: Replica) -> tuple[set[int], dict[int, list[str]]]:
    return lines_of(replica.chat.err.text)


def lines_of(text: str) -> tuple[set[int], dict[int, list[str]]]:
    """What a replica's log says: the reminders it armed, and what became of each."""
    armed = {int(n) for line in ARMED.findall(text) for n in line.split(",")}
    outcomes: dict[int, list[str]] = {}
    for number, outcome in OUTCOME.findall(text):
        outcomes.setdefault(int(number), []).append(outcome)
    return armed, outcomes


async def test_reminders_go_out_once_with_two_replicas(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    postgres_dsn: str,
    spawn: Spawn,
) -> None:
    replicas = await start_two(tmp_path, fake_llm, telegram, postgres_dsn, spawn)
    # Set while both run (as the tool would on one of them): each replica's sweep arms
    # them within a second, and both fire them at once when they are due.
    now = time.time()
    async with PostgresStore(postgres_dsn) as store:
        for i in range(5):
            user = FIRST_USER + i
            reminder = Reminder(
                f"telegram:{user}", "telegram", str(user), f"r{i}: stand up", now + 5 + i / 4
            )
            await store.scheduling.add_reminder(reminder)

    await telegram.wait_for(lambda: sum("stand up" in s.text for s in telegram.sent) >= 5)
    for replica in replicas:  # each has seen through every reminder it armed
        await replica.chat.err.wait_until(lambda text: armed_seen_through(text))
    sent = sorted(s.text for s in telegram.sent if "stand up" in s.text)
    assert len(sent) == 5 and len(set(sent)) == 5  # each once
    outcomes = [
        o for _, by_id in map(reminder_lines, replicas) for os in by_id.values() for o in os
    ]
    assert outcomes.count("sent") == 5
    armed = [reminder_lines(r)[0] for r in replicas]
    assert armed[0] & armed[1], (armed, [r.chat.err.text[-1500:] for r in replicas])  # the race ran
