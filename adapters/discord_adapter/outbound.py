"""Replies out: split at 2000 characters, never pinging, through a channel or an interaction;
and the one map of discord.py's errors to ours (:func:`discord_errors`).

A reply that would need more than ``max_chunks`` messages is sent as its first part (with
a note) plus the whole text attached as ``reply.md``. The first part of a channel reply
references the user's message; parts answering a slash command go through the
interaction's followup webhook instead.

Every REST call that delivers (posts, edits, "typing…") runs inside
:func:`discord_errors`, like httpx's ``map_exceptions``: whatever discord.py or aiohttp
raise — ``HTTPException`` (``Forbidden``, ``NotFound``, ``DiscordServerError``),
``RateLimited``, a dropped connection, a timeout — leaves as a :class:`DiscordCallFailed`
(a :class:`DeliveryError`). discord.py has already retried what it retries (rate limits
behind Discord's proxy, 5xx).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Literal

import aiohttp
import discord

from adapters.base import DeliveryError, OutboundMessage, StartError
from adapters.chunking import find_code_fences, split_message

log = logging.getLogger(__name__)

PLATFORM = "discord"
MESSAGE_LIMIT = 2000
LONG_REPLY_FILENAME = "reply.md"
LONG_REPLY_NOTE = f"\n\n*(The full reply is attached as {LONG_REPLY_FILENAME}.)*"
#: Model output must never ping: no @everyone/@here, roles, users, or the replied-to user.
NO_PINGS = discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=False)
#: Failures below discord.py's HTTP layer (it raises HTTPException for what Discord says).
NETWORK_ERRORS = (aiohttp.ClientError, OSError, asyncio.TimeoutError)
#: Everything a discord.py call may raise that :func:`discord_errors` maps.
DISCORD_ERRORS = (discord.DiscordException, *NETWORK_ERRORS)

#: What went wrong: "forbidden" (403: missing permissions, blocked DMs), "not_found"
#: (404: unknown channel or message), "rate_limited" (429 not waited out), "server"
#: (5xx after discord.py's retries), "refused" (any other 4xx), "network" (no answer:
#: a dropped connection, a timeout), "other" (discord.py itself refused).
FailureKind = Literal[
    "forbidden", "not_found", "rate_limited", "server", "refused", "network", "other"
]


class DiscordCallFailed(DeliveryError):
    """A Discord call that failed; the message names the status and Discord's text only
    (never a token or a URL)."""

    def __init__(
        self,
        chat_id: str,
        kind: FailureKind,
        reason: str,
        *,
        status: int | None = None,
        code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(
            f"Discord refused the message: {reason}", platform=PLATFORM, chat_id=chat_id
        )
        self.kind: FailureKind = kind
        self.reason = reason
        #: The HTTP status and Discord's JSON error code, when Discord answered.
        self.status = status
        self.code = code
        #: Seconds Discord asked us to wait ("rate_limited").
        self.retry_after = retry_after


def _kind(error: BaseException) -> FailureKind:
    if isinstance(error, discord.RateLimited):
        return "rate_limited"
    if isinstance(error, discord.HTTPException):
        status = error.status
        named: dict[int, FailureKind] = {403: "forbidden", 404: "not_found", 429: "rate_limited"}
        return named.get(status) or ("server" if status >= 500 else "refused")
    return "network" if isinstance(error, NETWORK_ERRORS) else "other"


def map_discord_error(chat_id: str, error: BaseException) -> DiscordCallFailed:
    """The one mapping of a discord.py (or aiohttp) error to ours."""
    http = error if isinstance(error, discord.HTTPException) else None
    return DiscordCallFailed(
        chat_id,
        _kind(error),
        failure_reason(error),
        status=http.status if http is not None else None,
        code=http.code if http is not None else None,
        retry_after=error.retry_after if isinstance(error, discord.RateLimited) else None,
    )


@contextlib.contextmanager
def discord_errors(chat_id: str) -> Iterator[None]:
    """Run Discord calls for ``chat_id``: any discord.py or network error they raise
    leaves as a :class:`DiscordCallFailed` (chained to the original)."""
    try:
        yield
    except DISCORD_ERRORS as error:
        raise map_discord_error(chat_id, error) from error


#: Posts one part (content, optional file, whether it is the first part) and returns its id.
Poster = Callable[[str, "discord.File | None", bool], Awaitable[int]]


def channel_poster(client: discord.Client, message: OutboundMessage) -> Poster:
    """Posts into the message's channel (or thread); the first part replies to the user."""
    channel_id = int(message.thread_id or message.chat_id)
    channel = client.get_partial_messageable(channel_id)
    reference = reference_to(message, channel_id)

    async def post(content: str, file: discord.File | None, first: bool) -> int:
        extra: dict[str, Any] = {"file": file} if file else {}
        if first and reference is not None:
            extra["reference"] = reference
        with discord_errors(message.chat_id):
            sent = await channel.send(content, allowed_mentions=NO_PINGS, **extra)
        return sent.id

    return post


def reference_to(message: OutboundMessage, channel_id: int) -> discord.MessageReference | None:
    """The reference that makes a post a reply to the user's message, if it has one."""
    if not (message.reply_to_message_id and message.reply_to_message_id.isdigit()):
        return None
    return discord.MessageReference(
        message_id=int(message.reply_to_message_id),
        channel_id=channel_id,
        fail_if_not_exists=False,  # the user may have deleted it meanwhile
    )


