"""Telegram adapter (python-telegram-bot): see :class:`TelegramAdapter`."""

from adapters.telegram.adapter import TelegramAdapter, TelegramStartError
from adapters.telegram.formatting import markdown_to_telegram_html
from adapters.telegram.settings import TELEGRAM_MESSAGE_LIMIT, TelegramSettings, WebhookSettings

__all__ = [
    "TELEGRAM_MESSAGE_LIMIT",
    "TelegramAdapter",
    "TelegramSettings",
    "TelegramStartError",
    "WebhookSettings",
    "markdown_to_telegram_html",
]
