"""What each alert watches, as an :class:`Observation` while it holds.

Each probe looks once and says what is wrong now; how long it has been so and whether
to tell anyone is the monitor's (:mod:`gateway.alerts.monitor`). Conditions:

- ``provider``: every reply's model call failed since a moment (from ``llm:request``),
  or, before the first reply is asked, nothing listens at a local model server's address
  or the server there does not have the model;
- ``provider:summaries``: the same for summaries and memory notes;
- ``platform:<name>``: a platform's adapter receives nothing (:meth:`Adapter.check`);
- ``undelivered``: replies stored but not accepted by their platform;
- ``disk``: little room left where the data dir is;
- ``pairing``: strangers' pairing requests waiting for an owner;
- ``budget``: a budget refusing calls until it resets (from ``budget:reached``);
- ``backup``: the last ``nightowl backup`` failed, or left the database out
  (gateway/backup_status.py).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from agent.cost.budget import budget_words
from agent.served_window import ServedWindow
from agent.urls import shown_url
from gateway.backup_status import described, last_run
from gateway.connecting import connect_problem
from gateway.events import Payload
from nightowl_errors import NightowlError

#: Less free room than this share of the disk, or than :data:`DISK_MIN_FREE_BYTES`.
DISK_MIN_FREE_SHARE = 0.05
DISK_MIN_FREE_BYTES = 500 * 1024 * 1024


@dataclass(frozen=True)
class Observation:
    """A condition that holds now: what it is, what to do, and (when the probe knows
    better than "when first seen") since when, in epoch seconds."""

    what: str
    todo: str
    since: float | None = None
    #: Reported at once, not after ``after_seconds`` (it cannot flicker: a budget).
    at_once: bool = False
    #: When it ends by itself (a budget's reset), if it does.
    until: float | None = None


@dataclass
class Failing:
    """Calls that all failed since ``since``."""

    since: float
    count: int = 0
    last_error: str = ""
    model: str = ""
    #: When the last of them failed, and its kind (``network``, ``auth``...).
    last: float = 0.0
    kind: str = ""


#: A summary model that failed this long before another model's summary succeeded was
#: not the one that summary was first asked of (a summary on a slow local server can take
#: minutes): it is forgotten (a /model choice left).
TAKEN_OVER_SECONDS = 900.0


class ProviderFailures:
    """Whether every call of one use failed since some moment: fed ``llm:request``
    payloads of that use. Replies (``chat``) and housekeeping (summaries, memory notes)
    are watched apart, so a summary model that fails beside a main model that answers is
    told too. A reply's success clears its use (people are answered, whichever model
    did it); housekeeping is watched per model (``per_model``), since a failing
    summary model is asked first at every compression, and the main model taking over
    hides that it is down."""

    def __init__(self, condition: str, kinds: frozenset[str], *, per_model: bool) -> None:
        self.condition = condition
        self.kinds = kinds
        self.per_model = per_model
        #: What fails: by the model's label (per model; gateway/config/routes.py:
        #: ``model_label``), else one entry.
        self.failing: dict[str, Failing] = {}
        #: A call of this use was seen since start.
        self.seen = False

    def observe(self, payload: Payload, now: float) -> None:
        if str(payload.get("kind")) not in self.kinds:
            return
        self.seen = True
        model = str(payload.get("label") or f"{payload.get('model')} via {payload.get('provider')}")
        key = model if self.per_model else ""
        outcome = str(payload.get("outcome"))
        if outcome == "ok":
            self.failing.pop(key, None)
            # A model not asked just before this success was not passed over for it (a
            # summary model another took over from is): it is no longer asked at all.
            for other, failing in list(self.failing.items()):
                if now - failing.last > TAKEN_OVER_SECONDS:
                    del self.failing[other]
            return
        failing = self.failing.setdefault(key, Failing(now))
        failing.last = now
        failing.count += 1
        failing.last_error, failing.model = str(payload.get("error") or outcome), model
        failing.kind = outcome

    @property
    def unreachable(self) -> bool:
        """Every failing model's last call could not reach its server (down, or slow to
        answer): one that answers again has cleared what was wrong."""
        return bool(self.failing) and all(f.kind in UNREACHABLE for f in self.failing.values())

    def observation(self) -> Observation | None:
        if not self.failing:
            return None
        label = "the model" if self.condition == REPLIES else "the model for summaries"
        what = "; ".join(
            f"{label} ({f.model}) failed every call ({f.count} so far), the last with "
            f"{f.last_error}"
            for f in self.failing.values()
        )
        since = min(f.since for f in self.failing.values())
        if self.condition == REPLIES:
            todo = (
                "Check the provider's status, the API key, model.base_url and model.name "
                "(`nightowl doctor` tries the route); meanwhile no replies are written"
            )
        else:
            todo = (
                "Check the provider's status, the key and auxiliary.compression's base_url "
                "(`nightowl doctor` tries the route); replies go on, summaries fall back to "
                "the main model or are made without one"
            )
        return Observation(what=what, todo=todo, since=since)


#: Failures a server that takes connections again has ended.
UNREACHABLE = frozenset({"network", "timeout"})

#: The two uses watched apart, and the ``llm:request`` kinds of each.
REPLIES, HOUSEKEEPING = "provider", "provider:summaries"
USES = {
    REPLIES: (frozenset({"chat"}), False),
    HOUSEKEEPING: (frozenset({"summary", "flush"}), True),
}


#: What the budget alert says; ``names``: "budgets.monthly (the bot),
#: budgets.per_user_daily (telegram:42)", as the config names them.
BUDGET_WHAT = "a budget refuses calls: {names}"


def _named(budget: str, subject: str) -> str:
    setting, whose = budget_words(budget, subject)
    return f"{setting} ({whose})"


#: The one budget a reply's call going through proves lifted: the bot's monthly one
#: refuses every call, a person's or a chat's only theirs.
BOT_MONTHLY_WHAT = BUDGET_WHAT.format(names=_named("monthly", "bot"))
#: The same, as alerts stored before the budgets were named by their settings say it.
BOT_MONTHLY_WHATS = (BOT_MONTHLY_WHAT, BUDGET_WHAT.format(names="monthly (bot)"))


class BudgetsReached:
    """Budgets refusing calls now: fed ``budget:reached`` payloads, each until it resets."""

    def __init__(self) -> None:
        #: (budget, subject) -> resets at (epoch seconds).
        self.refusing: dict[tuple[str, str], float] = {}
        self.since: float | None = None

    def observe(self, payload: Payload, now: float) -> None:
        key = (str(payload.get("budget")), str(payload.get("subject")))
        self.refusing[key] = float(payload.get("resets_at") or now)
        if self.since is None:
            self.since = now

    def refusing_at(self, now: float) -> dict[tuple[str, str], float]:
        """The budgets still refusing at ``now`` (a reset one forgotten)."""
        self.refusing = {key: at for key, at in self.refusing.items() if at > now}
        return self.refusing

    def observation(self, now: float) -> Observation | None:
        if not self.refusing_at(now):
            self.since = None
            return None
        names = ", ".join(_named(*key) for key in sorted(self.refusing))
        return Observation(
            what=BUDGET_WHAT.format(names=names),
            todo="Raise the budget (budgets: in config.yaml) and restart to lift it sooner;"
            " until it resets, the messages it covers are stored but not answered",
            since=self.since,
            at_once=True,
            until=max(self.refusing.values()),
        )


def disk_observation(
    data_dir: Path,
    min_free_share: float = DISK_MIN_FREE_SHARE,
    min_free_bytes: int = DISK_MIN_FREE_BYTES,
) -> Observation | None:
    """Little room left on the disk holding ``data_dir`` (None when there is enough, or
    when the directory cannot be looked at)."""
    try:
        usage = shutil.disk_usage(data_dir)
    except OSError:
        return None
    if usage.free >= min_free_bytes and usage.free >= usage.total * min_free_share:
        return None
    share = usage.free / usage.total if usage.total else 0.0
    return Observation(
        what=f"the disk holding {data_dir} has {usage.free / 1024**2:,.0f} MB free ({share:.1%})",
        todo="Free some room (old logs, backups) or grow the disk: when it is full, "
        "messages are refused unstored",
    )


#: How a model server that takes no connection begins its alert (:class:`ModelServer`).
MODEL_SERVER_WHAT = "the model server of "
#: How long a look at it may take: a check waits for it.
MODEL_SERVER_TIMEOUT = 3.0


class NoAnswer(NightowlError):
    """A look that could not say either way: the alert stands as it was."""


@dataclass(frozen=True)
class ModelServer:
    """The main model's own server (a local one), looked at by connecting to it, then
    asking it about the model (``ask``: the provider's ``served_window``)."""

    base_url: str
    model: str
    #: Why nothing takes a connection there (None: something does), within a timeout.
    look: Callable[[str, float], Awaitable[str | None]] = connect_problem
    ask: Callable[[], Awaitable[ServedWindow | None]] | None = None
    #: How long each look may take: a check waits for it.
    timeout: float = MODEL_SERVER_TIMEOUT

    async def observation(self) -> Observation | None:
        where = f"{MODEL_SERVER_WHAT}{self.model} at {shown_url(self.base_url)}"
        problem = await self.look(self.base_url, self.timeout)
        if problem is not None:
            return Observation(
                what=f"{where} takes no connection ({problem})",
                todo="Start it (is its service enabled at boot?) or fix model.base_url "
                "(`nightowl doctor` tries the route); replies fail until it answers",
            )
        served = None
        if self.ask is not None:
            try:
                async with asyncio.timeout(self.timeout):
                    served = await self.ask()
            except TimeoutError:  # a slow answer says nothing: what held still holds
                raise NoAnswer(f"{where} did not answer within {self.timeout:g} s") from None
        if served is None or served.has_model:
            return None
        fix = served.fix(self.model)
        return Observation(
            what=f"{where} does not have that model ({served.listed})",
            todo=f"{fix[0].upper()}{fix[1:]}; replies fail until then",
        )


def backup_observation(data_dir: Path, now: float) -> Observation | None:
    """The last backup kept in ``data_dir`` failed or holds no database, or the daily
    timer's next one is overdue (None: it was whole and on time, or none was kept).
    Told at once: a backup fails once a night, not a moment."""
    run = last_run(data_dir)
    what = described(run, now) if run is not None else ""
    if run is None or not what:
        return None
    if run.whole:  # whole, but the next one did not come
        todo = (
            "Check its timer: systemctl --user list-timers nightowl-backup.timer (a user's"
            " timers stop at logout without `loginctl enable-linger`; --system: without"
            " --user); this clears at the next whole backup"
        )
    else:
        todo = (
            "Run `nightowl backup` to see what it says and fix that (the daily timer's runs:"
            " journalctl --user -u nightowl-backup, without --user for a --system install);"
            " this clears at the next whole backup"
        )
    return Observation(what=what, todo=todo, since=run.at, at_once=True)


def undelivered_observation(count: int) -> Observation | None:
    if not count:
        return None
    return Observation(
        what=f"{count} repl{'y is' if count == 1 else 'ies are'} stored but not delivered",
        todo="See why in the log (journalctl -u nightowl): their platform refuses them "
        "or cannot be reached. They are retried every minute",
    )


def pairing_observation(count: int, oldest: float) -> Observation | None:
    if not count:
        return None
    return Observation(
        what=f"{count} pairing request{'s' if count != 1 else ''} waiting",
        todo="Answer in chat with /pair, or `nightowl pairing list` then "
        "`nightowl pairing approve <code>` (or deny)",
        since=oldest,
    )


def platform_observation(platform: str, problem: str, since: float | None) -> Observation:
    return Observation(
        what=f"{platform} receives nothing: {problem}",
        todo="Check the network and the token (a 409 Conflict: stop the other process "
        "using it). Meanwhile the connection is rebuilt, and messages wait on the "
        "platform's side",
        since=since,
    )
