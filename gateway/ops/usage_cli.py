"""``nightowl usage``: what model calls cost, per UTC day, chat, person, model or kind
(docs/cost.md#what-the-operator-sees).

Read through the store the config names (gateway/store/opening.py), read-only beside a
running gateway. Unpriced calls are counted apart, never as $0; ``--csv`` gives exact
USD for a spreadsheet.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any, TextIO

from gateway.config.schema import Config
from gateway.cost.report import as_csv, table, utc_day
from gateway.ops.store_command import no_database, with_store
from gateway.store.backend import Store
from gateway.store.costs import day_start, month_start

GROUPINGS = ("day", "chat", "person", "model", "kind")


def add_usage_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """``nightowl usage [--by day|chat|person|model|kind] [--since DAY] [--csv]``."""
    usage = commands.add_parser(
        "usage", parents=[common], help="what model calls cost, per day, chat or person"
    )
    usage.add_argument("--by", choices=GROUPINGS, default="day", help="group by (default day)")
    usage.add_argument(
        "--since", metavar="YYYY-MM-DD", help="from this UTC day (default: this month)"
    )
    usage.add_argument("--until", metavar="YYYY-MM-DD", help="up to, not including, this day")
    usage.add_argument("--today", action="store_true", help="today only (UTC)")
    usage.add_argument("--chat", metavar="KEY", help="one chat, by session key")
    usage.add_argument("--person", metavar="PLATFORM:ID", help="one person, e.g. telegram:42")
    usage.add_argument("--csv", action="store_true", help="CSV with exact USD")
    usage.set_defaults(handler=cmd_usage)


def cmd_usage(config: Config, args: argparse.Namespace) -> int:
    return asyncio.run(run_usage_command(config, args))


async def run_usage_command(
    config: Config, args: Any, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    now = time.time()
    try:
        since = utc_day(args.since) if args.since else month_start(now)
        until = utc_day(args.until) if args.until else None
    except ValueError:
        print("nightowl: --since and --until are UTC days, YYYY-MM-DD", file=err)
        return 1
    if args.today:
        since = day_start(now)
    if until is not None and until <= since:
        print(
            "nightowl: --until must be a day after the first one (--since, --today);"
            " it is not included",
            file=err,
        )
        return 1
    missing = no_database(config, out, err, hint=" (start the gateway once)")
    if missing is not None:
        return missing

    async def report(store: Store) -> int:
        lines = await store.costs.totals(args.by, since, until, chat=args.chat, person=args.person)
        out.write(as_csv(lines, args.by) if args.csv else table(lines, args.by) + "\n")
        return 0

    return await with_store(config, "read", err, report)
