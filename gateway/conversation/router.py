"""The router: every inbound message passes here first.

Who may talk (:mod:`gateway.conversation.access`), commands, session keys
(docs/design.md#session-keys), and the row the message becomes
(:mod:`gateway.conversation.user_rows`); then the row is stored durably in the inbox and
its session's lane is woken. ``receive`` returns only after the store accepted the row —
that is when an adapter may acknowledge the update (docs/design.md#delivery-guarantee).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from adapters.base import BotBlocked, ChatMoved, Inbound, InboundMessage, OutboundMessage
from agent.messages import Message
from agent.tokens import TokenCounter
from gateway.config.schema import Config
from gateway.conversation.access import Access, Verdict
from gateway.conversation.background import BackgroundTasks
from gateway.conversation.command_registry import is_group_wide
from gateway.conversation.moves import ChatMoves
from gateway.conversation.pairing import FULL, FULL_CODE_SECONDS
from gateway.conversation.user_rows import LateMarks, user_row
from gateway.events import EventBus, MessageReceived
from gateway.media.reading import MediaReader
from gateway.store import ConversationStore, InboxEntry

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    """What a command says now; ``text`` None when it answers later, by itself, once the
    work it queued in the session's lane is done."""

    text: str | None = None


LATER = Answer()


class CommandHandler(Protocol):
    def handles(self, name: str) -> bool: ...

    async def __call__(self, message: InboundMessage, name: str, argument: str) -> Answer: ...


Send = Callable[[OutboundMessage], Awaitable[Any]]


#: What a command's name looks like (Telegram's rule): "/etc/hosts" is no command.
COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")


def parse_command(message: InboundMessage) -> tuple[str, str] | None:
    """``("status", "args")`` for an addressed "/status@bot args"; None for anything else."""
    if not message.addressed or message.is_edit or not message.text.startswith("/"):
        return None
    if message.forwarded_from is not None:
        return None  # someone else's words, passed on: not a command to this bot
    name, _, argument = message.text[1:].partition(" ")
    return name.split("@", 1)[0].lower(), argument.strip()


class Pairing(Protocol):
    """Hands a stranger a pairing code, and takes it back when they leave
    (docs/design.md#pairing)."""

    async def request(self, platform: str, user_id: str, user_name: str, chat_id: str) -> str: ...

    async def withdraw(self, platform: str, user_id: str) -> bool: ...