def followup_poster(interaction: discord.Interaction, chat_id: str = "") -> Poster:
    """Posts as followups of a (deferred) slash-command interaction."""

    async def post(content: str, file: discord.File | None, first: bool) -> int:
        extra: dict[str, Any] = {"file": file} if file else {}
        with discord_errors(chat_id or str(interaction.channel_id)):
            sent = await interaction.followup.send(
                content, allowed_mentions=NO_PINGS, wait=True, **extra
            )
        return sent.id

    return post


async def post_parts(text: str, post: Poster, posted: list[str], *, max_chunks: int) -> list[str]:
    """Send ``text`` in parts through ``post``, appending each message id to ``posted``;
    raises :class:`DeliveryError` (the posters map discord.py's errors)."""
    shown = plain_unsafe_links(text)
    parts = split_message(shown, MESSAGE_LIMIT)
    attachment: bytes | None = None
    if len(parts) > max_chunks:
        parts = split_message(shown, MESSAGE_LIMIT - len(LONG_REPLY_NOTE))[:1]
        parts[0] += LONG_REPLY_NOTE
        attachment = text.encode()  # a file is not rendered: its links cannot be clicked
    for index, part in enumerate(parts):
        file = None
        if attachment is not None and index == 0:
            file = discord.File(io.BytesIO(attachment), filename=LONG_REPLY_FILENAME)
        posted.append(str(await post(part, file, index == 0)))
    return posted


#: Inline code (left alone), a masked link's ``](target`` or an autolink ``<scheme:/...>``.
_CODE_OR_LINK = re.compile(
    r"(?P<code>(`+).+?\2)"
    r"|\](?P<masked>\(\s*<?)(?P<target>[^\s)>]*)"
    r"|(?P<auto><)(?P<auto_target>[^\s:>]+:/[^\s>]*)>"
)
#: Links a reply may carry (docs/design.md#outbound-links).
_SAFE_URL = re.compile(r"(?i)(?:https?://|mailto:)")


def plain_unsafe_links(text: str) -> str:
    """``text`` with every link Discord would render that is not http(s) or mailto shown
    as plain text: a backslash before the ``(`` of ``[text](target)`` or the ``<`` of
    ``<scheme://...>`` (Discord shows the character, without the backslash, and no link).
    Code blocks and inline code are left as they are: nothing renders there."""
    out: list[str] = []
    pos = 0
    for fence in find_code_fences(text):
        out.append(_plain_links_outside_code(text[pos : fence.open_start]))
        out.append(text[fence.open_start : fence.close_end])
        pos = fence.close_end
    out.append(_plain_links_outside_code(text[pos:]))
    return "".join(out)


def _plain_links_outside_code(text: str) -> str:
    def plain(match: re.Match[str]) -> str:
        if match.group("code") is not None:
            return match.group(0)
        target = match.group("target") if match.group("masked") else match.group("auto_target")
        if _SAFE_URL.match(target):
            return match.group(0)
        if match.group("masked"):
            return "]\\" + match.group(0)[1:]
        return "\\" + match.group(0)

    return _CODE_OR_LINK.sub(plain, text)


class DiscordStartError(StartError):
    """Discord refused the bot or could not be reached at start."""


#: What a failed start raises: discord.py's and the network's errors, a closed gateway.
START_ERRORS = (*DISCORD_ERRORS, ConnectionError)


def start_failure(error: BaseException) -> DiscordStartError:
    """One sentence for the operator on why the start failed (never the token)."""
    if isinstance(error, discord.LoginFailure):
        why = "Discord refused the bot token — check platforms.discord.token"
    elif isinstance(error, discord.PrivilegedIntentsRequired):
        why = (
            "the bot needs the Message Content intent — turn it on in Discord's developer"
            " portal (Bot, Privileged Gateway Intents)"
        )
    elif isinstance(error, (*NETWORK_ERRORS, ConnectionError)):
        why = f"Discord cannot be reached ({type(error).__name__}: {error})"
    else:
        why = failure_reason(error)
    return DiscordStartError(f"Discord adapter could not start: {why}", platform=PLATFORM)


def failure_reason(error: BaseException) -> str:
    """Discord's reason for a failed call (status and text), or the error's type: never a
    token or a URL."""
    if isinstance(error, discord.HTTPException):
        return f"HTTP {error.status} {error.text or ''}".strip()
    return type(error).__name__


def delivery_error(chat_id: str, error: BaseException) -> DeliveryError:
    """Log a final delivery failure (channel id and Discord's reason only); ``error``
    mapped if it is not ours yet."""
    failed = error if isinstance(error, DeliveryError) else map_discord_error(chat_id, error)
    reason = failed.reason if isinstance(failed, DiscordCallFailed) else str(failed)
    log.warning("Discord refused a message to channel %s: %s", chat_id, reason)
    return failed


@contextlib.asynccontextmanager
async def typing_in(
    client: discord.Client | None, channel_id: int, interval: float
) -> AsyncIterator[None]:
    """Show "typing…" in the channel, refreshed, until the block ends."""
    if client is None:
        yield
        return
    channel = client.get_partial_messageable(channel_id)
    refresher = asyncio.create_task(keep_typing(channel, interval))
    try:
        yield
    finally:
        refresher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresher


async def keep_typing(channel: discord.PartialMessageable, interval: float) -> None:
    """Trigger "typing…" every ``interval`` seconds until cancelled; failures are cosmetic."""
    while True:
        try:
            with discord_errors(str(channel.id)):
                await channel.typing()
        except DeliveryError as error:
            log.debug("Discord typing indicator failed in %s: %s", channel.id, error)
        await asyncio.sleep(interval)
