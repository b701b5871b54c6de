"""Reminders the agent sets with ``schedule_message`` (docs/design.md#tools).

A reminder is a row before it is a job: the tool stores it, then arms a job for its time.
After a restart :meth:`Reminders.arm_pending` arms every stored one again; those whose
time passed while the gateway was down go out at once, with a note that they are late.
Delivery runs in the session's lane, so a reminder never races a turn: it is sent after
the reply being written, and recorded as an assistant row so the model knows it reminded
(docs/design.md#delivery-guarantee).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from adapters.base import OutboundMessage
from agent.tools import Tool, ToolContext, ToolInputError
from gateway.conversation.lanes import Lanes
from gateway.conversation.sessions import SessionRegistry
from gateway.conversation.turns import TurnRunner
from gateway.scheduling.jobs import Jobs
from gateway.scheduling.reminder_times import (
    check_due,
    describe_delay,
    describe_moment,
    parse_when,
    zone_named,
)
from gateway.store import Reminder, SchedulingStore, SessionOrigin, SessionRecord

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


class Reminders:
    """Sets, arms, fires and delivers reminders for one gateway.

    ``clock`` (epoch seconds) is what "now" means for parsing ``when`` and for deciding
    that a reminder is due or late; apscheduler itself waits in real time. Tests shift it.
    A refused delivery is retried after ``retry_seconds`` × the attempt number.
    """

    def __init__(
        self,
        store: SchedulingStore,
        sessions: SessionRegistry,
        lanes: Lanes,
        runner: TurnRunner,
        jobs: Jobs,
        *,
        retry_seconds: float = 60.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.lanes = lanes
        self.runner = runner
        self.jobs = jobs
        self.retry_seconds = retry_seconds
        self.clock = clock
        self._delivering: set[int] = set()
        #: Reminders with a timer here, or on their way (their ids).
        self._armed: set[int] = set()
        self._failures: dict[int, int] = {}

    # -- setting --------------------------------------------------------------------------

    def tool(self, record: SessionRecord) -> Tool:
        """The ``schedule_message`` tool for one session: reminders go back to its chat."""
        key, platform = record.session_key, record.platform
        chat_id, thread_id = record.chat_id or "", record.thread_id

        async def schedule_message(arguments: dict[str, Any], context: ToolContext) -> str:
            text = reminder_text(arguments)
            zone = zone_named(str(arguments.get("timezone") or context.timezone or "UTC"))
            now = datetime.fromtimestamp(self.clock(), UTC)
            due = parse_when(str(arguments.get("when") or ""), now, zone)
            check_due(due, now, zone)
            if len(await self.store.pending_reminders(key)) >= MAX_PENDING_PER_CHAT:
                raise ToolInputError(
                    f"this chat already has {MAX_PENDING_PER_CHAT} pending reminders"
                )
            reminder = await self.add(
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

    async def add(self, reminder: Reminder) -> Reminder:
        """Store ``reminder`` and arm it; returns it as stored (with its id)."""
        stored = await self.store.add_reminder(reminder)
        log.info("reminder %d for %s due at %.0f", stored.id, stored.session_key, stored.due_at)
        self._arm(stored)
        return stored

    # -- arming and firing ----------------------------------------------------------------

    async def arm_pending(self, *, sweeping: bool = False) -> None:
        """Arm every stored reminder not sent yet; the overdue ones go out at once.

        Arming one again replaces its timer: the sweep (``sweeping``) arms what another
        replica set (docs/design.md#replicas), leaving a failed one to its retry timer."""
        pending = await self.store.pending_reminders()
        new = [reminder.id for reminder in pending if reminder.id not in self._armed]
        for reminder in pending:
            if sweeping and reminder.id in self._failures:
                continue
            self._arm(reminder)
        if new:
            log.info("%d pending reminder(s) armed: %s", len(new), ", ".join(map(str, new[:20])))

    def _arm(self, reminder: Reminder) -> None:
        if not self.jobs.running:
            return  # arm_pending() arms it from the store once the jobs run
        self._armed.add(reminder.id)
        if reminder.due_at <= self.clock():
            self._hand_to_lane(reminder)
            return
        self.jobs.at(
            reminder.due_at,
            self._fire,
            [reminder],
            job_id=f"reminder:{reminder.id}",
            name=f"reminder {reminder.id}",
        )

    async def _fire(self, reminder: Reminder) -> None:
        if self.jobs.running:
            self._hand_to_lane(reminder)

    def _hand_to_lane(self, reminder: Reminder) -> None:
        if reminder.id in self._delivering:
            return
        self._delivering.add(reminder.id)
        future = self.lanes.submit(reminder.session_key, lambda: self._deliver(reminder))
        future.add_done_callback(lambda done: self._delivered(reminder, done))

    def _delivered(self, reminder: Reminder, done: asyncio.Future[Any]) -> None:
        self._delivering.discard(reminder.id)
        self._armed.discard(reminder.id)
        if done.cancelled():
            return
        if done.exception() is not None:
            log.error("reminder %d failed", reminder.id, exc_info=done.exception())

    # -- delivering -----------------------------------------------------------------------

    async def _deliver(self, reminder: Reminder) -> bool:
        """Send it, then mark it sent and record it in the transcript (one transaction)."""
        current = await self.store.get_reminder(reminder.id)
        if current is None or current.sent_at is not None:
            # Forgotten with its chat, or sent already (by another replica, maybe).
            log.info(
                "reminder %d: %s", reminder.id, "forgotten" if current is None else "sent already"
            )
            return False
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
        transcript = await self.sessions.transcript(runtime)
        recorded = await transcript.record_reminder(current.id, text)
        log.info("reminder %d: sent", current.id)
        return recorded

    def _retry_later(self, reminder: Reminder) -> None:
        attempts = self._failures.get(reminder.id, 0) + 1
        self._failures[reminder.id] = attempts
        if (
            not self.jobs.running
            or reminder.platform not in self.runner.adapters
            or attempts > RETRY_ATTEMPTS
        ):
            log.warning("reminder %d not delivered; kept for the next start", reminder.id)
            return
        # Real time, not self.clock(): apscheduler waits in real time.
        self.jobs.at(
            time.time() + self.retry_seconds * attempts,
            self._fire,
            [reminder],
            job_id=f"reminder:{reminder.id}",
            name=f"reminder {reminder.id} (retry {attempts})",
        )


def reminder_text(arguments: dict[str, Any]) -> str:
    """The ``text`` argument, refused to the model when empty or too long."""
    text = str(arguments.get("text") or "").strip()
    if not text:
        raise ToolInputError("'text' is required: what should the reminder say?")
    if len(text) > MAX_TEXT_CHARS:
        raise ToolInputError(f"'text' is too long (at most {MAX_TEXT_CHARS} characters)")
    return text


def reminder_message(reminder: Reminder, now: float) -> str:
    """What the chat receives; a reminder sent well after its time says so."""
    late = now - reminder.due_at
    if late < LATE_AFTER_SECONDS:
        return REMINDER_PREFIX + reminder.text
    return (
        f"{REMINDER_PREFIX}{reminder.text}\n"
        f"(This was due {describe_delay(late)} ago — I was offline then.)"
    )
