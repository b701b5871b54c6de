"""Pairing: how a stranger becomes a user without anyone editing the config
(docs/design.md#pairing).

A stranger who writes in a private chat gets a code (:meth:`Pairing.request`) and
nothing else happens: their message is neither stored nor given to the model. The owner
approves the code with ``nightowl pairing approve CODE`` or ``/pair approve CODE``; from
then on :meth:`Pairing.is_approved` lets the user in beside the config's allowlist, in
this process at once and in a running gateway from its next check (approvals live in
the database, and the store's revision says when another process changed them).
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Callable, Collection, Mapping

from adapters.base import InboundMessage
from gateway.config.schema import Config
from gateway.conversation.access import platform_sections, rules
from gateway.store import ApprovedUser, PairingRequest, PairingStore

log = logging.getLogger(__name__)

#: No 0/O, 1/I/L: a code read aloud or copied by hand survives.
CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
CODE_LENGTH = 8
CODE_SECONDS = 3600
#: Pending requests per platform; more strangers are refused until one is answered or expires.
MAX_PENDING = 3
#: Once every place is taken, the waiting codes end within this many seconds: throwaway
#: accounts cannot hold the places for an hour.
FULL_CODE_SECONDS = 900
#: A stranger's name is theirs to choose: kept short.
NAME_CHARS = 64

FULL = (
    "This is a private bot, and too many access requests are already waiting for its "
    "owner. Please try again in a quarter of an hour."
)
NOT_OWNER = "Only the bot's owner can answer pairing requests, in a private chat with me."
PAIR_USAGE = (
    "Usage: /pair (list the requests), /pair approve CODE, /pair deny CODE, "
    "/pair clear (deny them all)"
)


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalise_code(text: str) -> str:
    """What the owner typed as a code: case, spaces and dashes do not matter."""
    return "".join(text.split()).replace("-", "").upper()


def printable(text: str) -> str:
    """``text`` with control characters shown as escapes: a stranger's name reaches the
    operator's terminal, where an escape sequence would be obeyed."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def who(platform: str, user_id: str, user_name: str) -> str:
    """``telegram:123 (Ada)``: how an operator names a user (``revoke`` takes the first part)."""
    name = printable(user_name)
    return f"{platform}:{user_id}" + (f" ({name})" if name else "")


def describe_request(request: PairingRequest, now: float) -> str:
    minutes = max(1, math.ceil((request.expires_at - now) / 60))
    return (
        f"{request.code}  {who(request.platform, request.user_id, request.user_name)}"
        f"  {minutes} min left"
    )


def describe_user(user: ApprovedUser) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(user.approved_at))
    return (
        f"{who(user.platform, user.user_id, user.user_name)}  approved {when}"
        f" by {printable(user.approved_by)}"
    )


def config_owners(config: Config) -> dict[str, frozenset[str]]:
    """Who may answer pairing requests in chat: the users the config itself allows
    (``allowed_users``; not roles, chats or paired users), per platform."""
    return {name: rules(config, name).users for name in platform_sections(config)}


