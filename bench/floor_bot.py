"""The floor: the least a Telegram LLM bot can do per turn, to measure nightowl against.

A bare python-telegram-bot application whose one handler asks an OpenAI-compatible
model with the message text and sends the answer back as plain text. No storage, no
typing indicator, no formatting, no history, no retries of its own: what is left of a
turn is PTB's long poll and dispatch, one SDK request and one sendMessage. Updates are
handled concurrently (``concurrent_updates``), as a bot serving many chats would be.

With ``database`` (the "stored" floor) it also keeps what a bot that loses nothing must:
the message written and synced before the model is asked, the answer written and synced
before it is sent — one INSERT each, through ``asyncio.to_thread`` on a sqlite3
connection in WAL mode with ``synchronous=FULL``, as nightowl's store. Still no history,
no reads, no costs.

``bench/telegram_roundtrip.py --mode floor`` runs this and nightowl back to back on the
same fakes and prints the ratios. Run alone, it serves a real or fake Bot API:

    python bench/floor_bot.py --token T --bot-api URL --model-url URL [--database FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openai import AsyncOpenAI
from telegram import Update
from telegram.ext import Application, ContextTypes, MessageHandler, filters

if TYPE_CHECKING:  # imported only by the stored floor: the plain one's RSS has no SQLite
    import sqlite3


def build(
    token: str,
    bot_api: str,
    model_url: str,
    model: str = "fake-model",
    db: sqlite3.Connection | None = None,
) -> Application:
    client = AsyncOpenAI(base_url=model_url, api_key="floor", max_retries=0)

    async def keep(chat_id: int, role: str, text: str) -> None:
        if db is not None:  # autocommit: each INSERT its own synced transaction
            insert = "INSERT INTO messages(chat_id, role, text) VALUES (?, ?, ?)"
            await asyncio.to_thread(db.execute, insert, (chat_id, role, text))

    async def answer(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or not message.text:
            return
        await keep(message.chat_id, "user", message.text)
        completion = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": message.text}]
        )
        text = completion.choices[0].message.content or "…"
        await keep(message.chat_id, "assistant", text)
        await context.bot.send_message(message.chat_id, text)

    application = (
        Application.builder().token(token).base_url(bot_api).concurrent_updates(True).build()
    )
    application.add_handler(MessageHandler(filters.TEXT, answer))
    return application


def open_database(path: str) -> sqlite3.Connection:
    import sqlite3

    # Used from the executor's threads one call at a time (sqlite3 serializes the
    # connection itself); autocommit, so each INSERT is a transaction of its own.
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS messages"
        "(id INTEGER PRIMARY KEY, chat_id INTEGER, role TEXT, text TEXT)"
    )
    return db


async def serve(
    token: str,
    bot_api: str,
    model_url: str,
    stop: Any = None,
    polling: Callable[[], None] | None = None,
    database: str | None = None,
) -> None:
    """Poll until ``stop`` (a threading or multiprocessing Event) is set, or forever;
    ``polling`` is called once the bot is up (the benchmark reads its CPU time there);
    ``database``: a SQLite file to keep each message and answer in."""
    db = open_database(database) if database else None
    try:
        await _serve(build(token, bot_api, model_url, db=db), stop, polling)
    finally:
        if db is not None:
            db.close()


async def _serve(application: Application, stop: Any, polling: Callable[[], None] | None) -> None:
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
    parser.add_argument("--database", help="keep each message and answer in this SQLite file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(serve(args.token, args.bot_api, args.model_url, database=args.database))


if __name__ == "__main__":
    main()