class Router:
    def __init__(
        self,
        config: Config,
        store: ConversationStore,
        events: EventBus,
        counter: TokenCounter,
        notify_lane: Callable[[str], None],
        send: Send,
        commands: CommandHandler,
        *,
        access: Access,
        pairing: Pairing | None = None,
        media: MediaReader | None = None,
        moves: ChatMoves | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.events = events
        self.counter = counter
        self.notify_lane = notify_lane
        self.send = send
        self.commands = commands
        self.access = access
        #: What each platform is (docs/design.md#platform-traits): how sessions are keyed.
        self.platforms = self.access.platforms
        self.pairing = pairing
        self.media = media
        self.moves = moves
        self.background = BackgroundTasks("replies")
        self.late = LateMarks(ZoneInfo(config.agent.timezone))

    async def receive(self, message: Inbound) -> None:
        """An adapter's message or chat event (:data:`adapters.base.Inbound`)."""
        arrived = datetime.now(UTC)  # before downloads: only the platform's delay is late
        if isinstance(message, ChatMoved):
            await self._follow_move(message)
            return
        if isinstance(message, BotBlocked):  # a stranger gone: their place in the queue frees
            if self.pairing is not None:
                await self.pairing.withdraw(message.platform, message.user_id)
            return
        verdict = await self.access.judge(message)
        if verdict.pair or verdict.refusal is not None:
            await self._turn_away(message, verdict)
        command = parse_command(message)
        if command is not None and self.commands.handles(command[0]):
            if verdict.turn:
                await self._command(message, *command, trusted=verdict.trusted)
            return
        if command is not None and COMMAND_NAME.fullmatch(command[0]):
            # A typo of a command is no question for the model (a path is no command); a
            # bare one in a Telegram group may be another bot's, and is left to it.
            if verdict.turn and not message.bare_command:
                self.answer(message, f"There is no /{command[0]} command here. /help lists them.")
            return
        if not verdict.observe:
            return  # nothing of a stranger's message, or one from an unknown place, is kept
        addressed = message.addressed and verdict.turn
        if not addressed and not self.config.groups.observe:
            return
        if not message.text.strip() and not message.attachments:
            return
        media = None
        key = self.platforms.session_key(message)
        if self.media is not None:
            # After the judgement: only now may anything be downloaded (docs/design.md#media).
            media = await self.media.read(message, key, addressed=addressed)
        mark = self.late.mark(key, message.received_at, arrived)
        row = await user_row(
            message,
            instructs=verdict.turn,
            take_images=addressed,
            vision=self.config.model.supports_vision,
            max_image_bytes=self.config.media.max_image_bytes,
            media_notes=media.notes if media is not None else None,
            quoted_trusted=await self.access.quoted_trusted(message),
            sent=mark,
        )
        if await self._store(key, message, row, addressed=addressed):
            self.late.stored(key, message.received_at, arrived, marked=mark is not None)
        if media is not None and media.problems:
            self.answer(message, " ".join(media.problems))

    async def _follow_move(self, moved: ChatMoved) -> None:
        """A chat continues under another id: its session follows, if it is an allowed
        place (docs/design.md#chat-moves)."""
        if self.moves is None or not self.access.chat_allowed(moved.platform, moved.old_chat_id):
            return
        if await self.moves.follow(moved.platform, moved.old_chat_id, moved.new_chat_id):
            self.notify_lane(f"{moved.platform}:{moved.new_chat_id}")  # what waited moved too

    async def _command(
        self, message: InboundMessage, name: str, argument: str, *, trusted: bool
    ) -> None:
        if not await self._first_time(message):
            return  # a redelivered /new must not run twice
        if is_group_wide(name, argument) and not self.access.may_use_group_commands(
            message, trusted=trusted
        ):
            self.answer(message, "Only an owner of this bot can do that in a group.")
            return
        answer = await self.commands(message, name, argument)
        if answer.text is not None:
            self.answer(message, answer.text)

    async def _turn_away(self, message: InboundMessage, verdict: Verdict) -> None:
        """Answer a stranger (a pairing code) or a refused sender: at most once an hour."""
        if not message.addressed or not self.access.should_tell(message):
            return
        if not await self._first_time(message):
            return
        if verdict.pair and self.pairing is not None:
            text = await self.pairing.request(
                message.platform, message.user_id, message.user_name, message.chat_id
            )
            if text == FULL:  # a place frees within a quarter hour: may ask again then
                self.access.tell_again_after(message, FULL_CODE_SECONDS)
        else:
            text = verdict.refusal or ""
        if text:
            self.answer(message, text)

    async def _store(
        self, key: str, message: InboundMessage, row: Message, *, addressed: bool
    ) -> bool:
        """Whether the row was stored in session ``key``'s inbox (False: a duplicate of
        one stored before)."""
        entry = InboxEntry(
            session_key=key,
            platform=message.platform,
            chat_id=message.chat_id,
            thread_id=message.thread_id,
            user_id=message.user_id,
            message=row,
            token_count=self.counter.count(row),
            addressed=addressed,
            platform_message_id=message.platform_message_id,
            dedupe_key=message.dedupe_key,
            chat_type=message.chat_type,
        )
        if not await self.store.enqueue(entry):
            # A backlog fed again (a data dir that saw it all) would log a line each.
            log.debug("duplicate %s ignored (%s)", message.dedupe_key, key)
            return False
        self.events.emit(MessageReceived(key, message.platform, addressed))
        self.notify_lane(key)
        return True

    async def _first_time(self, message: InboundMessage) -> bool:
        """Whether this platform event is new (events without a dedupe key always are)."""
        if message.dedupe_key is None:
            return True
        return await self.store.remember_inbound(message.dedupe_key)

    def answer(self, message: InboundMessage, text: str) -> None:
        """Send ``text`` without holding up the adapter (flood control can wait minutes)."""
        self.background.spawn(self.reply(message, text))

    async def reply(self, message: InboundMessage, text: str) -> None:
        await self.send(
            OutboundMessage(
                platform=message.platform,
                chat_id=message.chat_id,
                thread_id=message.thread_id,
                text=text,
                reply_to_message_id=message.platform_message_id,
            )
        )
