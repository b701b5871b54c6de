"""Config → adapter settings. Adapters never read the config themselves (STYLE: arrows)."""

from __future__ import annotations

from adapters.base import Adapter
from gateway.commands import COMMAND_LIST
from gateway.config import Config


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
    )
    return DiscordAdapter(settings)
