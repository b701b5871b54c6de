"""apscheduler in the gateway's event loop, behind the two kinds of job nightowl runs.

Jobs live in memory only: the store is the source of truth (a reminder is a row before it
is a job), so after a restart whoever owns the rows arms their jobs again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

JobFunction = Callable[..., Awaitable[Any]]


class Jobs:
    """An :class:`AsyncIOScheduler` that is either running or not, never half-way."""

    def __init__(self) -> None:
        self._apscheduler: AsyncIOScheduler | None = None

    @property
    def running(self) -> bool:
        return self._apscheduler is not None

    def start(self) -> bool:
        """Start apscheduler; False if it was running already."""
        if self._apscheduler is not None:
            return False
        self._apscheduler = AsyncIOScheduler(timezone=UTC)
        self._apscheduler.start()
        return True

    async def stop(self) -> None:
        """Drop every job and stop; a job already running finishes on its own."""
        scheduler, self._apscheduler = self._apscheduler, None
        if scheduler is None:
            return
        scheduler.remove_all_jobs()
        scheduler.shutdown(wait=False)
        # AsyncIOScheduler.shutdown only queues the real shutdown on the loop (call_soon);
        # one turn of the loop lets it run before the caller closes the store.
        await asyncio.sleep(0)

    def every(self, seconds: float, function: JobFunction, *, job_id: str, name: str) -> None:
        """Run ``function`` every ``seconds``; a run never overlaps the one before it, and
        runs missed while the loop was busy collapse into one."""
        if self._apscheduler is None:
            return
        self._apscheduler.add_job(
            function,
            IntervalTrigger(seconds=seconds, timezone=UTC),
            id=job_id,
            name=name,
            max_instances=1,
            coalesce=True,
        )

    def at(
        self,
        epoch_seconds: float,
        function: JobFunction,
        args: Sequence[Any],
        *,
        job_id: str,
        name: str,
    ) -> None:
        """Run ``function(*args)`` once at ``epoch_seconds`` (real time), replacing a job
        with the same id; it runs however late the loop gets to it."""
        if self._apscheduler is None:
            return
        self._apscheduler.add_job(
            function,
            DateTrigger(run_date=datetime.fromtimestamp(epoch_seconds, UTC)),
            args=list(args),
            id=job_id,
            name=name,
            replace_existing=True,
            misfire_grace_time=None,
        )
