"""Where an alert goes: each ``alerts.to`` private chat through its platform's adapter,
and the ``alerts.webhook`` as a JSON POST. A failure is logged, never raised: an alert
that cannot be told must not break what it reports on. What could not be sent is kept
(:data:`UNSENT_KEPT` per recipient, for :data:`UNSENT_SECONDS`) and sent again, in order,
at each check (:meth:`AlertSender.retry`): an alert matters most when something is down,
and the way to the operator may be down with it. It is kept in memory and, while there
is any, in ``<data_dir>/alerts_unsent.json`` (0600), so a restart sends it too: the store
counts it as told (docs/operations.md#alerts)."""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

from adapters.base import Adapter, DeliveryError, OutboundMessage
from gateway.config.alerts import AlertsConfig, alert_target
from gateway.private_files import write_private

log = logging.getLogger(__name__)

WEBHOOK_TIMEOUT_SECONDS = 10.0
#: Alert messages kept for another try per recipient; beyond it the oldest start goes,
#: with its clearing (a clearing is never told without its start).
UNSENT_KEPT = 20
#: How long an unsent alert message is tried again before it is given up (logged).
UNSENT_SECONDS = 24 * 3600.0
#: Where the unsent messages wait across a restart, in the data dir.
UNSENT_FILE = "alerts_unsent.json"
#: The webhook's answers worth another try; any other 4xx will not change by itself.
_WEBHOOK_RETRIED = frozenset({408, 425, 429})


@dataclass
class Unsent:
    """One message to one recipient that failed: an ``alerts.to`` entry, or ``webhook``."""

    to: str
    condition: str
    state: str
    text: str
    body: dict[str, object] = field(default_factory=dict)
    first_tried: float = 0.0


