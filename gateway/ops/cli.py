"""The ``nightowl`` command line."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from adapters.base import Adapter, StartError
from gateway.config.schema import (
    Config,
    ConfigError,
    load_config,
    missing_llm_key_message,
    resolve_api_key,
)
from gateway.logs import setup_logging
from gateway.ops.backup_cli import add_backup_parsers
from gateway.ops.backup_units import DEFAULT_KEEP
from gateway.ops.init_cli import add_init_parser
from gateway.ops.memory_cli import add_memory_parser
from gateway.ops.migrate import add_migrate_parser
from gateway.ops.service import DEFAULT_DRAIN_SECONDS, Notifier
from gateway.ops.usage_cli import add_usage_parser
from gateway.store.errors import StoreError

if TYPE_CHECKING:  # imported by the commands that run a gateway: the others start at once
    from adapters.console import ConsoleAdapter
    from gateway.app import Gateway

log = logging.getLogger("nightowl")

EXIT_CONFIG = 2
#: The database cannot be used (in use by another process, unreadable, damaged...), or a
#: platform refused the bot or could not be reached at start.
EXIT_FAILED = 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a reader that left is caught, not at exit
        return code
    except BrokenPipeError:  # `nightowl usage | head -3`: the reader left, nothing broke
        # Python's own advice: point stdout at /dev/null so the exit's flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv: Sequence[str] | None) -> int:
    # Everything nightowl creates is its owner's alone: files whose mode no code of ours
    # sets (SQLite's journals, a rotated log, a library's temp file) are private too
    # (docs/design.md#private-files).
    os.umask(0o077)
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return EXIT_CONFIG
    if getattr(args, "reports_config", False):
        # doctor: a broken config is one of the things it reports, not a reason to stop.
        return int(args.handler(args) or 0)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"nightowl: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    setup_logging(config, fmt=args.log_format, chat=_chats_in_this_terminal(args, config))
    try:
        return int(args.handler(config, args) or 0)
    except (StoreError, StartError) as exc:  # the database, a bad token: one line, as
        print(f"nightowl: {exc}", file=sys.stderr)  # doctor says it, never a traceback
        return EXIT_FAILED


def _chats_in_this_terminal(args: argparse.Namespace, config: Config) -> bool:
    """``chat``, or ``run`` with only the console in a terminal: the conversation has the
    terminal, and the logs go to chat.log (gateway/logs.py). Under systemd, or with a
    platform beside the console, ``run`` logs to stderr."""
    if args.command == "chat":
        return True
    alone = not config.platforms.remote
    return args.command == "run" and alone and config.console_enabled and _in_a_terminal()


def _in_a_terminal() -> bool:
    try:  # stdin may be closed (``<&-``) or None
        return sys.stdin is not None and sys.stdin.isatty()
    except (OSError, ValueError):
        return False


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nightowl", description="A chat gateway that never loses a message."
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-c", "--config", help="config file (default ./config.yaml, then ~/.nightowl/config.yaml)"
    )
    common.add_argument("--log-format", choices=["text", "json"], default=None)
    draining = argparse.ArgumentParser(add_help=False)
    draining.add_argument(
        "--shutdown-timeout",
        type=_seconds,
        default=DEFAULT_DRAIN_SECONDS,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long replies in progress may take to finish"
        f" (default {DEFAULT_DRAIN_SECONDS:g})",
    )
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser(
        "run",
        parents=[common, draining],
        help="run every enabled platform (the console when none is)",
    )
    run.set_defaults(handler=cmd_run)
    chat = commands.add_parser("chat", parents=[common, draining], help="chat in this terminal")
    chat.add_argument("--name", default=None, help="console session name (default from config)")
    chat.set_defaults(handler=cmd_chat)
    add_init_parser(commands)
    add_doctor_parser(commands, common)
    add_sessions_parser(commands, common)
    add_pairing_parser(commands, common)
    add_memory_parser(commands, common)
    add_usage_parser(commands, common)
    add_service_parser(commands, common)
    add_replay_parser(commands, common)
    add_dashboard_parser(commands, common)
    add_migrate_parser(commands, common)
    add_backup_parsers(commands, common)
    return parser


def _seconds(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


# -- operator commands (parsers here; the work in their modules) ---------------------------


def add_doctor_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    doctor = commands.add_parser(
        "doctor", parents=[common], help="check config, secrets, provider, platforms, database"
    )
    doctor.add_argument(
        "--fix", action="store_true", help="make the database and config private (chmod 600)"
    )
    doctor.add_argument(
        "--timeout", type=_seconds, default=10.0, metavar="SECONDS", help="per network check"
    )
    doctor.set_defaults(handler=cmd_doctor, reports_config=True)


def cmd_doctor(args: argparse.Namespace) -> int:
    from gateway.ops.doctor import run_doctor

    return asyncio.run(
        run_doctor(args.config, fix=args.fix, timeout=args.timeout, log_format=args.log_format)
    )


def add_sessions_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    sessions = commands.add_parser("sessions", help="list, show, export or forget sessions")
    actions = sessions.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[common], help="every current session")
    show = actions.add_parser(
        "show", parents=[common], help="a session's active context and current summary"
    )
    show.add_argument("key", help="session key, e.g. telegram:12345")
    show.add_argument("--full", action="store_true", help="do not shorten long messages")
    export = actions.add_parser(
        "export", parents=[common], help="every row of a session as JSONL, archived included"
    )
    export.add_argument("key")
    export.add_argument("-o", "--output", help="write to this file (private) instead of stdout")
    export.add_argument("--force", action="store_true", help="overwrite an existing file")
    forget = actions.add_parser(
        "forget", parents=[common], help="erase a session's messages for good (asks first)"
    )
    forget.add_argument("key")
    forget.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    sessions.set_defaults(handler=cmd_sessions)


def cmd_sessions(config: Config, args: argparse.Namespace) -> int:
    from gateway.ops.admin import run_sessions_command

    return asyncio.run(run_sessions_command(config, args))


def add_pairing_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    pairing = commands.add_parser(
        "pairing", help="answer strangers' pairing requests; list or revoke paired users"
    )
    actions = pairing.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[common], help="pending requests and paired users")
    approve = actions.add_parser("approve", parents=[common], help="let a request's user in")
    approve.add_argument("code", help="the code the user was given")
    deny = actions.add_parser("deny", parents=[common], help="drop a pending request")
    deny.add_argument("code")
    clear = actions.add_parser(
        "clear", parents=[common], help="drop every pending request (of one platform)"
    )
    clear.add_argument("platform", nargs="?", choices=("telegram", "discord"))
    revoke = actions.add_parser("revoke", parents=[common], help="take back an approval")
    revoke.add_argument("user", metavar="PLATFORM:USER", help="e.g. telegram:12345")
    pairing.set_defaults(handler=cmd_pairing)


def cmd_pairing(config: Config, args: argparse.Namespace) -> int:
    from gateway.ops.pairing_cli import run_pairing_command

    return asyncio.run(run_pairing_command(config, args))


def add_service_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    service = commands.add_parser(
        "install-service", parents=[common], help="write a systemd unit for this install"
    )
    service.add_argument(
        "--system", action="store_true", help="a system unit run by a dedicated user"
    )
    service.add_argument(
        "--user", default="nightowl", help="the dedicated user of --system (default nightowl)"
    )
    service.add_argument(
        "--output", metavar="PATH", help="write the unit here instead of the systemd directory"
    )
    service.add_argument("--force", action="store_true", help="overwrite an existing unit")
    service.add_argument(
        "--no-notify",
        action="store_true",
        help="Type=simple without the watchdog (default: Type=notify with WatchdogSec)",
    )
    service.add_argument(
        "--shutdown-timeout", type=_seconds, default=DEFAULT_DRAIN_SECONDS, metavar="SECONDS"
    )
    service.add_argument(
        "--backup-daily",
        action="store_true",
        help="also a systemd timer running `nightowl backup --keep N` once a day",
    )
    service.add_argument(
        "--keep",
        type=int,
        default=DEFAULT_KEEP,
        metavar="N",
        help=f"backups the timer keeps (default {DEFAULT_KEEP})",
    )
    service.set_defaults(handler=cmd_install_service)


def cmd_install_service(config: Config, args: argparse.Namespace) -> int:
    from gateway.ops.service import install_service

    if args.backup_daily:
        from gateway.ops.backup_units import install_backup_daily

        return install_backup_daily(config, args)

    return install_service(config, args)


def add_replay_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    replay = commands.add_parser(
        "replay",
        parents=[common],
        help="feed a recorded chat (JSONL) through the turn runner; chart tokens per turn",
    )
    replay.add_argument("file", help="JSONL: one {text, sender?, addressed?, chat?} per line")
    replay.add_argument(
        "--provider",
        choices=["configured", "scripted"],
        default="configured",
        help="the configured model, or an instant scripted one (default configured)",
    )
    replay.add_argument(
        "--window", type=int, metavar="N", help="pretend the model's window is N tokens"
    )
    replay.add_argument("--chart", metavar="PATH", help="SVG to write (default: FILE with .svg)")
    replay.add_argument(
        "--keep-data",
        metavar="DIR",
        help="keep the replay's database in this empty directory (default: discard it)",
    )
    replay.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    replay.set_defaults(handler=cmd_replay)


def cmd_replay(config: Config, args: argparse.Namespace) -> int:
    from gateway.ops.replay.run import run_replay_command

    if args.provider == "configured" and not _require_llm_key(config):
        return EXIT_CONFIG
    if not args.verbose:
        logging.getLogger().setLevel(max(logging.WARNING, logging.getLogger().level))
    return asyncio.run(run_replay_command(config, args))


def add_dashboard_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    url = commands.add_parser(
        "dashboard-url", parents=[common], help="print the link that logs in to the dashboard"
    )
    url.set_defaults(handler=cmd_dashboard_url)


def cmd_dashboard_url(config: Config, args: argparse.Namespace) -> int:
    from gateway.dashboard.url import run_dashboard_url

    return run_dashboard_url(config)


def _require_llm_key(config: Config) -> bool:
    model = config.model
    if resolve_api_key(model.provider, model.api_key, model.base_url) is None:
        print(f"nightowl: {missing_llm_key_message(config)}", file=sys.stderr)
        return False
    return True


#: ``nightowl run`` found no config file (docs/operations.md#first-run).
NO_CONFIG_HINT = (
    "nightowl: no config file yet: `nightowl init` sets one up (platforms, tokens, model);"
    " meanwhile this is the console chat on the built-in defaults."
)


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from adapters.console import ConsoleAdapter
    from gateway.build import platform_adapters

    if not _require_llm_key(config):  # one sentence, which names `nightowl init` too
        return EXIT_CONFIG
    if config.source is None:
        print(NO_CONFIG_HINT, file=sys.stderr)
    adapters: list[Adapter] = platform_adapters(config)
    console = None
    if config.console_enabled:
        console = ConsoleAdapter(config.platforms.console.name)
        adapters.append(console)
    code = asyncio.run(serve(config, adapters, console, drain_seconds=args.shutdown_timeout))
    return code or (1 if console is not None and console.unstored else 0)


def cmd_chat(config: Config, args: argparse.Namespace) -> int:
    from adapters.console import ConsoleAdapter

    if not _require_llm_key(config):
        return EXIT_CONFIG
    console = ConsoleAdapter(args.name or config.platforms.console.name)
    code = asyncio.run(serve(config, [console], console, drain_seconds=args.shutdown_timeout))
    return code or (1 if console.unstored else 0)


async def serve(
    config: Config,
    adapters: list[Adapter],
    console: ConsoleAdapter | None,
    *,
    drain_seconds: float = DEFAULT_DRAIN_SECONDS,
    notifier: Notifier | None = None,
) -> int:
    """Run until SIGTERM/SIGINT (or the console's input ends), then stop cleanly; returns 0.

    The first signal stops taking updates and gives replies in progress up to
    ``drain_seconds`` to finish; then adapters stop and the database closes. A second
    signal exits at once (every store write is one transaction, so nothing is left
    half-written; an unanswered message waits in the inbox for the next start). Under
    systemd it reports READY=1 / STOPPING=1 and feeds the watchdog (docs/design.md#delivery-guarantee).
    """
    from gateway.app import Gateway

    notifier = notifier or Notifier()
    gateway = Gateway(config, adapters)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            log.warning("second signal: exiting now")
            if console is not None:
                console.restore_terminal()
            _flush_output()
            os._exit(128 + signum)
        log.info(
            "shutting down: finishing replies in progress (up to %gs; signal again to exit now)",
            drain_seconds,
        )
        notifier.stopping("finishing replies in progress")
        stop.set()

    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    watchdog = loop.create_task(notifier.feed_watchdog(), name="watchdog")
    started = False
    try:
        try:
            await gateway.start()
        except BaseException:
            await _abandon(gateway)
            raise
        started = True
        notifier.ready(f"serving {', '.join(sorted(gateway.adapters)) or 'no platform'}")
        await _until_stopped(stop, console)
    finally:
        if started:
            await gateway.stop(drain_seconds)
        watchdog.cancel()
        for sig in STOP_SIGNALS:
            loop.remove_signal_handler(sig)
    log.info("stopped")
    return 0


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def _abandon(gateway: Gateway) -> None:
    """Close what a failed start opened: the store's thread would keep the process alive
    (a hang after the error) and its lock would keep the data dir busy."""
    try:
        await gateway.stop(0)
    except Exception:  # the start's own error is the one to report
        log.debug("cleaning up after a failed start", exc_info=True)


async def _until_stopped(stop: asyncio.Event, console: ConsoleAdapter | None) -> None:
    waiters = [asyncio.ensure_future(stop.wait())]
    if console is not None:
        waiters.append(asyncio.ensure_future(console.closed.wait()))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


def _flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe must not block the exit
            stream.flush()
