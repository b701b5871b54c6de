"""The boundary between chat platforms and the gateway.

An adapter turns platform events into :class:`InboundMessage` and hands each one to the
gateway's sink; the sink returns once the message is durably stored, which is when an
adapter may acknowledge it to its platform (docs/design.md#delivery-guarantee). Replies come back as
:class:`OutboundMessage` through :meth:`Adapter.send`. Adapters know nothing of LLMs,
sessions or SQL.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from nightowl_errors import NightowlError

ChatType = Literal["private", "group", "channel", "thread", "console"]
#: Chat types where only the person and the bot talk (a DM, the operator's terminal).
PRIVATE_CHAT_TYPES: frozenset[ChatType] = frozenset({"private", "console"})


@dataclass(frozen=True)
class PlatformTraits:
    """What the gateway must know of a platform to treat its messages right, declared by
    its adapter (docs/design.md#platform-traits): the gateway asks these, never the
    platform's name. The defaults describe a plain chat platform."""

    #: Whoever can type here runs the bot (a terminal): every message is trusted, no
    #: allowlist is asked, and every chat is private.
    operator_only: bool = False
    #: Groups have moderators (Discord: Manage Messages): a group-wide command there needs
    #: an allowed user who also moderates or holds an allowed role.
    moderated_groups: bool = False
    #: A private chat's session belongs to the person, whatever the chat's id: the key
    #: is ``<platform>:dm:<user id>`` (Discord DMs; docs/design.md#session-keys).
    private_session_by_user: bool = False
    #: Private chats have positive numeric ids, groups and channels negative ones
    #: (Telegram), so a session key alone says whether its chat is private.
    private_ids_positive: bool = False
    #: Missed history can be read back after a reconnect: the gateway hands the adapter
    #: a :class:`CatchUpSource` (:meth:`Adapter.catch_up_from`).
    catches_up: bool = False


#: Fetches an attachment's bytes; None when they could not be fetched (it is logged).
Fetch = Callable[[], Awaitable[bytes | None]]


#: What an attachment is: images reach vision models as image parts; voice notes, audio
#: and video notes are transcribed, documents read (docs/design.md#media); a "file" is
#: one nobody can fetch (too large for the platform's download API).
AttachmentKind = Literal["image", "voice", "audio", "video_note", "document", "file"]


@dataclass(frozen=True)
class Attachment:
    """A file that came with a message.

    Nothing is downloaded when the message arrives: the gateway calls :meth:`read` only
    for a message from someone allowed to talk to the bot, so a stranger's 20 MB photo
    costs nothing (docs/design.md#authorization).
    """

    kind: AttachmentKind
    mime_type: str
    data: bytes = b""
    name: str = ""
    #: The size the platform states, known before anything is fetched.
    size: int | None = None
    fetch: Fetch | None = field(default=None, compare=False, repr=False)
    #: Seconds of sound (voice, audio, video notes) when the platform states it.
    duration: float | None = None

    async def read(self) -> bytes | None:
        """The content: in hand, or fetched now; None when it cannot be had."""
        if self.data:
            return self.data
        return await self.fetch() if self.fetch is not None else None


@dataclass(frozen=True)
class QuotedMessage:
    """The message a user replied to, passed to the agent as context."""

    text: str
    author: str = ""
    from_bot: bool = False
    #: The author's platform user id, when known: whether their words are trusted.
    author_id: str = ""


@dataclass(frozen=True)
class InboundMessage:
    platform: str
    chat_id: str
    user_id: str
    text: str
    user_name: str = ""
    thread_id: str | None = None
    chat_type: ChatType = "private"
    #: True when the bot was spoken to (private chat, mention, reply to the bot, command,
    #: free-response chat). In groups an unaddressed message is only observed (docs/design.md#groups).
    addressed: bool = True
    attachments: tuple[Attachment, ...] = ()
    reply_to: QuotedMessage | None = None
    #: Who the message was forwarded from (a name, a chat's title), when it was.
    forwarded_from: str | None = None
    platform_message_id: str | None = None
    #: Unique per platform event; a redelivered event with a known key is ignored.
    dedupe_key: str | None = None
    #: The channel a thread belongs to (Discord): allowlists of channels cover its threads.
    parent_chat_id: str | None = None
    #: The sender's role ids where the platform has roles (Discord), for role allowlists.
    user_roles: tuple[str, ...] = ()
    #: The sender moderates the chat (Discord: Manage Messages), which group-wide
    #: commands (/new, /compress) ask for there.
    can_moderate: bool = False
    #: The platform shows this as pending until answered (a Discord slash command), so
    #: even a refusal in a group must say something rather than stay silent.
    needs_answer: bool = False
    is_edit: bool = False
    #: A "/name" that named no bot, in a group every bot receives (Telegram): if it is
    #: none of ours it is another bot's, and goes unanswered.
    bare_command: bool = False
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class OutboundMessage:
    platform: str
    chat_id: str
    text: str
    thread_id: str | None = None
    #: Platform id of the message this answers; adapters thread the reply to it.
    reply_to_message_id: str | None = None


class DeliveryError(NightowlError):
    """A platform refused or failed a delivery after the adapter's own retries."""

    def __init__(self, message: str, *, platform: str = "", chat_id: str = "") -> None:
        super().__init__(message)
        self.platform = platform
        self.chat_id = chat_id


class StartError(DeliveryError):
    """A platform refused the bot or could not be reached at start (a bad token, no
    network, a setting the platform requires): one sentence for the operator, no secret
    in it; ``nightowl run`` prints it and exits instead of a traceback."""


@dataclass(frozen=True)
class ChatMoved:
    """Not a message: a chat continues under another id (a Telegram group upgraded to a
    supergroup); the gateway moves the chat's session there (docs/design.md#chat-moves)."""

    platform: str
    old_chat_id: str
    new_chat_id: str


@dataclass(frozen=True)
class BotBlocked:
    """Not a message: a user blocked the bot in their private chat (Telegram's
    ``my_chat_member``, status ``kicked``); a pairing request of theirs is withdrawn."""

    platform: str
    chat_id: str
    user_id: str


#: What an adapter hands the gateway: a message, or something that happened to a chat.
Inbound = InboundMessage | ChatMoved | BotBlocked

#: The gateway's entry point; returns once the message is stored (or refused).
InboundSink = Callable[[Inbound], Awaitable[None]]


@dataclass(frozen=True)
class AdapterStatus:
    """What an operator sees of a platform's connection (the gateway's dashboard)."""

    #: Connected and receiving; None when the adapter cannot tell.
    connected: bool | None
    #: How it receives: "polling", "webhook", "gateway, 1 shard", "terminal"...
    mode: str = ""
    #: Why it is not receiving, in one sentence; "" when nothing is known to be wrong. It
    #: stays until traffic flows again: a restart alone does not clear it.
    problem: str = ""
    #: Since when (epoch seconds) ``problem`` holds.
    problem_since: float | None = None
    #: How often the adapter rebuilt its receiving connection since it started.
    restarts: int = 0


class MissedChat(Protocol):
    """A chat an adapter could catch up on, described for the gateway's allowlists."""

    @property
    def chat_id(self) -> str: ...
    @property
    def chat_type(self) -> ChatType: ...
    @property
    def parent_chat_id(self) -> str | None: ...
    @property
    def user_id(self) -> str | None: ...


class CatchUpSource(Protocol):
    """What the gateway tells an adapter that catches up about the chats it stored."""

    async def cursors(self, since: datetime) -> Sequence[tuple[int, int]]: ...

    def allows(self, chat: MissedChat) -> bool: ...


class ReplyStream(ABC):
    """A reply shown while it is being written (one message edited in place)."""

    @abstractmethod
    async def update(self, text_so_far: str) -> None:
        """Show the partial text; implementations rate-limit and may skip updates."""

    @abstractmethod
    async def finish(self, final_text: str) -> list[str]:
        """Show the final, formatted text and return the platform message ids."""


class Adapter(ABC):
    """One chat platform."""

    platform: str
    #: What the gateway must know of this platform (docs/design.md#platform-traits).
    traits: PlatformTraits = PlatformTraits()

    @abstractmethod
    async def start(self, sink: InboundSink) -> None:
        """Connect and begin passing inbound messages to ``sink``; returns once running."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop receiving, finish what is in flight, disconnect."""

    async def stop_receiving(self) -> None:  # noqa: B027 - optional; stop() covers it
        """Take no new updates but keep sending: the gateway drains turns in flight next."""

    @abstractmethod
    async def send(self, message: OutboundMessage) -> list[str]:
        """Deliver a reply (split and formatted for the platform); returns message ids.

        Raises :class:`DeliveryError` when the platform finally refuses it.
        """

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str, thread_id: str | None = None) -> AsyncIterator[None]:
        """Show 'typing…' in the chat for as long as the block runs."""
        yield

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        """A live reply for ``target``'s chat, or None when the adapter does not stream."""
        return None

    def status(self) -> AdapterStatus:
        """Whether the platform is connected now, and how it receives."""
        return AdapterStatus(connected=None)

    async def check(self) -> AdapterStatus:
        """:meth:`status`, after asking the platform what only it can tell (Telegram:
        updates waiting that polling does not get). Called periodically by the gateway's
        alerts; at most one platform call."""
        return self.status()

    async def restart_receiving(self) -> bool:
        """Rebuild the receiving connection from scratch (it went deaf); False when this
        adapter cannot (or need not: its library reconnects by itself)."""
        return False

    async def private_chat(self, user_id: str) -> str:
        """The chat id of the private chat with ``user_id`` (where the operator is told
        of alerts): the user's own id unless the platform says otherwise.

        Raises :class:`DeliveryError` when the platform cannot open one."""
        return user_id

    def catch_up_from(self, source: CatchUpSource) -> None:  # noqa: B027 - optional
        """Read what was missed while disconnected, after ``source``'s cursors: only an
        adapter whose :attr:`traits` say ``catches_up`` is given one."""
