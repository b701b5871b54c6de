"""The floor: the least a Telegram LLM bot can do per turn, to measure nightowl against.

A bare python-telegram-bot application whose one handler asks an OpenAI-compatible
model with the message text and sends the answer back as plain text. No storage, no
typing indicator, no formatting, no history, no retries of its own: what is left of a
turn is PTB's long poll and dispatch, one SDK request and one sendMessage. Updates are
handled concurrently (``concurrent_updates``), as a bot serving many chats would be.

``bench/telegram_roundtrip.py --mode floor`` runs this and nightowl back to back on the
same fakes and prints the ratios. Run alone, it serves a real or fake Bot API:

    python bench/floor_bot.py --token T --bot-api URL --model-url URL [--model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from typing import Any

from openai import AsyncOpenAI
from telegram import Update
from telegram.ext import Application, ContextTypes, MessageHandler, filters


def build(token: str, bot_api: str, model_url: str, model: str = "fake-model") -> Application:
    client = AsyncOpenAI(base_url=model_url, api_key="floor", max_retries=0)

    async def answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or not message.text:
            return
        completion = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": message.text}]
        )
        text = completion.choices[0].message.content or "…"
        await context.bot.send_message(message.chat_id, text)

    application = (
        Application.builder().token(token).base_url(bot_api).concurrent_updates(True).build()
    )
    application.add_handler(MessageHandler(filters.TEXT, answer))
    return application


async def serve(
    token: str,
    bot_api: str,
    model_url: str,
    stop: Any = None,
    polling: Callable[[], None] | None = None,
) -> None:
    """Poll until ``stop`` (a threading or multiprocessing Event) is set, or forever;
    ``polling`` is called once the bot is up (the benchmark reads its CPU time there)."""
    application = build(token, bot_api, model_url)
    async with application:
        await application.start()
        assert application.updater is not None
        await application.updater.start_polling(poll_interval=0.0, timeout=30)
        if polling is not None:
            polling()
        try:
            if stop is None:
                await asyncio.Event().wait()
            else:
                await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        finally:
            await application.updater.stop()
            await application.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--token", required=True)
    parser.add_argument("--bot-api", required=True, help="e.g. https://api.telegram.org/bot")
    parser.add_argument("--model-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(serve(args.token, args.bot_api, args.model_url))


if __name__ == "__main__":
    main()
