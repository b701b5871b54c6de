"""The alerts' state: which conditions hold, since when, what the operator was told.

:meth:`Alerts.check` runs as a scheduler job at least every ``after_seconds`` (and at
least once a minute). A condition that held for ``after_seconds`` is told once when it
starts, with what it is, since when and what to do, and once when it clears; never more
than one message per condition per ``after_seconds`` (a clearing waits its turn, and a
condition back before that was never gone). A platform that receives nothing has its
receiving connection rebuilt, at most once per ``after_seconds``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from adapters.base import Adapter
from gateway.alerts.conditions import (
    DISK_MIN_FREE_BYTES,
    DISK_MIN_FREE_SHARE,
    BudgetsReached,
    Observation,
    ProviderFailures,
    disk_observation,
    pairing_observation,
    platform_observation,
    undelivered_observation,
)
from gateway.alerts.sending import AlertSender
from gateway.config.alerts import AlertsConfig
from gateway.events import AlertChanged, EventBus, Payload
from gateway.store import ConversationStore, PairingRequest

log = logging.getLogger(__name__)

#: Conditions are looked at least this often, whatever ``after_seconds`` says.
MAX_CHECK_SECONDS = 60.0


@dataclass
class ActiveAlert:
    """A condition that holds (or held, and its clearing is not told yet)."""

    condition: str
    since: float
    what: str
    todo: str
    #: The operator was told it started.
    reported: bool = False
    #: It holds at the last check.
    holding: bool = True


def when(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def lasted(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds / 3600:.1f} h"


class Alerts:
    """Watches the conditions of :mod:`gateway.alerts.conditions` and tells the operator."""

    def __init__(
        self,
        settings: AlertsConfig,
        *,
        data_dir: Path,
        events: EventBus,
        adapters: Mapping[str, Adapter],
        conversation: ConversationStore,
        pairings: Callable[[], Awaitable[list[PairingRequest]]],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.after = settings.after_seconds
        self.data_dir = data_dir
        self.events = events
        self.adapters = adapters
        self.conversation = conversation
        self.pairings = pairings
        self.clock = clock
        #: Internal thresholds (a test trips them): the disk's free share and bytes.
        self.disk_min_free_share = DISK_MIN_FREE_SHARE
        self.disk_min_free_bytes = DISK_MIN_FREE_BYTES
        self.provider = ProviderFailures()
        self.budgets = BudgetsReached()
        self.active: dict[str, ActiveAlert] = {}
        #: When the operator was last told of each condition.
        self._told_at: dict[str, float] = {}
        self._restarted_at: dict[str, float] = {}
        self.sender = AlertSender(settings, adapters)
        self._lock = asyncio.Lock()
        events.subscribe(
            ["llm:request", "budget:reached"], self.observe, name="alerts", inline=True
        )
        for entry in settings.to:
            if entry.partition(":")[0] not in adapters:
                log.warning("alerts.to: %s is on a platform that is not enabled; not told", entry)

    @property
    def check_seconds(self) -> float:
        """How often :meth:`check` runs: twice per ``after_seconds``, once a minute at least."""
        return min(self.after / 2, MAX_CHECK_SECONDS)

    def observe(self, event: str, payload: Payload) -> None:
        now = self.clock()
        if event == "llm:request":
            self.provider.observe(payload, now)
        elif event == "budget:reached":
            self.budgets.observe(payload, now)

    def current(self) -> list[ActiveAlert]:
        """The conditions holding now (told or not yet), oldest first."""
        return sorted((a for a in self.active.values() if a.holding), key=lambda a: a.since)

    async def check(self) -> None:
        """Look at every condition; tell what started and what cleared; rebuild what is deaf."""
        async with self._lock:
            observed = await self._observe()
            now = self.clock()
            for condition, seen in observed.items():
                self._hold(condition, seen, now)
            for condition, alert in list(self.active.items()):
                alert.holding = condition in observed
                if alert.holding:
                    await self._holding(alert, observed[condition], now)
                else:
                    await self._cleared(alert, now)

    def _hold(self, condition: str, seen: Observation, now: float) -> None:
        alert = self.active.get(condition)
        if alert is None:
            self.active[condition] = ActiveAlert(condition, seen.since or now, seen.what, seen.todo)
            return
        alert.what, alert.todo = seen.what, seen.todo
        if seen.since is not None and not alert.reported:  # it may have begun anew meanwhile
            alert.since = seen.since

    async def _holding(self, alert: ActiveAlert, seen: Observation, now: float) -> None:
        long_enough = seen.at_once or now - alert.since >= self.after
        if not long_enough:
            return
        platform = (
            alert.condition.partition(":")[2] if alert.condition.startswith("platform:") else ""
        )
        if platform:
            await self._restart(platform, now)
        if not alert.reported and self._may_tell(alert.condition, now):
            alert.reported = True
            text = (
                f"⚠ nightowl: {alert.what}, since {when(alert.since)}.\nWhat to do: {alert.todo}."
            )
            await self._tell(alert, "started", text, now)

    async def _cleared(self, alert: ActiveAlert, now: float) -> None:
        if not alert.reported:
            del self.active[alert.condition]  # never told: nothing to take back
            return
        if not self._may_tell(alert.condition, now):
            return  # told of it too recently: the clearing waits for the next check
        del self.active[alert.condition]
        text = (
            f"✅ nightowl: resolved: {alert.what} (from {when(alert.since)}, "
            f"{lasted(now - alert.since)})."
        )
        await self._tell(alert, "cleared", text, now)

    def _may_tell(self, condition: str, now: float) -> bool:
        told = self._told_at.get(condition)
        return told is None or now - told >= self.after

    async def _tell(self, alert: ActiveAlert, state: str, text: str, now: float) -> None:
        self._told_at[alert.condition] = now
        log.warning("alert %s %s: %s", alert.condition, state, text.replace("\n", " "))
        self.events.emit(AlertChanged(alert.condition, state, alert.since, text))
        await self.sender.send(alert.condition, state, alert.since, text)

    async def _restart(self, platform: str, now: float) -> None:
        adapter = self.adapters.get(platform)
        last = self._restarted_at.get(platform)
        if adapter is None or (last is not None and now - last < self.after):
            return
        self._restarted_at[platform] = now
        try:
            await adapter.restart_receiving()
        except Exception:  # a failed rebuild is the adapter's to log; the alert stands
            log.exception("rebuilding %s's receiving connection failed", platform)

    async def _observe(self) -> dict[str, Observation]:
        now = self.clock()
        found: dict[str, Observation | None] = {
            "provider": self.provider.observation(),
            "budget": self.budgets.observation(now),
            "disk": await asyncio.to_thread(
                disk_observation,
                self.data_dir,
                self.disk_min_free_share,
                self.disk_min_free_bytes,
            ),
        }
        for platform, adapter in self.adapters.items():
            try:
                status = await adapter.check()
            except Exception:  # a health look must never stop the others
                log.exception("checking %s failed", platform)
                continue
            if status.problem:
                found[f"platform:{platform}"] = platform_observation(
                    platform, status.problem, status.problem_since
                )
        try:
            found["undelivered"] = undelivered_observation(
                len(await self.conversation.pending_deliveries())
            )
            requests = await self.pairings()
            oldest = min((r.created_at for r in requests), default=now)
            found["pairing"] = pairing_observation(len(requests), oldest)
        except Exception:  # the store's trouble is logged where it happens; look again later
            log.exception("alerts: reading the store failed")
            for condition in ("undelivered", "pairing"):  # unknown now: they stand as they were
                if (alert := self.active.get(condition)) is not None and alert.holding:
                    found[condition] = Observation(alert.what, alert.todo)
        return {condition: seen for condition, seen in found.items() if seen is not None}
