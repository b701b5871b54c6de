"""Who may talk to the bot, and what their messages may do (docs/design.md#authorization).

The rule is the same on every platform, and it fails closed:

- A private chat: the sender must be allowed — listed in ``allowed_users`` (or, on
  Discord, holding one of ``allowed_roles``), or approved through pairing. A stranger
  gets a pairing code, or (``pairing: false``) one refusal naming their id; their
  message is never stored and never reaches the model.
- A group, channel or thread: the place must be allowed (``allowed_chats`` /
  ``allowed_channels``); elsewhere the bot stays silent and stores nothing, whoever
  speaks. In an allowed place only an allowed user starts a turn, unless the platform's
  ``group_members: all``; everyone else's messages are context at most (with
  ``groups.observe``), marked as untrusted, never instructions. A message with no
  identifiable sender starts nothing.
- ``/new``, ``/compress`` and ``/model NAME`` change the chat for everyone in a group: they need
  an allowed user (where groups have moderators, as on Discord, one who also moderates —
  Manage Messages — or holds an allowed role).

What differs between platforms is asked of their traits (docs/design.md#platform-traits)
and read from their config section, never decided by their names.

Nothing here downloads anything: attachments are fetched after this judgement, and only
for a message that may start a turn.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from adapters.base import PRIVATE_CHAT_TYPES, InboundMessage, PlatformTraits
from gateway.config.schema import Config
from gateway.platforms import Platforms

NOT_HERE = "I don't answer here. Ask the bot's owner to allow this channel."
NOT_YOU = "Only the people this bot works for can ask it things here."
#: A refused sender hears about it at most this often.
REFUSAL_PAUSE_SECONDS = 3600.0


class Approvals(Protocol):
    """Users approved through pairing (docs/design.md#pairing)."""

    async def is_approved(self, platform: str, user_id: str) -> bool: ...


class EarlierIds(Protocol):
    """The ids a chat had before it moved (docs/design.md#chat-moves)."""

    def earlier_ids(self, platform: str, chat_id: str) -> list[str]: ...


@dataclass(frozen=True)
class Verdict:
    """What a message may do."""

    #: It may start a turn (when addressed to the bot).
    turn: bool = False
    #: It may be stored as context (group chatter).
    observe: bool = False
    #: Its sender is an allowed user, not merely a member of an allowed group.
    trusted: bool = False
    #: A stranger in a private chat, to be answered with a pairing code.
    pair: bool = False
    #: What to tell the sender instead (at most once an hour).
    refusal: str | None = None


@dataclass(frozen=True)
class Rules:
    """A platform's allowlists, from its section of the config's ``platforms``."""

    users: frozenset[str] = frozenset()
    #: Allowed groups, channels (``allowed_chats``, ``allowed_channels``).
    places: frozenset[str] = frozenset()
    roles: frozenset[str] = frozenset()
    group_members: str = "allowed"
    pairing: bool = False


def platform_sections(config: Config) -> list[str]:
    """The platforms the config has a section for, in its order."""
    return [section.name for section in dataclasses.fields(config.platforms)]


def rules(config: Config, platform: str) -> Rules:
    """The allowlists of ``platform``'s config section; none for a platform without one."""
    if platform not in platform_sections(config):
        return Rules()
    settings = getattr(config.platforms, platform)

    def listed(key: str) -> frozenset[str]:
        return frozenset(getattr(settings, key, ()))

    return Rules(
        users=listed("allowed_users"),
        places=listed("allowed_chats") | listed("allowed_channels"),
        roles=listed("allowed_roles"),
        group_members=getattr(settings, "group_members", "allowed"),
        pairing=bool(getattr(settings, "pairing", False)),
    )


def place_allowed(config: Config, message: InboundMessage) -> bool:
    """Whether the chat is an allowed group, channel (or a thread of one)."""
    places = rules(config, message.platform).places
    return message.chat_id in places or (
        message.parent_chat_id is not None and message.parent_chat_id in places
    )


def user_listed(config: Config, message: InboundMessage) -> bool:
    """Whether the sender is on the config's allowlist (users, or roles where the
    platform has them)."""
    if not message.user_id:
        return False
    allowed = rules(config, message.platform)
    return message.user_id in allowed.users or any(
        role in allowed.roles for role in message.user_roles
    )


def may_use_group_commands(
    config: Config, message: InboundMessage, traits: PlatformTraits, *, trusted: bool
) -> bool:
    """``/new`` and ``/compress``: in a private chat anyone allowed there; in a group an
    allowed user — by the config, never by pairing, whatever ``group_members`` lets talk —
    who, where groups have moderators (Discord), also moderates or holds an allowed role."""
    if message.chat_type in PRIVATE_CHAT_TYPES:
        return True
    if not trusted or not user_listed(config, message):
        return False
    if not traits.moderated_groups:
        return True
    roles = rules(config, message.platform).roles
    return message.can_moderate or any(role in roles for role in message.user_roles)


class Access:
    """Judges every inbound message before anything else happens to it."""

    def __init__(
        self,
        config: Config,
        approvals: Approvals | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        moves: EarlierIds | None = None,
        platforms: Platforms,
    ) -> None:
        self.config = config
        self.approvals = approvals
        self.moves = moves
        self.clock = clock
        #: The platforms whose messages are judged; any other's are refused silently.
        self.platforms = platforms
        self._refused: dict[tuple[str, str], float] = {}

    async def judge(self, message: InboundMessage) -> Verdict:
        if message.platform not in self.platforms:
            return Verdict()
        if self.platforms[message.platform].operator_only:
            return Verdict(turn=True, observe=True, trusted=True)
        listed = user_listed(self.config, message)
        if message.chat_type == "private":
            if listed or await self._paired(message) or place_allowed(self.config, message):
                return Verdict(turn=True, observe=True, trusted=True)
            if self._pairing_on(message.platform):
                return Verdict(pair=True)
            return Verdict(refusal=_stranger_refusal(message))
        if not self.place_allowed(message):
            # Unknown places get silence — unless the platform would otherwise show the
            # user a request hanging forever (a Discord slash command).
            return Verdict(refusal=NOT_HERE if message.needs_answer else None)
        # Pairing grants a private chat; in groups a paired person counts only where the
        # operator says so (group_members: paired).
        members = self._group_members(message.platform)
        trusted = listed or (members == "paired" and await self._paired(message))
        turn = trusted or members == "all"
        turn = turn and bool(message.user_id)  # no identifiable sender: starts nothing
        refusal = NOT_YOU if message.needs_answer and not turn else None
        return Verdict(turn=turn, observe=True, trusted=trusted, refusal=refusal)

    def may_use_group_commands(self, message: InboundMessage, *, trusted: bool) -> bool:
        """See :func:`may_use_group_commands`."""
        traits = self.platforms[message.platform]
        return may_use_group_commands(self.config, message, traits, trusted=trusted)

    def place_allowed(self, message: InboundMessage) -> bool:
        """An allowed place, under its id or one it had before it moved."""
        if place_allowed(self.config, message):
            return True
        return self.chat_allowed(message.platform, message.chat_id)

    def chat_allowed(self, platform: str, chat_id: str) -> bool:
        """Whether a chat is an allowed place, under its id or one it had before it moved."""
        places = rules(self.config, platform).places
        if chat_id in places:
            return True
        if self.moves is None:
            return False
        return any(old in places for old in self.moves.earlier_ids(platform, chat_id))

    def should_tell(self, message: InboundMessage) -> bool:
        """Whether a refused sender is told (again): at most once an hour per user."""
        key = (message.platform, message.user_id)
        now = self.clock()
        last = self._refused.get(key)
        if last is not None and now - last < REFUSAL_PAUSE_SECONDS:
            return False
        self._refused[key] = now
        if len(self._refused) > 10_000:  # forget the oldest; a refusal again is harmless
            for stale in sorted(self._refused, key=self._refused.__getitem__)[:5_000]:
                del self._refused[stale]
        return True

    def tell_again_after(self, message: InboundMessage, seconds: float) -> None:
        """The sender may be told again after ``seconds`` rather than an hour (a pairing
        queue that was full frees within a quarter hour)."""
        key = (message.platform, message.user_id)
        if key in self._refused:
            self._refused[key] = self.clock() - REFUSAL_PAUSE_SECONDS + seconds

    async def quoted_trusted(self, message: InboundMessage) -> bool:
        """Whether the author of the message ``message`` replies to may instruct: the bot,
        anyone in a private chat (it is the user's or the bot's own), in a group an allowed
        user by id (roles of a quoted author are unknown) — or anyone under
        ``group_members: all``."""
        quote = message.reply_to
        if quote is None or quote.from_bot or message.chat_type in PRIVATE_CHAT_TYPES:
            return True
        members = self._group_members(message.platform)
        if members == "all":
            return True
        author = replace(message, user_id=quote.author_id, user_roles=())
        if not quote.author_id:
            return False
        return user_listed(self.config, author) or (
            members == "paired" and await self._paired(author)
        )

    async def _paired(self, message: InboundMessage) -> bool:
        if self.approvals is None or not message.user_id:
            return False
        return await self.approvals.is_approved(message.platform, message.user_id)

    def _pairing_on(self, platform: str) -> bool:
        return self.approvals is not None and rules(self.config, platform).pairing

    def _group_members(self, platform: str) -> str:
        return rules(self.config, platform).group_members


def _stranger_refusal(message: InboundMessage) -> str:
    return (
        f"Sorry, this is a private bot. Your user id is {message.user_id} — ask its owner "
        f"to add it to platforms.{message.platform}.allowed_users."
    )