class AlertSender:
    def __init__(
        self,
        settings: AlertsConfig,
        adapters: Mapping[str, Adapter],
        clock: Callable[[], float] = time.time,
        kept: Path | None = None,
    ) -> None:
        """``kept``: the file the unsent messages wait in across a restart (None: memory
        only)."""
        self.settings = settings
        self.adapters = adapters
        self.clock = clock
        #: The private chat of each ``to`` entry, once opened.
        self._chats: dict[str, str] = {}
        self._kept = kept
        unsent, given_up = _load(kept)
        recipients = {*settings.to, *(["webhook"] if settings.webhook else [])}
        #: What could not be sent yet, oldest first; kept messages for a recipient the
        #: config no longer names are dropped.
        self.unsent: deque[Unsent] = deque(m for m in unsent if m.to in recipients)
        #: (recipient, condition) whose start was given up: its clearing goes too.
        self._given_up: set[tuple[str, str]] = {pair for pair in given_up if pair[0] in recipients}
        #: What the file holds ("": no file; None: unknown, so the next save writes it).
        self._written: str | None = None if kept is not None and kept.exists() else ""

    @property
    def has_recipients(self) -> bool:
        return bool(self.settings.to or self.settings.webhook)

    async def send(self, condition: str, state: str, since: float, text: str) -> None:
        for entry in self.settings.to:
            await self._attempt(Unsent(entry, condition, state, text))
        if self.settings.webhook:
            body = {"condition": condition, "state": state, "since": since, "text": text}
            await self._attempt(Unsent("webhook", condition, state, text, body))
        self._save()

    async def retry(self) -> None:
        """Send again what failed before, oldest first; what fails again stays."""
        waiting, self.unsent = self.unsent, deque()
        now = self.clock()
        for message in waiting:
            if now - message.first_tried > UNSENT_SECONDS:
                self._give_up(message, "after 24 h")
            else:
                await self._attempt(message)
        self._save()

    def _save(self) -> None:
        """What waits into :data:`UNSENT_FILE` when it changed; nothing waits: no file."""
        if self._kept is None:
            return
        text = ""
        if self.unsent or self._given_up:
            kept = {"unsent": [asdict(m) for m in self.unsent], "given_up": sorted(self._given_up)}
            text = json.dumps(kept) + "\n"
        if text == self._written:
            return
        try:
            if text:
                write_private(self._kept, text, make_dir=False)
            else:
                self._kept.unlink(missing_ok=True)
        except OSError as error:  # a full disk: they stay in memory all the same
            log.warning("unsent alerts not kept in %s: %s", self._kept, error)
            return
        self._written = text

    async def _attempt(self, message: Unsent) -> None:
        """Send ``message``, unless its recipient failed already (this check, or one it
        was not retried at yet): then it waits behind, so each recipient gets its
        messages in order and is tried once per check. A clearing whose start was given
        up goes with it: "resolved" is never told alone."""
        if message.state == "cleared" and (message.to, message.condition) in self._given_up:
            self._given_up.discard((message.to, message.condition))
            return
        if any(kept.to == message.to for kept in self.unsent):
            self._keep(message)
            return
        again = bool(message.first_tried)
        if message.to == "webhook":
            sent = await self._to_webhook(str(self.settings.webhook), message.body, again)
        else:
            sent = await self._to_chat(message.to, message.text, again)
        if sent is False:
            self._keep(message)

    def _keep(self, message: Unsent) -> None:
        """Keep ``message`` for another try; past :data:`UNSENT_KEPT` for its recipient,
        its oldest start goes (the oldest message when only clearings wait)."""
        if not message.first_tried:
            message.first_tried = self.clock()
        self.unsent.append(message)
        theirs = [kept for kept in self.unsent if kept.to == message.to]
        if len(theirs) > UNSENT_KEPT:
            starts = [kept for kept in theirs if kept.state == "started"]
            gone = (starts or theirs)[0]
            self.unsent.remove(gone)
            self._give_up(gone, "(too many unsent)")

    def _give_up(self, message: Unsent, why: str) -> None:
        log.warning("alert to %s given up %s: %s", message.to, why, _line(message))
        if message.state != "started":
            return
        pair = (message.to, message.condition)
        clearing = next((m for m in self.unsent if (m.to, m.condition) == pair), None)
        if clearing is not None:
            self.unsent.remove(clearing)
        else:  # it has not come yet: it goes when it does
            self._given_up.add(pair)

    async def _to_chat(self, entry: str, text: str, again: bool = False) -> bool | None:
        """True: sent; False: failed, worth another try; None: it never can be."""
        platform, user = alert_target(entry)
        adapter = self.adapters.get(platform)
        if adapter is None:
            log.warning("alert not sent to %s: that platform is not running", entry)
            return None
        try:
            chat = self._chats.get(entry) or await adapter.private_chat(user)
            self._chats[entry] = chat
            await adapter.send(OutboundMessage(platform=platform, chat_id=chat, text=text))
            return True
        except DeliveryError as error:  # said once; its retries at INFO
            log.log(_level(again), "alert not sent to %s (tried again later): %s", entry, error)
        except Exception:  # an adapter's bug must not stop the other recipients
            log.log(_level(again), "alert not sent to %s (tried again later)", entry, exc_info=True)
        return False

    async def _to_webhook(
        self, url: str, body: dict[str, object], again: bool = False
    ) -> bool | None:
        try:
            async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT_SECONDS) as client:
                response = await client.post(url, json=body)
        except Exception as error:  # whatever it is, an alert must not break the gateway
            what = type(error).__name__  # never the URL: a webhook's may hold its secret
            log.log(_level(again), "alert webhook failed (tried again later): %s", what)
            return False
        status = response.status_code
        if status < 400:
            return True
        retried = status >= 500 or status in _WEBHOOK_RETRIED
        said = " (tried again later)" if retried else ""
        log.log(_level(again), "alert webhook answered HTTP %s%s", status, said)
        return False if retried else None


def _level(again: bool) -> int:
    return logging.INFO if again else logging.WARNING


def _line(message: Unsent) -> str:
    return message.text.replace("\n", " ")


def _load(kept: Path | None) -> tuple[list[Unsent], list[tuple[str, str]]]:
    """The messages a previous run could not send, and the starts it gave up (none from
    a damaged file: logged, and the next save replaces it)."""
    if kept is None:
        return [], []
    try:
        raw = json.loads(kept.read_text(encoding="utf-8"))
        unsent = [Unsent(**entry) for entry in raw["unsent"]]
        given_up = [(str(to), str(condition)) for to, condition in raw["given_up"]]
    except FileNotFoundError:
        return [], []
    except (OSError, ValueError, TypeError, KeyError) as error:
        log.warning("unsent alerts in %s not read: %s", kept, error)
        return [], []
    return unsent, given_up
