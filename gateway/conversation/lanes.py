"""Per-session lanes (docs/design.md#lanes): one thing at a time per session, sessions in parallel.

A lane is a task that runs its session's jobs (a ``/compress``, a reminder) and drains its
inbox, and exits when nothing is left. A message arriving while the lane works only
marks it dirty, so the lane takes it next — together with anything else that queued up
meanwhile — in arrival order. Nothing interrupts or cancels a turn in progress.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from gateway.logs import SESSION_KEY

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[Any]]


class Lanes:
    def __init__(self, drain: Callable[[str], Awaitable[None]]) -> None:
        self._drain = drain
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._jobs: dict[str, deque[tuple[Job, asyncio.Future[Any]]]] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    def notify(self, key: str) -> None:
        """Something is waiting in ``key``'s inbox."""
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
        try:
            while True:
                jobs = self._jobs.get(key)
                if jobs:
                    job, future = jobs.popleft()
                    await _settle(future, job)
                elif key in self._dirty:
                    self._dirty.discard(key)
                    try:
                        await self._drain(key)
                    except Exception:  # one failed turn must not stop its lane for good
                        log.exception("lane %s: turn failed", key)
                else:
                    return
        finally:
            del self._tasks[key]
            for _, future in self._jobs.pop(key, ()):
                future.cancel()  # the lane was cancelled: nobody waits forever on its jobs
            if not self._tasks:
                self._idle.set()

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
