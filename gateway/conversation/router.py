"""The router: every inbound message passes here first.

Authorization (docs/design.md#authorization), commands (docs/design.md#commands), session keys (docs/design.md#session-keys), and the conversion of a
platform message into the user row it will become; then the row is stored durably in
the inbox and its session's lane is woken. ``receive`` returns only after the store
accepted the row — that is when an adapter may acknowledge the update (docs/design.md#delivery-guarantee).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from adapters.base import InboundMessage, OutboundMessage
from agent.tokens import TokenCounter
from gateway.config.schema import Config
from gateway.conversation.background import BackgroundTasks
from gateway.events import EventBus
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


NOT_HERE = "I don't answer here. Ask the bot's owner to allow this channel."


def parse_command(message: InboundMessage) -> tuple[str, str] | None:
    """``("status", "args")`` for an addressed "/status@bot args"; None for anything else."""
    if not message.addressed or message.is_edit or not message.text.startswith("/"):
        return None
    name, _, argument = message.text[1:].partition(" ")
    return name.split("@", 1)[0].lower(), argument.strip()


def session_key(message: InboundMessage) -> str:
    """docs/design.md#session-keys."""
    if message.platform == "telegram":
        key = f"telegram:{message.chat_id}"
        return f"{key}:{message.thread_id}" if message.thread_id else key
    if message.platform == "discord":
        if message.chat_type == "private":
            return f"discord:dm:{message.user_id}"
        return f"discord:{message.chat_id}"
    if message.platform == "console":
        return f"console:{message.chat_id}"
    return f"{message.platform}:{message.chat_id}"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    refusal: str | None = None  # said to the user when not allowed (private chats only)


def authorize(config: Config, message: InboundMessage) -> Verdict:
    """Allowlists per platform (docs/design.md#authorization). Empty lists mean nobody, not everybody."""
    if message.platform == "console":
        return Verdict(True)
    roles: tuple[str, ...] = ()
    if message.platform == "telegram":
        telegram = config.platforms.telegram
        users, places = telegram.allowed_users, telegram.allowed_chats
    elif message.platform == "discord":
        discord = config.platforms.discord
        users, places, roles = (
            discord.allowed_users,
            discord.allowed_channels,
            discord.allowed_roles,
        )
    else:
        return Verdict(False)
    user_ok = message.user_id in users or any(role in roles for role in message.user_roles)
    place_ok = message.chat_id in places or (
        message.parent_chat_id is not None and message.parent_chat_id in places
    )
    if message.chat_type == "private":
        if user_ok or place_ok:
            return Verdict(True)
        return Verdict(
            False,
            f"Sorry, this is a private bot. Your user id is {message.user_id} — ask its owner "
            f"to add it to platforms.{message.platform}.allowed_users.",
        )
    # Groups, channels, threads: the place must be allowed, or an allowed user must be
    # talking to the bot there. Unknown places are ignored silently — unless the platform
    # would otherwise show the user a request hanging forever.
    if place_ok or (user_ok and message.addressed):
        return Verdict(True)
    return Verdict(False, NOT_HERE if message.needs_answer else None)


def user_row(message: InboundMessage, *, vision: bool) -> dict[str, Any]:
    """The user message the agent will see for ``message``."""
    text = message.text
    if message.is_edit:
        text = f"(edited) {text}"
    if message.reply_to is not None:
        quoted = message.reply_to.text.strip().replace("\n", " ")
        if len(quoted) > 500:
            quoted = quoted[:500] + "…"
        who = "you" if message.reply_to.from_bot else (message.reply_to.author or "someone")
        text = f'(replying to {who}: "{quoted}")\n{text}'
    if message.chat_type not in ("private", "console") and message.user_name:
        text = (
            f"{message.user_name}: {text}"  # group rows name their sender (docs/design.md#groups)
        )
    images = [a for a in message.attachments if a.kind == "image" and a.data]
    if images and not vision:
        text += f"\n[{len(images)} image(s) attached; this model cannot see images]"
    for other in (a for a in message.attachments if a.kind != "image" or not a.data):
        text += f"\n[attached: {other.name or 'a file'} ({other.mime_type}), not readable here]"
    if not images or not vision:
        return {"role": "user", "content": text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for image in images:
        encoded = base64.b64encode(image.data).decode("ascii")
        parts.append(
            {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{encoded}"}}
        )
    return {"role": "user", "content": parts}


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
    ) -> None:
        self.config = config
        self.store = store
        self.events = events
        self.counter = counter
        self.notify_lane = notify_lane
        self.send = send
        self.commands = commands
        self.background = BackgroundTasks("replies")

    async def receive(self, message: InboundMessage) -> None:
        verdict = authorize(self.config, message)
        if not verdict.allowed:
            if verdict.refusal and message.addressed and await self._first_time(message):
                self.answer(message, verdict.refusal)
            return
        key = session_key(message)
        command = parse_command(message)
        if command is not None and self.commands.handles(command[0]):
            if await self._first_time(message):  # a redelivered /new must not run twice
                answer = await self.commands(message, *command)
                if answer.text is not None:
                    self.answer(message, answer.text)
            return
        if not message.addressed and not self.config.groups.observe:
            return
        if not message.text.strip() and not message.attachments:
            return
        row = user_row(message, vision=self.config.model.supports_vision)
        entry = InboxEntry(
            session_key=key,
            platform=message.platform,
            chat_id=message.chat_id,
            thread_id=message.thread_id,
            user_id=message.user_id,
            message=row,
            token_count=self.counter.count(row),
            addressed=message.addressed,
            platform_message_id=message.platform_message_id,
            dedupe_key=message.dedupe_key,
        )
        if not await self.store.enqueue(entry):
            log.info("duplicate %s ignored (%s)", message.dedupe_key, key)
            return
        self.events.emit(
            "message:received",
            {"session_key": key, "platform": message.platform, "addressed": message.addressed},
        )
        self.notify_lane(key)

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
