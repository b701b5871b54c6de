"""Config → adapter settings. Adapters never read the config themselves (STYLE: arrows)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from adapters.base import Adapter, InboundMessage
from gateway.commands import COMMAND_LIST
from gateway.config import Config
from gateway.router import authorize
from gateway.store import SQLiteStore

if TYPE_CHECKING:
    from adapters.discord_adapter.catch_up import CatchUpChat


def telegram_adapter(config: Config) -> Adapter:
    from adapters.telegram import TelegramAdapter, TelegramSettings, WebhookSettings

    telegram = config.platforms.telegram
    webhook = None
    if telegram.webhook is not None:
        webhook = WebhookSettings(
            url=telegram.webhook.url,
            listen=telegram.webhook.listen,
            port=telegram.webhook.port,
            secret=telegram.webhook.secret_token or "",
        )
    settings = TelegramSettings(
        token=telegram.token or "",
        base_url=telegram.base_url,
        require_mention=telegram.require_mention,
        free_response_chats=telegram.free_response_chats,
        stream=telegram.stream,
        webhook=webhook,
        health_timeout_seconds=telegram.health_timeout_seconds,
        bot_commands=COMMAND_LIST,
    )
    return TelegramAdapter(settings)


def discord_adapter(config: Config) -> Adapter:
    from adapters.discord_adapter import DiscordAdapter, DiscordSettings

    discord = config.platforms.discord
    settings = DiscordSettings(
        token=discord.token or "",
        require_mention=discord.require_mention,
        free_response_channels=discord.free_response_channels,
        allow_bots=discord.allow_bots,
        slash_commands=COMMAND_LIST,
        catch_up_hours=discord.catch_up_hours,
    )
    return DiscordAdapter(settings)


class StoredCatchUp:
    """The Discord adapter's catch-up source: cursors from what the store holds, chats
    judged by the same allowlists as every message (SPEC F4)."""

    def __init__(self, store: SQLiteStore, config: Config) -> None:
        self.store = store
        self.config = config

    async def cursors(self, since: datetime) -> list[tuple[int, int]]:
        newest = await self.store.newest_stored_message_ids("discord", since.timestamp())
        return [(int(chat), last) for chat, last in sorted(newest.items()) if chat.isdigit()]

    def allows(self, chat: CatchUpChat) -> bool:
        # An unaddressed message from nobody in particular: only an allowed place (or, in
        # a DM, an allowed user) lets it in.
        probe = InboundMessage(
            platform="discord",
            chat_id=chat.chat_id,
            user_id=chat.user_id or "",
            text="",
            chat_type=chat.chat_type,
            addressed=False,
            parent_chat_id=chat.parent_chat_id,
        )
        return authorize(self.config, probe).allowed


def catch_up_from_store(adapters: Iterable[Adapter], store: SQLiteStore, config: Config) -> None:
    """Let the Discord adapter read what it missed while disconnected, after the newest
    message ``store`` holds in each chat. The gateway calls this once it has its store."""
    for adapter in adapters:
        if adapter.platform != "discord":
            continue
        from adapters.discord_adapter import DiscordAdapter

        if isinstance(adapter, DiscordAdapter):
            adapter.catch_up_from(StoredCatchUp(store, config))
