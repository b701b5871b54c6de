"""Receiving updates: hand each one to the gateway before Telegram is told it arrived.

Why not PTB's ``Updater``: its polling task puts a batch into a queue and immediately
sets ``offset = last_update_id + 1`` for the next ``getUpdates``, so Telegram forgets the
batch before any handler has run, and ``Updater.stop()`` confirms everything it fetched
(see ``telegram/ext/_updater.py``, ``polling_action_cb`` and ``_get_updates_cleanup``).
A crash in between would lose messages (docs/design.md#delivery-guarantee). :class:`UpdatePoller` keeps PTB's
``Bot.get_updates`` long poll but asks for the next offset only after every update of
the batch went through the sink: each chat's in order, chats side by side.

Failures (:class:`UpdateProcessor`): a sink that raises did not store the update (a
full disk, a broken database), so it stays unconfirmed and is fetched again after a
back-off, for as long as it takes: a failed store write is never acknowledged. Only an
update this adapter cannot read (conversion fails) is a poison update: after
``max_update_failures`` attempts it is logged as skipped and confirmed, so it cannot
stall every chat forever.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from telegram import Bot, Update
from telegram.request import BaseRequest

from adapters.base import Inbound, InboundSink
from adapters.telegram.calls import TelegramCallFailed, http_request, redact, telegram_errors
from adapters.telegram.settings import TelegramSettings

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ("message", "edited_message", "my_chat_member")
_MAX_BACKOFF = 30.0
#: After a batch, the next long poll waits this long (seconds): building it takes most of
#: a millisecond of the event loop, which the turns just handed over need first for their
#: reads and their model request. What arrives meanwhile comes with that poll.
_TURNS_FIRST = 0.001
#: The most updates one getUpdates brings (its ``limit``'s default and maximum).
FULL_BATCH = 100
_REMEMBERED_IDS = 4096

Converter = Callable[[Update], Awaitable[Inbound | None]]
#: Returns True when a dedupe key is already stored (sync or async).
Dedupe = Callable[[str], bool | Awaitable[bool]]


class UpdateProcessor:
    """Converts one update and awaits the sink; says whether it may be confirmed."""

    def __init__(
        self,
        settings: TelegramSettings,
        convert: Converter,
        sink: InboundSink,
        dedupe: Dedupe | None = None,
    ) -> None:
        self._settings = settings
        self._convert = convert
        self._sink = sink
        self._dedupe = dedupe
        self._failures: dict[int, int] = {}
        self._done: deque[int] = deque(maxlen=_REMEMBERED_IDS)
        #: Updates handed in since the start, by polling or a webhook (what a health
        #: check compares between two looks).
        self.arrived = 0

    def failures(self, update_id: int) -> int:
        return self._failures.get(update_id, 0)

    async def process(self, update: Update) -> bool:
        """True when the update is stored (or skipped for good) and may be confirmed."""
        update_id = update.update_id
        self.arrived += 1
        if update_id in self._done:
            return True
        try:
            if await self._already_stored(update_id):
                message = None
            else:
                try:
                    message = await self._convert(update)
                except Exception as error:  # an update we cannot read: counted, then skipped
                    return self._record_failure(update, error)
            if message is not None:
                await self._sink(message)
        except Exception as error:  # not stored: keep receiving, never confirm it
            return self._record_unstored(update, error)
        self._failures.pop(update_id, None)
        self._done.append(update_id)
        return True

    async def _already_stored(self, update_id: int) -> bool:
        if self._dedupe is None:
            return False
        seen = self._dedupe(f"telegram:{update_id}")
        return bool(await seen) if inspect.isawaitable(seen) else bool(seen)

    def _record_unstored(self, update: Update, error: Exception) -> bool:
        update_id = update.update_id
        attempts = self._failures.get(update_id, 0) + 1
        self._failures[update_id] = attempts
        chat = update.effective_chat.id if update.effective_chat else "?"
        reason = redact(f"{type(error).__name__}: {error}", self._settings.token)
        log.error(
            "Telegram update %s (chat %s) not stored (attempt %d); it stays unconfirmed and"
            " is retried: %s",
            update_id,
            chat,
            attempts,
            reason,
        )
        return False

    def _record_failure(self, update: Update, error: Exception) -> bool:
        update_id = update.update_id
        attempts = self._failures.get(update_id, 0) + 1
        chat = update.effective_chat.id if update.effective_chat else "?"
        reason = redact(f"{type(error).__name__}: {error}", self._settings.token)
        limit = self._settings.max_update_failures
        if attempts >= limit:
            log.error(
                "Telegram update %s (chat %s) skipped after %d failed attempts: %s",
                update_id,
                chat,
                attempts,
                reason,
            )
            self._failures.pop(update_id, None)
            self._done.append(update_id)
            return True
        self._failures[update_id] = attempts
        log.error(
            "Telegram update %s (chat %s) could not be read, attempt %d of %d: %s",
            update_id,
            chat,
            attempts,
            limit,
            reason,
        )
        return False


class UpdatePoller:
    """Long-polls getUpdates on its own Bot; rebuilt by a watchdog when it stops working."""

    def __init__(
        self,
        settings: TelegramSettings,
        make_bot: Callable[[BaseRequest, BaseRequest], Bot],
        processor: UpdateProcessor,
    ) -> None:
        self._settings = settings
        self._make_bot = make_bot
        self._processor = processor
        self._bot: Bot | None = None
        self._requests: tuple[BaseRequest, ...] = ()
        self._offset: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._processing = False
        self._stopping = False
        self._last_success = time.monotonic()
        self.rebuilds = 0
        #: Since when (epoch seconds) every getUpdates failed, and why; None while it works.
        #: A rebuild leaves it: only a getUpdates that succeeds clears it.
        self.failing_since: float | None = None
        self.failure = ""
        #: Updates taken in since start while Telegram had more waiting (None: caught up).
        self._backlog: int | None = 0
        #: Updates written before this waited for the bot (see :meth:`_count_backlog`).
        self._started = datetime.now(UTC)

    @property
    def healthy(self) -> bool:
        """A getUpdates succeeded lately (what the watchdog checks before a rebuild)."""
        silent_for = time.monotonic() - self._last_success
        return silent_for <= self._settings.health_timeout_seconds

    async def start(self) -> None:
        self._stopping = False
        self._start_loop()
        self._watchdog = asyncio.create_task(self._watch(), name="telegram-poll-watchdog")

    async def stop(self) -> None:
        """Let the update in the sink finish, confirm what was stored, close the poller."""
        self._stopping = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
        task = self._task
        if task is not None:
            if not self._processing:
                task.cancel()
            await asyncio.wait({task}, timeout=self._settings.stop_timeout)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._confirm_offset()
        await self._close_bot()

    def _start_loop(self) -> None:
        # Its own connections, so a rebuild starts from fresh sockets without touching sends.
        self._requests = (
            http_request(connection_pool_size=1),
            http_request(connection_pool_size=1),
        )
        self._bot = self._make_bot(*self._requests)
        self._last_success = time.monotonic()
        self._task = asyncio.create_task(self._poll(), name="telegram-poll")

    async def _poll(self) -> None:
        errors = 0
        while not self._stopping:
            try:
                updates = await self._fetch()
            except Exception as error:  # the poller must outlive any failed request
                flood = error.retry_after if isinstance(error, TelegramCallFailed) else None
                if flood is None:
                    errors += 1
                if self.failing_since is None:
                    self.failing_since = time.time()
                self.failure = self._failure_reason(error)
                await asyncio.sleep(
                    flood if flood is not None else self._log_poll_error(error, errors)
                )
                continue
            errors = 0
            self._last_success = time.monotonic()
            self.failing_since, self.failure = None, ""
            self._count_backlog(updates)
            await self._process_batch(updates)
            if updates:
                await asyncio.sleep(_TURNS_FIRST)

    def _count_backlog(self, updates: tuple[Update, ...]) -> None:
        """What waited at start (a night's groups) is said once, when a getUpdates brings
        less than a full batch: caught up. A message written after the start, which the
        first long poll brings, did not wait (Telegram's dates are whole seconds: one of
        the start's own second counts as waiting)."""
        if self._backlog is None:
            return
        self._backlog += sum(1 for update in updates if self._waited(update))
        if len(updates) < FULL_BATCH:
            if self._backlog:
                waited = self._backlog
                log.info(
                    "Telegram: took in %d update%s that waited for the bot",
                    waited,
                    "" if waited == 1 else "s",
                )
            self._backlog = None

    def _waited(self, update: Update) -> bool:
        """Whether ``update`` was made before the start: an edit by when it was edited, a
        member's change by its own date; one that carries no date counts as waiting."""
        message = update.effective_message
        when: datetime | None = None
        if message is not None:
            when = message.edit_date or message.date
        else:
            member = update.my_chat_member or update.chat_member
            when = member.date if member is not None else None
        return when is None or when <= self._started

    async def _fetch(self) -> tuple[Update, ...]:
        assert self._bot is not None
        with telegram_errors("getUpdates", "-", self._settings.token):
            return await self._bot.get_updates(
                offset=self._offset,
                timeout=timedelta(seconds=self._settings.poll_timeout),
                allowed_updates=ALLOWED_UPDATES,
            )

    async def _process_batch(self, updates: tuple[Update, ...]) -> None:
        """Hand the batch over, each chat's updates in order and chats side by side (their
        messages then share a commit: gateway/store/inbox.py); confirm the updates stored,
        up to the first that was not."""
        fresh = [u for u in updates if self._offset is None or u.update_id >= self._offset]
        stored: set[int] = set()
        unconfirmed = deque(fresh)

        async def one_chat(chat_updates: list[Update]) -> None:
            for update in chat_updates:
                if self._stopping or not await self._processor.process(update):
                    return  # this chat's later updates wait: its order holds
                stored.add(update.update_id)
                while unconfirmed and unconfirmed[0].update_id in stored:  # the stored prefix
                    self._offset = unconfirmed.popleft().update_id + 1

        self._processing = True
        try:
            await asyncio.gather(*(one_chat(chain) for chain in _by_chat(fresh)))
        finally:
            self._processing = False
            self._last_success = time.monotonic()
        if unconfirmed and not self._stopping:
            # Not confirmed: the next getUpdates returns it again (with the rest).
            await asyncio.sleep(self._backoff(self._processor.failures(unconfirmed[0].update_id)))

    def _backoff(self, attempt: int) -> float:
        return min(self._settings.retry_backoff * 2 ** max(attempt - 1, 0), _MAX_BACKOFF)

    def _failure_reason(self, error: Exception) -> str:
        reason = redact(f"{type(error).__name__}: {error}", self._settings.token)
        if isinstance(error, TelegramCallFailed):
            reason = error.reason
            if error.kind == "conflict":
                reason += " (another bot instance or a webhook is using this token)"
            elif error.kind == "token":
                reason = "Telegram rejected the bot token"
        return reason

    def _log_poll_error(self, error: Exception, errors: int) -> float:
        delay = self._backoff(errors)
        reason = self.failure  # _failure_reason(error), just taken
        log_level = logging.WARNING if isinstance(error, TelegramCallFailed) else logging.ERROR
        log.log(log_level, "Telegram getUpdates failed: %s; retrying in %.1f s", reason, delay)
        return delay

    async def _watch(self) -> None:
        timeout = self._settings.health_timeout_seconds
        while True:
            await asyncio.sleep(min(timeout / 4, 5.0))
            if self._processing or self._stopping:
                continue
            silent_for = time.monotonic() - self._last_success
            if silent_for > timeout or (self._task is not None and self._task.done()):
                log.error(
                    "Telegram: no successful getUpdates for %.0f s; rebuilding the polling loop",
                    silent_for,
                )
                await self._rebuild()

    async def restart(self) -> bool:
        """Rebuild the polling loop now (it went deaf); not while updates are handed over."""
        if self._processing or self._stopping:
            return False
        log.warning("Telegram: rebuilding the polling loop (it receives nothing)")
        await self._rebuild()
        return True

    async def _rebuild(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._close_bot()
        self.rebuilds += 1
        self._start_loop()

    async def _confirm_offset(self) -> None:
        if self._offset is None or self._bot is None:
            return
        try:
            with telegram_errors("getUpdates", "-", self._settings.token):
                await self._bot.get_updates(offset=self._offset, limit=1, timeout=timedelta(0))
        except TelegramCallFailed as failed:  # shutdown goes on; the gateway dedupes redeliveries
            log.warning("Telegram: final offset not confirmed: %s", failed.kind)

    async def _close_bot(self) -> None:
        # Bot.shutdown() skips requests of a bot that never ran getMe: close them directly.
        self._bot, requests, self._requests = None, self._requests, ()
        for request in requests:
            await request.shutdown()


def _by_chat(updates: list[Update]) -> list[list[Update]]:
    """The updates in chains to run side by side: one per chat, in order. A batch that
    moves a group to a new chat id runs as one chain, as it came."""
    if any(_moves(u) for u in updates):
        return [updates]
    chains: dict[int | None, list[Update]] = {}
    for update in updates:
        chains.setdefault(chat_of(update), []).append(update)
    return list(chains.values())


def chat_of(update: Update) -> int | None:
    """The id of the chat ``update`` belongs to (None for the rare one without)."""
    return update.effective_chat.id if update.effective_chat else None


def _moves(update: Update) -> bool:
    message = update.effective_message
    return message is not None and bool(message.migrate_to_chat_id or message.migrate_from_chat_id)