class Pairing:
    """Pairing requests and approved users over a :class:`PairingStore`.

    ``clock`` gives epoch seconds (codes expire by it); ``owners`` are the user ids per
    platform that may use ``/pair`` (see :func:`config_owners`).
    """

    def __init__(
        self,
        store: PairingStore,
        clock: Callable[[], float] = time.time,
        *,
        owners: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.owners = owners or {}
        self._approved: set[tuple[str, str]] = set()
        self._revision: int | None = None  # None: never read

    async def load(self) -> None:
        """Read the approved users (at start; :meth:`is_approved` reads them itself when
        another process changed them)."""
        self._revision = None
        await self._refresh()

    async def is_approved(self, platform: str, user_id: str) -> bool:
        """Whether ``user_id`` was let in by pairing (the config's allowlist is not asked)."""
        await self._refresh()
        return (platform, user_id) in self._approved

    async def _refresh(self) -> None:
        # The revision first, then the users: a change committed in between makes the next
        # call read them again, never leaves a stale set marked as current.
        revision = await self.store.revision()
        if revision == self._revision:
            return
        users = await self.store.approved()
        self._approved = {(user.platform, user.user_id) for user in users}
        self._revision = revision

    async def request(self, platform: str, user_id: str, user_name: str, chat_id: str) -> str:
        """What to answer a stranger: their pending code (a new one, or the one they have),
        or a polite refusal when ``MAX_PENDING`` requests already wait on ``platform``."""
        now = self.clock()
        candidate = PairingRequest(
            platform=platform,
            user_id=user_id,
            user_name=(user_name or "")[:NAME_CHARS],
            chat_id=chat_id,
            code=new_code(),
            created_at=now,
            expires_at=now + CODE_SECONDS,
        )
        stored = await self.store.request(
            candidate, limit=MAX_PENDING, fresh_code=new_code, full_seconds=FULL_CODE_SECONDS
        )
        if stored is None:
            log.info(
                "pairing refused for %s:%s: %d requests pending", platform, user_id, MAX_PENDING
            )
            return FULL
        if stored.created_at == now:
            log.info("pairing requested by %s", who(platform, user_id, stored.user_name))
        minutes = max(1, math.ceil((stored.expires_at - now) / 60))
        return (
            f"This is a private bot. To ask its owner for access, send them this code: "
            f"{stored.code}\nIt is valid for up to {minutes} more minute{'s' * (minutes != 1)} "
            "(less once many people are waiting). Until the owner approves "
            "it, nothing you write here is read or kept."
        )

    async def approve(self, code: str, by: str) -> ApprovedUser | None:
        """Let in the user whose pending request holds ``code``; None when no unexpired
        request does. ``by``: who approved (``cli``, ``telegram:<owner id>``)."""
        user = await self.store.approve(normalise_code(code), by, self.clock())
        if user is not None:
            self._approved.add((user.platform, user.user_id))
        return user

    async def deny(self, code: str) -> bool:
        """Drop the pending request holding ``code``; False when none was pending."""
        return await self.deny_request(code) is not None

    async def deny_request(self, code: str) -> PairingRequest | None:
        """:meth:`deny`, returning the request dropped (to say whose it was)."""
        return await self.store.deny(normalise_code(code), self.clock())

    async def withdraw(self, platform: str, user_id: str) -> bool:
        """Drop a user's pending request (they blocked the bot); False when none waited."""
        withdrawn = await self.store.withdraw(self.clock(), platform, user_id)
        for request in withdrawn:
            log.info(
                "pairing request withdrawn: %s blocked the bot",
                who(platform, user_id, request.user_name),
            )
        return bool(withdrawn)

    async def clear(self, platform: str | None = None) -> list[PairingRequest]:
        """Drop every pending request (of ``platform``): the operator clears the places."""
        return await self.store.withdraw(self.clock(), platform)

    async def revoke(self, platform: str, user_id: str) -> bool:
        """Take back an approval; False when the user was not approved by pairing."""
        revoked = await self.store.revoke(platform, user_id)
        self._approved.discard((platform, user_id))
        return revoked

    async def pending(self) -> list[PairingRequest]:
        return await self.store.pending(self.clock())

    async def approved(self) -> list[ApprovedUser]:
        return await self.store.approved()

    # -- /pair (gateway/conversation/commands.py) -------------------------------------------

    def may_answer(self, message: InboundMessage) -> bool:
        """``/pair`` is for an owner the config allows, in their private chat."""
        owners = self.owners.get(message.platform, ())
        return message.chat_type == "private" and message.user_id in owners

    async def command(self, message: InboundMessage, argument: str) -> str:
        """The answer to ``/pair [approve|deny CODE]``."""
        if not self.may_answer(message):
            return NOT_OWNER
        action, _, code = argument.strip().partition(" ")
        action = action.lower()
        if action in ("", "list"):
            return await self._list_for_chat()
        if action == "clear":
            cleared = await self.clear()
            return f"Denied {len(cleared)} waiting request(s)." if cleared else "None were waiting."
        if action not in ("approve", "deny") or not code.strip():
            return PAIR_USAGE
        if action == "approve":
            by = f"{message.platform}:{message.user_id}"
            user = await self.approve(code, by)
            if user is None:
                return _no_request(code)
            log.info("pairing approved by %s: %s:%s", by, user.platform, user.user_id)
            return (
                f"Approved {who(user.platform, user.user_id, user.user_name)}: "
                "their next message gets an answer."
            )
        denied = await self.deny_request(code)
        if denied is None:
            return _no_request(code)
        return f"Denied {who(denied.platform, denied.user_id, denied.user_name)}."

    async def _list_for_chat(self) -> str:
        waiting = await self.pending()
        if not waiting:
            return "No pairing requests are waiting."
        now = self.clock()
        lines = [describe_request(request, now) for request in waiting]
        return "\n".join(
            ["Pairing requests:", *lines, "Answer with /pair approve CODE or /pair deny CODE."]
        )


def _no_request(code: str) -> str:
    return (
        f"No pending request has the code {printable(normalise_code(code))}: it expired or "
        "was answered already. /pair lists the ones waiting."
    )
