"""``nightowl init``'s last step: the owner pairs by sending the bot a one-time code.

The platform's real adapter (the one ``nightowl run`` starts, built from the config just
written) receives; its sink waits for a private message carrying the code. Its sender is
the owner: their id goes to ``allowed_users``. Every other message that arrives meanwhile
is let go unanswered (no gateway runs yet to answer it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass

from adapters.base import Adapter, Inbound, InboundMessage, OutboundMessage
from gateway.build import platform_adapters
from gateway.config.schema import Config
from gateway.conversation.pairing import new_code, normalise_code, printable

log = logging.getLogger(__name__)

#: Sent to the owner once paired.
WELCOME = "Paired: you are this bot's owner. Start nightowl (nightowl run) and write to me."


@dataclass(frozen=True)
class Owner:
    platform: str
    user_id: str
    user_name: str


def carries(message: InboundMessage, code: str) -> bool:
    """A private message whose words include ``code`` (``/start CODE`` from the link)."""
    if message.chat_type != "private":
        return False
    return any(normalise_code(word) == code for word in message.text.split())


def invitation(platform: str, code: str, bot_username: str | None) -> str:
    if platform == "telegram" and bot_username:
        return (
            f"Open https://t.me/{bot_username}?start={code} and press Start "
            f"(or send the bot: /start {code})"
        )
    return f"Send the bot this code in a direct message: {code}"


async def wait_for_owner(
    config: Config,
    platform: str,
    within: float,
    say: Callable[[str], None],
) -> Owner | None:
    """Start ``platform``'s adapter, print the code and wait up to ``within`` seconds (or
    until SIGINT) for the owner's message; None when skipped or timed out."""
    adapter = next(a for a in platform_adapters(config) if a.platform == platform)
    code = new_code()
    found: asyncio.Future[Owner] = asyncio.get_running_loop().create_future()

    async def sink(event: Inbound) -> None:
        if not isinstance(event, InboundMessage) or found.done() or not carries(event, code):
            return
        found.set_result(Owner(event.platform, event.user_id, event.user_name))
        with contextlib.suppress(Exception):  # the pairing holds even if the welcome fails
            await adapter.send(OutboundMessage(event.platform, event.chat_id, WELCOME))

    loop = asyncio.get_running_loop()
    skipped = asyncio.Event()
    # Before anything is printed: a Ctrl-C as soon as the code shows must skip, not kill.
    loop.add_signal_handler(signal.SIGINT, skipped.set)
    try:
        await adapter.start(sink)
        try:
            say(invitation(platform, code, _bot_username(adapter)))
            minutes = max(1, round(within / 60))
            say(f"Waiting for your message (up to {minutes} min; Ctrl-C skips)...")
            return await _first(found, skipped, within)
        finally:
            await adapter.stop()
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _first(
    found: asyncio.Future[Owner], skipped: asyncio.Event, within: float
) -> Owner | None:
    skip: asyncio.Future[object] = asyncio.ensure_future(skipped.wait())
    try:
        waiters: list[asyncio.Future[object]] = [found, skip]  # type: ignore[list-item]
        await asyncio.wait(waiters, timeout=within, return_when=asyncio.FIRST_COMPLETED)
    finally:
        skip.cancel()
    return found.result() if found.done() else None


def _bot_username(adapter: Adapter) -> str | None:
    identity = getattr(adapter, "identity", None)
    username = getattr(identity, "username", None)
    return printable(username) if username else None
