"""Per-session lanes (docs/design.md#lanes): one thing at a time per session, sessions in parallel.

A lane is a task that runs its session's jobs (a ``/compress``, a reminder) and drains its
inbox, and exits when nothing is left. A message arriving while the lane works only
marks it dirty, so the lane takes it next — together with anything else that queued up
meanwhile — in arrival order. Nothing interrupts or cancels a turn in progress.

With replicas on one database a lane runs only while its replica holds the session
(docs/design.md#replicas): it tries once for messages (the holder was woken by them too)
and keeps trying for jobs (a command or a reminder this replica must run itself).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.cost.payer import PAYER, Payer
from gateway.logs import SESSION_KEY
from gateway.store.coordination import Coordination, OneProcess

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[Any]]

#: Between attempts to hold a session another replica holds, for a job (seconds).
HOLD_RETRY = (0.05, 0.1, 0.2, 0.5, 1.0)
#: Turns that run at once, all sessions together (docs/design.md#memory-footprint): a
#: thousand chats talking at once keep the memory of this many turns in flight; the rest
#: wait stored in their inboxes, each lane still one thing at a time, in order. Commands
#: and other lane jobs are not counted.
TURNS_AT_ONCE = 64


class Lanes:
    def __init__(
        self,
        drain: Callable[[str], Awaitable[None]],
        coordination: Coordination | None = None,
        *,
        on_hold: Callable[[str], None] | None = None,
        turns_at_once: int | None = None,
    ) -> None:
        self._drain = drain
        self._turns = asyncio.Semaphore(turns_at_once or TURNS_AT_ONCE)
        self.coordination: Coordination = coordination or OneProcess()
        #: Called once a shared session is held: what this replica kept of it may be old.
        self._on_hold = on_hold
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._jobs: dict[str, deque[tuple[Job, asyncio.Future[Any]]]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        #: Set when the gateway stops taking updates: no new lane starts for a message.
        self.closing = False

    def notify(self, key: str) -> None:
        """Something is waiting in ``key``'s inbox. While the gateway stops
        (:attr:`closing`) only a lane still running takes it; the rest waits, stored, for
        another replica or the next start."""
        if self.closing and key not in self._tasks:
            return
        self._dirty.add(key)
        self._ensure_running(key)

    def submit(self, key: str, job: Job) -> asyncio.Future[Any]:
        """Run ``job`` in ``key``'s lane, after the turn in progress; returns its future."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._jobs.setdefault(key, deque()).append((job, future))
        self._ensure_running(key)
        return future

    def busy(self, key: str) -> bool:
        return key in self._tasks

    async def finished(self, key: str) -> None:
        """Return once ``key``'s lane has nothing left (at once when it is not running)."""
        while (task := self._tasks.get(key)) is not None and task is not asyncio.current_task():
            await asyncio.wait({task})

    @property
    def active(self) -> int:
        return len(self._tasks)

    def _ensure_running(self, key: str) -> None:
        if key not in self._tasks:
            self._idle.clear()
            loop = asyncio.get_running_loop()
            self._tasks[key] = loop.create_task(self._run(key), name=f"lane:{key}")

    async def _run(self, key: str) -> None:
        SESSION_KEY.set(key)  # every log line of this lane, hooks it starts included
        PAYER.set(Payer(key))  # every model call of this lane is this chat's (docs/cost.md)
        finished = False
        try:
            if await self._hold(key):
                try:
                    await self._work(key)
                finally:
                    await self.coordination.release(key)
            finished = True
        finally:
            del self._tasks[key]
            if finished and (self._jobs.get(key) or key in self._dirty):
                self._ensure_running(key)  # arrived while the hold was let go
            else:
                for _, future in self._jobs.pop(key, ()):
                    future.cancel()  # the lane was cancelled: nobody waits forever on its jobs
            if not self._tasks:
                self._idle.set()

    async def _work(self, key: str) -> None:
        while True:
            if not self.coordination.holds(key):
                # The hold went with a broken connection: another replica may take the
                # session now. What is left here waits for the hold again.
                log.warning("lane %s: the session is no longer held; pausing it", key)
                return
            jobs = self._jobs.get(key)
            if jobs:
                job, future = jobs.popleft()
                await _settle(future, job)
            elif key in self._dirty:
                try:
                    async with self._turns:
                        # Taken while waiting for a turn's slot, too: one drain reads all.
                        self._dirty.discard(key)
                        await self._drain(key)
                except Exception:  # one failed turn must not stop its lane for good
                    log.exception("lane %s: turn failed", key)
            else:
                return

    async def _hold(self, key: str) -> bool:
        """Hold the session (always, with one process). Messages alone are left to the
        replica holding it; a job waits for its turn."""
        coordination = self.coordination
        if not coordination.shared:
            return True
        attempt = 0
        while not await coordination.try_hold(key):
            if not self._jobs.get(key):
                self._dirty.discard(key)
                return False
            await asyncio.sleep(HOLD_RETRY[min(attempt, len(HOLD_RETRY) - 1)])
            attempt += 1
        # Messages announced while another replica held it were left to that one, which
        # may have let go before it saw them: look at the inbox once (one read if empty).
        self._dirty.add(key)
        if self._on_hold is not None:
            self._on_hold(key)
        return True

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no lane is running; False if ``timeout`` passed first."""
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def cancel_all(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _settle(future: asyncio.Future[Any], job: Job) -> None:
    try:
        result = await job()
    except Exception as exc:  # handed to whoever awaits the future
        if not future.done():
            future.set_exception(exc)
        return
    if not future.done():
        future.set_result(result)
