"""The parsers of ``nightowl backup`` and ``nightowl restore`` (the work is in
gateway/ops/backup.py and gateway/ops/restore.py; docs/operations.md#backups)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gateway.config.schema import Config
from gateway.ops.backup import backup
from gateway.ops.restore import restore

#: What ``--daily`` says to expect between runs.
DAY_SECONDS = 86_400.0


def add_backup_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    """``backup`` and ``restore`` (the latter's work is in gateway/ops/restore.py)."""
    backup = commands.add_parser(
        "backup",
        parents=[common],
        help="write one private tar.gz holding the database, config and data dir files",
        description="Back up the database (a consistent copy, even while the gateway"
        " runs), config.yaml and the data dir's files into one tar.gz (mode 600)."
        " See docs/operations.md#backups.",
    )
    backup.add_argument(
        "--to",
        metavar="FILE",
        help="write here (default <data_dir>/backups/nightowl-<UTC timestamp>.tar.gz)",
    )
    backup.add_argument(
        "--with-secrets", action="store_true", help="include the .env beside the config"
    )
    backup.add_argument(
        "--keep",
        type=_positive,
        metavar="N",
        help="then remove all but the newest N nightowl-*.tar.gz in that directory",
    )
    backup.add_argument(
        "--daily",
        action="store_true",
        help="this is the daily timer's run: the alerts say so if none follows in two days",
    )
    backup.set_defaults(handler=cmd_backup)
    restore = commands.add_parser(
        "restore",
        parents=[common],
        help="restore a backup into an empty data dir",
        description="Check a backup's manifest, restore its parts into an empty data dir"
        " (0700, files 0600) and count the rows again. See docs/operations.md#backups.",
    )
    restore.add_argument("file", metavar="FILE", help="a tar.gz written by nightowl backup")
    restore.add_argument(
        "--data-dir", metavar="DIR", help="restore here (default: the config's data_dir)"
    )
    restore.add_argument(
        "--force", action="store_true", help="restore into a data dir that is not empty"
    )
    restore.add_argument(
        "--dsn",
        metavar="DSN",
        help="a PostgreSQL backup: pg_restore its dump into this empty database",
    )
    restore.set_defaults(handler=cmd_restore)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return value


def cmd_backup(config: Config, args: argparse.Namespace) -> int:
    every = DAY_SECONDS if args.daily else None
    return backup(config, to=args.to, with_secrets=args.with_secrets, keep=args.keep, every=every)


def cmd_restore(config: Config, args: argparse.Namespace) -> int:
    target = Path(args.data_dir).expanduser().absolute() if args.data_dir else config.data_dir
    return restore(Path(args.file), target, force=args.force, dsn=args.dsn)
