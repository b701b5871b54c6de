"""The scheduler: reminders the agent sets (SPEC A1) and idle compression (SPEC C13).

Both run on apscheduler's :class:`AsyncIOScheduler` in the gateway's event loop. The
store is the source of truth — a reminder is a row before it is a job — so apscheduler
keeps its jobs in memory and :meth:`Scheduler.start` arms them again from the store after
a restart; reminders whose time passed while the gateway was down go out at once, with a
note that they are late.

Anything that touches a session's transcript runs in that session's lane, so it never
races a turn: a reminder is delivered after the reply being written, and recorded as an
assistant row (so the model knows it reminded); an idle compression runs only when the
session has no turn in flight and nothing waiting in its inbox.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from adapters.base import OutboundMessage
from agent.tools import Tool, ToolContext, ToolInputError
from gateway.conversation.hygiene import MIN_MESSAGES, measure_tokens
from gateway.conversation.lanes import Lanes
from gateway.conversation.sessions import SessionRegistry
from gateway.conversation.turns import TurnRunner
from gateway.scheduling.reminder_times import (
    check_due,
    describe_delay,
    describe_moment,
    parse_when,
    zone_named,
)
from gateway.store import (
    IdleSession,
    NewMessage,
    Reminder,
    SessionOrigin,
    SessionRecord,
    SQLiteStore,
)

log = logging.getLogger(__name__)

#: A reminder delivered this much after its time says it is late.
LATE_AFTER_SECONDS = 120.0
MAX_TEXT_CHARS = 2000
MAX_PENDING_PER_CHAT = 100
#: A delivery the platform refused is retried this often in-process (then at next start).
RETRY_ATTEMPTS = 3

REMINDER_PREFIX = "⏰ Reminder: "

SCHEDULE_MESSAGE_DESCRIPTION = (
    "Send a message to this chat later, e.g. a reminder the user asked for. "
    "Returns the exact time it was set for."
)
SCHEDULE_MESSAGE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "when": {
            "type": "string",
            "description": (
                "ISO date-time (2025-03-01T07:00), time of day (07:00: today, or tomorrow "
                "if past), or delay ('in 20 minutes', 'in 2 hours', 'in 3 days')"
            ),
        },
        "text": {"type": "string", "description": "What the user should read"},
        "timezone": {
            "type": "string",
            "description": "IANA zone for times without an offset; default: the chat's",
        },
    },
    "required": ["when", "text"],
}


class Scheduler:
    """Reminders and idle compression for one gateway.

    ``clock`` (epoch seconds) is what "now" means for parsing ``when`` and for deciding
    that a reminder is due or late; apscheduler itself waits in real time. Tests shift it.
    """

    def __init__(
        self,
        store: SQLiteStore,
        sessions: SessionRegistry,
        lanes: Lanes,
        runner: TurnRunner,
        *,
        context_length: int,
        idle_after_minutes: float | None = None,
        idle_threshold: float = 0.30,
        idle_scan_seconds: float | None = None,
        retry_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.lanes = lanes
        self.runner = runner
        self.context_length = context_length
        self.idle_after_minutes = idle_after_minutes
        self.idle_threshold = idle_threshold
        self.idle_scan_seconds = idle_scan_seconds or _scan_interval(idle_after_minutes)
        self.retry_seconds = retry_seconds
        self.clock = clock
        self._apscheduler: AsyncIOScheduler | None = None
        self._delivering: set[int] = set()
        self._failures: dict[int, int] = {}

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start apscheduler, arm every pending reminder, begin idle scans if enabled.

        Call it once the adapters run: reminders already due are delivered at once.
        """
        if self._apscheduler is not None:
            return
        self._apscheduler = AsyncIOScheduler(timezone=UTC)
        self._apscheduler.start()
        if self.idle_after_minutes is not None:
            self._apscheduler.add_job(
                self.scan_idle,
                IntervalTrigger(seconds=self.idle_scan_seconds, timezone=UTC),
                id="idle-compression",
                name="idle compression scan",
                max_instances=1,
                coalesce=True,
            )
        self._apscheduler.add_job(
            self.retry_deliveries,
            IntervalTrigger(seconds=self.retry_seconds, timezone=UTC),
            id="delivery-retry",
            name="retry undelivered replies",
            max_instances=1,
            coalesce=True,
        )
        await self.retry_deliveries()  # replies a crash or an outage kept from their chat
        pending = await self.store.pending_reminders()
        for reminder in pending:
            self._arm(reminder)
        if pending:
            log.info("%d pending reminder(s) armed", len(pending))

    async def stop(self) -> None:
        """Fire nothing more. Deliveries already handed to a lane finish with the lane."""
        scheduler, self._apscheduler = self._apscheduler, None
        if scheduler is None:
            return
        scheduler.remove_all_jobs()
        scheduler.shutdown(wait=False)
        # AsyncIOScheduler.shutdown only queues the real shutdown on the loop (call_soon);
        # one turn of the loop lets it run before the caller closes the store.
        await asyncio.sleep(0)

    async def retry_deliveries(self) -> None:
        """Hand every session with undelivered replies to its lane to send them."""
        keys = {p.session_key for p in await self.store.pending_deliveries()}
        for key in sorted(keys):
            if not self.lanes.busy(key):  # a running lane delivers them itself next time
                self.lanes.submit(key, lambda key=key: self.runner.redeliver_pending(key))

    @property
    def running(self) -> bool:
        return self._apscheduler is not None

    # -- reminders ------------------------------------------------------------------------

    def reminder_tool(self, record: SessionRecord) -> Tool:
        """The ``schedule_message`` tool for one session: reminders go back to its chat."""
        key, platform = record.session_key, record.platform
        chat_id, thread_id = record.chat_id or "", record.thread_id

        async def schedule_message(arguments: dict[str, Any], context: ToolContext) -> str:
            text = str(arguments.get("text") or "").strip()
            if not text:
                raise ToolInputError("'text' is required: what should the reminder say?")
            if len(text) > MAX_TEXT_CHARS:
                raise ToolInputError(f"'text' is too long (at most {MAX_TEXT_CHARS} characters)")
            zone = zone_named(str(arguments.get("timezone") or context.timezone or "UTC"))
            now = datetime.fromtimestamp(self.clock(), UTC)
            due = parse_when(str(arguments.get("when") or ""), now, zone)
            check_due(due, now, zone)
            if len(await self.store.pending_reminders(key)) >= MAX_PENDING_PER_CHAT:
                raise ToolInputError(
                    f"this chat already has {MAX_PENDING_PER_CHAT} pending reminders"
                )
            reminder = await self.add_reminder(
                Reminder(key, platform, chat_id, text, due.timestamp(), thread_id=thread_id)
            )
            return (
                f"Reminder #{reminder.id} set for {describe_moment(due, zone)}, "
                f"in {describe_delay((due - now).total_seconds())}. "
                "It will be sent to this chat."
            )

        return Tool(
            name="schedule_message",
            description=SCHEDULE_MESSAGE_DESCRIPTION,
            parameters=SCHEDULE_MESSAGE_PARAMETERS,
            handler=schedule_message,
        )

    async def add_reminder(self, reminder: Reminder) -> Reminder:
        """Store ``reminder`` and arm it; returns it as stored (with its id)."""
        stored = await self.store.add_reminder(reminder)
        log.info("reminder %d for %s due at %.0f", stored.id, stored.session_key, stored.due_at)
        self._arm(stored)
        return stored

    def _arm(self, reminder: Reminder) -> None:
        if self._apscheduler is None:
            return  # start() arms it from the store
        if reminder.due_at <= self.clock():
            self._hand_to_lane(reminder)
            return
        self._apscheduler.add_job(
            self._fire,
            DateTrigger(run_date=datetime.fromtimestamp(reminder.due_at, UTC)),
            args=[reminder],
            id=f"reminder:{reminder.id}",
            name=f"reminder {reminder.id}",
            replace_existing=True,
            misfire_grace_time=None,  # a reminder is never skipped for being late
        )

    async def _fire(self, reminder: Reminder) -> None:
        if self._apscheduler is not None:
            self._hand_to_lane(reminder)

    def _hand_to_lane(self, reminder: Reminder) -> None:
        if reminder.id in self._delivering:
            return
        self._delivering.add(reminder.id)
        future = self.lanes.submit(reminder.session_key, lambda: self._deliver(reminder))
        future.add_done_callback(lambda done: self._delivered(reminder, done))

    def _delivered(self, reminder: Reminder, done: asyncio.Future[Any]) -> None:
        self._delivering.discard(reminder.id)
        if done.cancelled():
            return
        if done.exception() is not None:
            log.error("reminder %d failed", reminder.id, exc_info=done.exception())

    async def _deliver(self, reminder: Reminder) -> bool:
        """Send it, then mark it sent and record it in the transcript (one transaction)."""
        current = await self.store.get_reminder(reminder.id)
        if current is None or current.sent_at is not None:
            return False  # delivered already (or forgotten with its chat)
        text = reminder_message(current, self.clock())
        target = OutboundMessage(
            platform=current.platform,
            chat_id=current.chat_id,
            thread_id=current.thread_id,
            text=text,
        )
        if not await self.runner.deliver(target, text):
            self._retry_later(current)
            return False
        self._failures.pop(current.id, None)
        runtime = await self.sessions.open(
            SessionOrigin(current.session_key, current.platform, current.chat_id, current.thread_id)
        )
        row = {"role": "assistant", "content": text}
        return await self.store.mark_reminder_sent(
            current.id, session_id=runtime.id, row=NewMessage(row, self.sessions.counter.count(row))
        )

    def _retry_later(self, reminder: Reminder) -> None:
        attempts = self._failures.get(reminder.id, 0) + 1
        self._failures[reminder.id] = attempts
        if (
            self._apscheduler is None
            or reminder.platform not in self.runner.adapters
            or attempts > RETRY_ATTEMPTS
        ):
            log.warning("reminder %d not delivered; kept for the next start", reminder.id)
            return
        retry_at = datetime.fromtimestamp(time.time() + self.retry_seconds * attempts, UTC)
        self._apscheduler.add_job(
            self._fire,
            DateTrigger(run_date=retry_at),
            args=[reminder],
            id=f"reminder:{reminder.id}",
            name=f"reminder {reminder.id} (retry {attempts})",
            replace_existing=True,
            misfire_grace_time=None,
        )

    # -- idle compression (SPEC C13) --------------------------------------------------------

    async def scan_idle(self) -> list[str]:
        """Compress every session idle long enough and big enough; returns their keys.

        Sessions are compressed one after another (a night's batch must not flood the
        provider), each in its own lane. The interval job calls this; tests may too.
        """
        if self.idle_after_minutes is None:
            return []
        idle_since = self.clock() - self.idle_after_minutes * 60
        min_tokens = math.ceil(self.idle_threshold * self.context_length)
        compressed = []
        for candidate in await self.store.idle_sessions(idle_since, min_tokens):
            if self.lanes.busy(candidate.session_key):
                continue  # a turn or job is running: the session is not idle after all
            job = self.lanes.submit(candidate.session_key, lambda c=candidate: self._compress(c))
            try:
                if await job:
                    compressed.append(candidate.session_key)
            except Exception:  # one session's failure must not stop the others' compression
                log.exception("idle compression of %s failed", candidate.session_key)
        return compressed

    async def _compress(self, candidate: IdleSession) -> bool:
        key = candidate.session_key
        runtime = await self.sessions.existing(key)
        if runtime is None or runtime.id != candidate.session_id:
            return False  # reset or rotated since the scan
        if await self.store.inbox(key):
            return False  # a message arrived: its turn comes first, and it is not idle
        transcript = await self.sessions.transcript(runtime)
        history = transcript.messages
        reading = measure_tokens(runtime, transcript, transcript.restore_anchor())
        window = runtime.engine.context_length
        if len(history) < MIN_MESSAGES or reading.tokens < self.idle_threshold * window:
            await self.store.mark_idle_compressed(runtime.id)
            return False
        result = await transcript.compress(trigger_source="idle")
        if result.committed or result.commit_status == "skipped":
            # Not after a failure: the engine's own cooldown paces the next attempt.
            await self.store.mark_idle_compressed(runtime.record.id)
        log.info(
            "idle compression of %s: %s (%d → %d tokens)",
            key,
            result.commit_status,
            result.tokens_before,
            result.tokens_after,
        )
        return result.committed


def reminder_message(reminder: Reminder, now: float) -> str:
    """What the chat receives; a reminder sent well after its time says so."""
    late = now - reminder.due_at
    if late < LATE_AFTER_SECONDS:
        return REMINDER_PREFIX + reminder.text
    return (
        f"{REMINDER_PREFIX}{reminder.text}\n"
        f"(This was due {describe_delay(late)} ago — I was offline then.)"
    )


def _scan_interval(idle_after_minutes: float | None) -> float:
    """Every 5 minutes, or more often when sessions count as idle sooner than 10 minutes."""
    if idle_after_minutes is None:
        return 300.0
    return max(30.0, min(300.0, idle_after_minutes * 30))
