"""What runs on a clock, started and stopped together: reminders the agent set
(:mod:`gateway.scheduling.reminders`), idle compression (:mod:`gateway.scheduling.idle`),
the periodic retry of replies a platform did not take
(docs/design.md#delivery-guarantee) and the alerts' checks (docs/operations.md#alerts).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from functools import partial

from agent.tools import Tool
from gateway.conversation.lanes import Lanes
from gateway.conversation.sessions import SessionRegistry
from gateway.conversation.turns import TurnRunner
from gateway.scheduling.idle import IdleCompression
from gateway.scheduling.jobs import Jobs
from gateway.scheduling.reminders import Reminders
from gateway.store import SEEN_KEYS_SECONDS, ConversationStore, SchedulingStore, SessionRecord

#: How often old dedupe keys are forgotten.
PRUNE_SEEN_EVERY_SECONDS = 6 * 3600.0


class Scheduler:
    """The gateway's jobs: :attr:`reminders`, :attr:`idle` compression, delivery retry.

    ``window`` says the main model's window now (``Gateway.current_window``); ``clock``
    (epoch seconds) is what "now" means to reminders and idle compression (tests shift
    ``scheduler.reminders.clock`` / ``scheduler.idle.clock``).
    """

    def __init__(
        self,
        store: SchedulingStore,
        conversation: ConversationStore,
        sessions: SessionRegistry,
        lanes: Lanes,
        runner: TurnRunner,
        *,
        window: Callable[[], int],
        idle_after_minutes: float | None = None,
        idle_threshold: float = 0.30,
        idle_scan_seconds: float | None = None,
        retry_seconds: float = 60.0,
        sweep_seconds: float | None = None,
        alert_check: Callable[[], Awaitable[None]] | None = None,
        alert_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.conversation = conversation
        self.lanes = lanes
        self.runner = runner
        self.retry_seconds = retry_seconds
        #: With replicas: how often to pick up work nobody holds (None: one process).
        self.sweep_seconds = sweep_seconds
        #: The alerts' look at their conditions (docs/operations.md#alerts), and how often.
        self.alert_check = alert_check
        self.alert_seconds = alert_seconds
        self.clock = clock
        self.jobs = Jobs()
        self.reminders = Reminders(
            store, sessions, lanes, runner, self.jobs, retry_seconds=retry_seconds, clock=clock
        )
        self.idle = IdleCompression(
            store,
            conversation,
            sessions,
            lanes,
            window=window,
            after_minutes=idle_after_minutes,
            threshold=idle_threshold,
            clock=clock,
        )
        self.idle_scan_seconds = idle_scan_seconds or self.idle.scan_seconds

    async def start(self) -> None:
        """Start the jobs, send what earlier outages kept back, arm every pending reminder.

        Call it once the adapters run: replies and reminders already due go out at once.
        """
        if not self.jobs.start():
            return
        if self.idle.enabled:
            self.jobs.every(
                self.idle_scan_seconds,
                self.idle.scan,
                job_id="idle-compression",
                name="idle compression scan",
            )
        self.jobs.every(
            self.retry_seconds,
            self.retry_deliveries,
            job_id="delivery-retry",
            name="retry undelivered replies",
        )
        if self.sweep_seconds is not None:
            self.jobs.every(
                self.sweep_seconds, self.sweep, job_id="sweep", name="work nobody holds"
            )
        if self.alert_check is not None:
            self.jobs.every(
                self.alert_seconds, self.alert_check, job_id="alerts", name="alert conditions"
            )
        self.jobs.every(
            PRUNE_SEEN_EVERY_SECONDS,
            self.prune_seen,
            job_id="prune-seen",
            name="forget old dedupe keys",
        )
        await self.retry_deliveries()  # replies a crash or an outage kept from their chat
        await self.reminders.arm_pending()

    async def stop(self) -> None:
        """Fire nothing more. Deliveries already handed to a lane finish with the lane."""
        await self.jobs.stop()

    async def retry_deliveries(self) -> None:
        """Hand every session with undelivered replies to its lane to send them."""
        keys = {p.session_key for p in await self.conversation.pending_deliveries()}
        for key in sorted(keys):
            if not self.lanes.busy(key):  # a running lane delivers them itself next time
                self.lanes.submit(key, partial(self.runner.redeliver_pending, key))

    async def sweep(self) -> None:
        """With replicas (docs/design.md#replicas): take up what no replica is doing —
        messages and replies a dead replica left, reminders another one set. A session
        another replica holds is left to it (its lane gives up at once)."""
        for key in await self.conversation.session_keys_with_inbox():
            if not self.lanes.busy(key):
                self.lanes.notify(key)
        await self.retry_deliveries()
        await self.reminders.arm_pending(sweeping=True)

    async def prune_seen(self) -> int:
        """Forget dedupe keys past their use (platforms redeliver within a day), so the
        table a stranger's messages also write to stays small on a gateway that runs for
        months without a restart."""
        return await self.conversation.forget_seen(self.clock() - SEEN_KEYS_SECONDS)

    def reminder_tool(self, record: SessionRecord) -> Tool:
        """The ``schedule_message`` tool for one session: reminders go back to its chat."""
        return self.reminders.tool(record)
