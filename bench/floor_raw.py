"""The raw floor: the least a Python Telegram LLM bot can do per turn.

No SDKs and no storage: one aiohttp session long-polls ``getUpdates``, and each text
message becomes one raw POST to an OpenAI-compatible ``/chat/completions`` (not
streamed) and one raw ``sendMessage``, side by side per update. No retries, no
formatting, no typing indicator, nothing remembered. What is left is Python, asyncio and
aiohttp: the limit that ``bench/floor_bot.py`` (python-telegram-bot + the openai SDK)
and nightowl are measured against (``bench/telegram_roundtrip.py --mode floor`` prints
the ratios to both). Run alone, it serves a real or fake Bot API:

    python bench/floor_raw.py --token T --bot-api URL --model-url URL [--model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable
from typing import Any

import aiohttp

log = logging.getLogger(__name__)


async def _answer(
    session: aiohttp.ClientSession, api: str, model_url: str, model: str, message: dict
) -> None:
    body = {"model": model, "messages": [{"role": "user", "content": message["text"]}]}
    async with session.post(f"{model_url}/chat/completions", json=body) as response:
        completion = await response.json()
    text = completion["choices"][0]["message"]["content"] or "…"
    reply = {"chat_id": message["chat"]["id"], "text": text}
    async with session.post(f"{api}/sendMessage", json=reply) as response:
        await response.read()


async def _poll(
    session: aiohttp.ClientSession, api: str, model_url: str, model: str, tasks: set[Any]
) -> None:
    offset = 0
    while True:
        query = {"offset": offset, "timeout": 30, "allowed_updates": ["message"]}
        async with session.post(f"{api}/getUpdates", json=query) as response:
            updates = (await response.json())["result"]
        for update in updates:
            offset = update["update_id"] + 1
            message = update.get("message") or {}
            if message.get("text"):
                task = asyncio.create_task(_answer(session, api, model_url, model, message))
                tasks.add(task)
                task.add_done_callback(tasks.discard)


async def serve(
    token: str,
    bot_api: str,
    model_url: str,
    stop: Any = None,
    polling: Callable[[], None] | None = None,
    model: str = "fake-model",
) -> None:
    """Poll until ``stop`` (a threading or multiprocessing Event) is set, or forever;
    ``polling`` is called once the bot is up (as ``bench/floor_bot.py: serve``)."""
    api = f"{bot_api}{token}"
    headers = {"Authorization": "Bearer floor"}
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    tasks: set[Any] = set()
    async with aiohttp.ClientSession(headers=headers, timeout=timeout) as session:
        poller = asyncio.create_task(_poll(session, api, model_url.rstrip("/"), model, tasks))
        if polling is not None:
            polling()
        try:
            if stop is None:
                await poller
            else:
                await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        finally:
            poller.cancel()
            await asyncio.gather(poller, *tasks, return_exceptions=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--token", required=True)
    parser.add_argument("--bot-api", required=True, help="e.g. https://api.telegram.org/bot")
    parser.add_argument("--model-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default="fake-model")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(serve(args.token, args.bot_api, args.model_url, model=args.model))


if __name__ == "__main__":
    main()
