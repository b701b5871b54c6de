"""The ``nightowl`` command line."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from adapters.base import Adapter
from adapters.console import ConsoleAdapter
from gateway.app import Gateway
from gateway.config import (
    Config,
    ConfigError,
    load_config,
    missing_llm_key_message,
    resolve_api_key,
)
from gateway.logs import setup_logging

log = logging.getLogger("nightowl")

EXIT_CONFIG = 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_CONFIG
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"nightowl: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(config, fmt=args.log_format)
    return int(args.handler(config, args) or 0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nightowl", description="A chat gateway that never loses a message."
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c", "--config", help="config file (default ./config.yaml, then ~/.nightowl/config.yaml)"
    )
    common.add_argument("--log-format", choices=["text", "json"], default=None)
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser(
        "run", parents=[common], help="run every enabled platform (the console when none is)"
    )
    run.set_defaults(handler=cmd_run)
    chat = commands.add_parser("chat", parents=[common], help="chat in this terminal")
    chat.add_argument("--name", default=None, help="console session name (default from config)")
    chat.set_defaults(handler=cmd_chat)
    return parser


def _require_llm_key(config: Config) -> bool:
    model = config.model
    if resolve_api_key(model.provider, model.api_key, model.base_url) is None:
        print(f"nightowl: {missing_llm_key_message(config)}", file=sys.stderr)
        return False
    return True


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    if not _require_llm_key(config):
        return EXIT_CONFIG
    adapters: list[Adapter] = build_platform_adapters(config)
    console = None
    if config.console_enabled:
        console = ConsoleAdapter(config.platforms.console.name)
        adapters.append(console)
    return asyncio.run(serve(config, adapters, console))


def cmd_chat(config: Config, args: argparse.Namespace) -> int:
    if not _require_llm_key(config):
        return EXIT_CONFIG
    console = ConsoleAdapter(args.name or config.platforms.console.name)
    return asyncio.run(serve(config, [console], console))


def build_platform_adapters(config: Config) -> list[Adapter]:
    """Adapters for every enabled chat platform (imported only when enabled)."""
    adapters: list[Adapter] = []
    if config.platforms.telegram.enabled:
        from gateway.platforms import telegram_adapter

        adapters.append(telegram_adapter(config))
    if config.platforms.discord.enabled:
        from gateway.platforms import discord_adapter

        adapters.append(discord_adapter(config))
    return adapters


async def serve(config: Config, adapters: list[Adapter], console: ConsoleAdapter | None) -> int:
    """Run until SIGTERM/SIGINT (or the console's input ends); a second signal exits at once."""
    gateway = Gateway(config, adapters)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            log.warning("second signal: exiting now")
            os._exit(1)
        log.info("shutting down: finishing replies in progress (signal again to exit now)")
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    await gateway.start()
    waiters = [asyncio.ensure_future(stop.wait())]
    if console is not None:
        waiters.append(asyncio.ensure_future(console.closed.wait()))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
        await gateway.stop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
