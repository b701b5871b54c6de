"""The alerts' state: which conditions hold, since when, what the operator was told.

:meth:`Alerts.check` runs as a scheduler job at least every ``after_seconds`` (and at
least once a minute). A condition that held for ``after_seconds`` is told once when it
starts, with what it is, since when and what to do, and once when it clears; never more
than one message per condition per ``after_seconds`` (a clearing waits its turn, and a
condition back before that was never gone). A platform that receives nothing has its
receiving connection rebuilt, at most once per ``after_seconds``.

What was told is kept in the store (:class:`~gateway.store.protocols.AlertStore`) and
each message is claimed there before it is sent, so replicas on one database tell a
condition once, and a gateway that restarts does not tell again what it told before:
it takes up the conditions it had told and tells their clearing when it comes
(docs/operations.md#alerts-and-replicas). When the store cannot be written (a full
disk), the alert is told anyway, this process's own memory keeping the pace.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from adapters.base import Adapter
from gateway.alerts.conditions import (
    BOT_MONTHLY_WHATS,
    DISK_MIN_FREE_BYTES,
    DISK_MIN_FREE_SHARE,
    MODEL_SERVER_WHAT,
    REPLIES,
    USES,
    BudgetsReached,
    ModelServer,
    NoAnswer,
    Observation,
    ProviderFailures,
    backup_observation,
    disk_observation,
    pairing_observation,
    platform_observation,
    undelivered_observation,
)
from gateway.alerts.sending import UNSENT_FILE, AlertSender
from gateway.config.alerts import AlertsConfig, alert_target
from gateway.events import AlertChanged, EventBus, Payload
from gateway.store import AlertStore, AlertTold, Claim, ConversationStore, PairingRequest
from nightowl_errors import redact

log = logging.getLogger(__name__)

#: Conditions are looked at least this often, whatever ``after_seconds`` says.
MAX_CHECK_SECONDS = 60.0
#: Conditions of the shared database, told once for every replica of it; the others
#: (the model's calls, the disk, a platform's connection: what one process sees) are
#: each host's own, stored as ``<condition>@<host>``.
SHARED_CONDITIONS = frozenset({"undelivered", "pairing", "budget"})


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
    #: When it ends by itself (a budget's reset), if it does.
    until: float | None = None
    #: Taken up from the store at start, told before a restart and not seen since.
    taken_up: bool = False
    #: Its row in the store (a taken-up one keeps the row it came from).
    key: str = ""
    #: Told while the store could not keep it: its clearing is told whatever the store says.
    unrecorded: bool = False
    #: The ``until`` the store holds for it (raised when a later end joins).
    stored_until: float | None = None


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
        told: AlertStore,
        host: str | None = None,
        secrets: Sequence[str] = (),
        model_server: ModelServer | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``told``: where what was told is kept; ``host``: this host's name when replicas
        share the database (None: this gateway is the only one); ``secrets``: what no
        alert may say (a server's error can quote a URL with its password);
        ``model_server``: the main model's own server, looked at until the first reply
        is asked of it (a self-hosted one; None: a hosted API)."""
        self.settings = settings
        self.after = settings.after_seconds
        self.data_dir = data_dir
        self.events = events
        self.adapters = adapters
        self.conversation = conversation
        self.pairings = pairings
        self.told = told
        self.host = host
        self.secrets = list(secrets)
        self.model_server = model_server
        self.clock = clock
        #: Internal thresholds (a test trips them): the disk's free share and bytes.
        self.disk_min_free_share = DISK_MIN_FREE_SHARE
        self.disk_min_free_bytes = DISK_MIN_FREE_BYTES
        self.uses = {
            condition: ProviderFailures(condition, kinds, per_model=per_model)
            for condition, (kinds, per_model) in USES.items()
        }
        self.budgets = BudgetsReached()
        self.active: dict[str, ActiveAlert] = {}
        #: When the operator was last told of each condition (when the store cannot say).
        self._told_at: dict[str, float] = {}
        self._taken_up = False
        self._restarted_at: dict[str, float] = {}
        self.sender = AlertSender(
            settings, adapters, clock=lambda: self.clock(), kept=data_dir / UNSENT_FILE
        )
        self._lock = asyncio.Lock()
        events.subscribe(
            ["llm:request", "budget:reached"], self.observe, name="alerts", inline=True
        )
        for entry in settings.to:
            if alert_target(entry)[0] not in adapters:
                log.warning("alerts.to: %s is on a platform that is not enabled; not told", entry)

    @property
    def check_seconds(self) -> float:
        """How often :meth:`check` runs: twice per ``after_seconds``, once a minute at least."""
        return min(self.after / 2, MAX_CHECK_SECONDS)

    def observe(self, event: str, payload: Payload) -> None:
        now = self.clock()
        if event == "llm:request":
            for use in self.uses.values():
                use.observe(payload, now)
        elif event == "budget:reached":
            self.budgets.observe(payload, now)

    def budgets_refusing(self) -> list[tuple[str, str, float]]:
        """(budget, subject, resets at) of each budget refusing calls now."""
        refusing = self.budgets.refusing_at(self.clock()).items()
        return [(budget, subject, at) for (budget, subject), at in refusing]

    def current(self) -> list[ActiveAlert]:
        """The conditions holding now (told or not yet), oldest first."""
        return sorted((a for a in self.active.values() if a.holding), key=lambda a: a.since)

    async def check(self) -> None:
        """Look at every condition; tell what started and what cleared; rebuild what is deaf."""
        async with self._lock:
            if not self._taken_up and self.sender.has_recipients:  # else nothing was claimed
                await self._take_up()
            await self.sender.retry()  # what could not be sent before goes first
            observed = await self._observe()
            now = self.clock()
            for condition, seen in observed.items():
                self._hold(condition, seen, now)
            for condition, alert in list(self.active.items()):
                alert.holding = condition in observed or self._unknown(alert, now)
                if condition in observed:
                    await self._holding(alert, observed[condition], now)
                elif not alert.holding:
                    await self._cleared(alert, now)

    def _hold(self, condition: str, seen: Observation, now: float) -> None:
        seen = replace(seen, what=redact(seen.what, self.secrets))
        alert = self.active.get(condition)
        if alert is None:
            self.active[condition] = ActiveAlert(
                condition, seen.since or now, seen.what, seen.todo, until=seen.until
            )
            return
        alert.what, alert.todo, alert.until = seen.what, seen.todo, seen.until
        alert.taken_up = False
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
        if alert.reported:
            await self._extend(alert)
            return
        alert.stored_until = alert.until
        claim = await self._claim(alert, "started", now)
        if claim is Claim.ALREADY:  # told by another replica, or before a restart
            alert.reported = True
        elif claim is Claim.TOLD:
            alert.reported = True
            text = (
                f"⚠ nightowl: {alert.what}, since {when(alert.since)}.\nWhat to do: {alert.todo}."
            )
            await self._tell(alert, "started", text, now)

    async def _extend(self, alert: ActiveAlert) -> None:
        """A told start's later end into the store (a monthly budget joined a daily one):
        else a restart after the earlier end would take the start as over by itself."""
        until = alert.until
        if until is None or until <= (alert.stored_until or until):
            return
        if not self.sender.has_recipients:  # nothing was claimed, so nothing to move
            return
        try:
            await self.told.extend(self._key(alert), until)
        except Exception:  # the store's trouble is logged where it happens; tried again
            log.exception("alerts: the store cannot keep when %s ends", alert.condition)
            return
        alert.stored_until = until

    async def _cleared(self, alert: ActiveAlert, now: float) -> None:
        if not alert.reported:
            del self.active[alert.condition]  # never told: nothing to take back
            return
        claim = await self._claim(alert, "cleared", now)
        if claim is Claim.WAIT:
            return  # told of it too recently: the clearing waits for the next check
        del self.active[alert.condition]
        if claim is Claim.TOLD:  # else another replica told it
            text = (
                f"✅ nightowl: resolved: {alert.what} (from {when(alert.since)}, "
                f"{lasted(now - alert.since)})."
            )
            await self._tell(alert, "cleared", text, now)

    def _key(self, alert: ActiveAlert) -> str:
        """The alert's row in the store: a host's own conditions carry its name."""
        if alert.key:
            return alert.key
        if self.host is None or alert.condition in SHARED_CONDITIONS:
            return alert.condition
        return f"{alert.condition}@{self.host}"

    async def _claim(self, alert: ActiveAlert, state: str, now: float) -> Claim:
        """Whether this process tells ``state`` now (an ``ALREADY`` start is taken up
        with its first sighting, for the clearing's message)."""
        if not self.sender.has_recipients:  # nobody to tell: the log and events only
            return self._paced(alert, now)
        until = alert.until if state == "started" else None
        told = AlertTold(self._key(alert), state, alert.since, now, alert.what, until)
        try:
            claim, stored = await self.told.claim(told, self.after)
        except Exception:  # a full disk must still be told: this process keeps the pace
            log.exception("alerts: the store cannot keep what was told; telling anyway")
            alert.unrecorded = alert.unrecorded or state == "started"
            return self._paced(alert, now)
        if claim is Claim.ALREADY and state == "cleared" and alert.unrecorded:
            return Claim.TOLD  # its start never reached the store: nobody else told this
        if claim is Claim.ALREADY and stored is not None and state == "started":
            alert.since = stored.since
        return claim

    def _paced(self, alert: ActiveAlert, now: float) -> Claim:
        """This process's own pace: one message per condition per ``after_seconds``."""
        told_at = self._told_at.get(alert.condition)
        return Claim.TOLD if told_at is None or now - told_at >= self.after else Claim.WAIT

    async def _take_up(self) -> None:
        """The conditions told as started before this gateway (re)started, in its share
        (all of them for the only gateway; the shared ones and this host's for a
        replica): each stands until a look says it is gone, then its clearing is told
        (docs/operations.md#alerts-and-replicas)."""
        try:
            rows = await self.told.told()
        except Exception:  # looked at again at the next check
            log.exception("alerts: reading what was told failed")
            return
        self._taken_up = True
        for row in rows:
            condition, _, host = row.condition.partition("@")
            mine = self.host is None or not host or host == self.host
            if row.state != "started" or not mine:
                continue
            if condition not in self.active:
                self.active[condition] = ActiveAlert(
                    condition, row.since, row.what, "", reported=True, until=row.until,
                    taken_up=True, key=row.condition, stored_until=row.until,
                )  # fmt: skip

    async def _tell(self, alert: ActiveAlert, state: str, text: str, now: float) -> None:
        self._told_at[alert.condition] = now
        log.warning("alert %s %s: %s", alert.condition, state, text.replace("\n", " "))
        sent = self.sender.has_recipients
        self.events.emit(AlertChanged(alert.condition, state, alert.since, text, sent))
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
            **{condition: use.observation() for condition, use in self.uses.items()},
            "budget": self.budgets.observation(now),
        }
        found["disk"], found["backup"] = await asyncio.to_thread(self._look_at_files)
        if (server := self._model_server_to_look_at()) is not None:
            # No reply asked yet (a quiet night after a reboot that started nightowl
            # before its model server), or every reply since failed to reach it: whether
            # anything listens where the calls will go.
            told = True
            try:
                looked = await server.observation()
            except NoAnswer:  # too slow to say either way
                looked, told = self._as_it_stood(REPLIES), False
            except Exception:  # a look must never stop the others
                log.exception("looking at the model server failed")
                looked, told = self._as_it_stood(REPLIES), False
            if not self.uses[REPLIES].seen:
                found[REPLIES] = looked
            elif told and looked is None:  # back: the calls that could not reach it have
                self.uses[REPLIES].failing.clear()  # ended, told before anyone writes
                found[REPLIES] = None
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
            for condition in ("undelivered", "pairing"):
                found[condition] = self._as_it_stood(condition)
        return {condition: seen for condition, seen in found.items() if seen is not None}

    def _as_it_stood(self, condition: str) -> Observation | None:
        """A condition no look could tell now: holding if it held, else not."""
        alert = self.active.get(condition)
        return Observation(alert.what, alert.todo) if alert is not None and alert.holding else None

    def _look_at_files(self) -> tuple[Observation | None, Observation | None]:
        """The disk's room and the last backup's outcome, off the event loop."""
        disk = disk_observation(self.data_dir, self.disk_min_free_share, self.disk_min_free_bytes)
        return disk, backup_observation(self.data_dir, self.clock())

    def _model_server_to_look_at(self) -> ModelServer | None:
        """The local model server is looked at, not waited for: until its first reply,
        and while every reply since fails to reach it."""
        replies = self.uses[REPLIES]
        return self.model_server if not replies.seen or replies.unreachable else None

    def _unknown(self, alert: ActiveAlert, now: float) -> bool:
        """A condition taken up from the store that no look can confirm yet: a model's
        failures until this gateway's first call of that use; a budget until its reset,
        the bot's monthly one also until a reply's call goes through (raised and
        restarted, as its alert advises)."""
        if not alert.taken_up:
            return False
        if alert.condition == "budget":
            lifted = alert.what in BOT_MONTHLY_WHATS and self.uses[REPLIES].seen
            return alert.until is not None and alert.until > now and not lifted
        if alert.what.startswith(MODEL_SERVER_WHAT) and self._model_server_to_look_at():
            return False  # what the look did not see again has cleared
        use = self.uses.get(alert.condition)
        return use is not None and not use.seen
