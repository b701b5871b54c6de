"""``nightowl backup``: everything needed to come back, in one private tar.gz
(docs/operations.md#backups).

The archive holds ``manifest.json`` first, then its parts:

- ``database/state.db`` — SQLite copied with ``VACUUM INTO`` beside the running gateway
  (one consistent moment; gateway/store/snapshot.py), or ``database/postgres.dump`` —
  ``pg_dump --format=custom`` of the moment the rows were counted (when ``pg_dump`` is on
  PATH; the manifest always holds the command line, without the password);
- ``config/config.yaml`` and, with ``--with-secrets`` only, ``config/.env``;
- ``data/...`` — the data dir's learned window cache, dashboard token and logins, the
  Telegram webhook secret, ``hooks/`` and ``plugins/``.

The manifest says which nightowl and schema wrote it, the rows per table (the tables
are asked of the database, never listed here) and each file's sha256, which
``nightowl restore`` checks (gateway/ops/restore.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from agent.model_metadata import CACHE_FILE_NAME
from gateway.backup_status import BackupRun, record_run
from gateway.build import WEBHOOK_SECRET_FILE
from gateway.config.schema import Config
from gateway.dashboard.logins import LOGINS_FILE
from gateway.dashboard.token import DASHBOARD_TOKEN_FILE
from gateway.private_files import owned_as, private_file
from gateway.store.errors import StoreError
from gateway.store.opening import missing_database, open_store
from gateway.store.snapshot import DatabaseCopy, copy_database

MANIFEST = "manifest.json"
FORMAT = "nightowl-backup"
FORMAT_VERSION = 1
#: The data dir's files a backup holds (beside the database), and its directories.
DATA_FILES = (CACHE_FILE_NAME, DASHBOARD_TOKEN_FILE, LOGINS_FILE, WEBHOOK_SECRET_FILE)
DATA_DIRS = ("hooks", "plugins")
#: Where ``backup`` writes by default, under the data dir.
BACKUPS_DIR = "backups"
#: ``nightowl-<UTC timestamp>[-n].tar.gz``: the names ``--keep`` counts.
NAME = re.compile(r"nightowl-(\d{8}T\d{6}Z)(?:-(\d+))?\.tar\.gz")
SKIPPED_DIRS = {"__pycache__"}
#: What a PostgreSQL backup without ``pg_dump`` lacks, kept for the alert.
NOT_DUMPED = "pg_dump is not on PATH (install postgresql-client, the server's version or newer)"


class BackupError(StoreError):
    """A backup or restore that cannot be made, in one sentence."""


# -- what goes in --------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One thing a backup holds, for people: a name and the archive files it is."""

    name: str
    files: tuple[str, ...]


def data_parts(config: Config, *, with_secrets: bool) -> tuple[list[tuple[str, Path]], list[str]]:
    """``(archive name, file)`` of everything but the database, and what was left out
    (sentences)."""
    found: list[tuple[str, Path]] = []
    left_out: list[str] = []
    if config.source is not None and config.source.is_file():
        found.append(("config/config.yaml", config.source))
        env = config.source.parent / ".env"
        if env.is_file():
            if with_secrets:
                found.append(("config/.env", env))
            else:
                left_out.append(".env (the secrets: pass --with-secrets to include it)")
        elif with_secrets:  # asked for, and there is none to take
            left_out.append(f".env (--with-secrets: there is none beside {config.source})")
    else:
        left_out.append("config.yaml (none: nightowl runs on its defaults)")
    for name in DATA_FILES:
        path = config.data_dir / name
        if path.is_file():
            found.append((f"data/{name}", path))
    for name in DATA_DIRS:
        root = config.data_dir / name
        for path in sorted(_files_under(root)):
            found.append((f"data/{name}/{path.relative_to(root).as_posix()}", path))
    return found, left_out


def _files_under(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS)
        for name in files:
            path = Path(directory) / name
            if path.is_file() and not path.is_symlink():
                yield path


def group_parts(names: list[str]) -> list[Part]:
    """The archive's files as people think of them: the database, each file, and each
    of hooks/ and plugins/ as one part."""
    parts: dict[str, list[str]] = {}
    for name in names:
        kind, _, rest = name.partition("/")
        if kind == "database":
            key = "database"
        elif kind == "data" and "/" in rest:
            key = rest.split("/", 1)[0] + "/"
        else:
            key = rest
        parts.setdefault(key, []).append(name)
    return [Part(key, tuple(files)) for key, files in parts.items()]


def describe_tables(tables: dict[str, int]) -> str:
    """``sessions 3, messages 41, ...`` (tables with rows), then how many are empty."""
    held = [f"{name} {count}" for name, count in tables.items() if count]
    empty = len(tables) - len(held)
    text = ", ".join(held) if held else "no rows"
    return text + (f" ({empty} empty tables)" if empty else "")


def nightowl_version() -> str:
    try:
        return importlib.metadata.version("nightowl")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# -- writing -------------------------------------------------------------------------------


def backup(
    config: Config,
    *,
    to: str | None = None,
    with_secrets: bool = False,
    keep: int | None = None,
    out: TextIO | None = None,
    every: float | None = None,
) -> int:
    """Write the backup, say what it holds; 0 (a :class:`StoreError` otherwise). Its
    outcome is kept for the gateway's alerts and doctor (gateway/backup_status.py)."""
    out = out or sys.stdout
    now = datetime.datetime.now(datetime.UTC)
    target = Path(to).expanduser().absolute() if to else _default_target(config, now)
    if target.exists():  # a name chosen by hand: refused before any work, not a run
        raise BackupError(f"{target} exists: choose another name with --to")
    try:
        copy = _backup(config, target, now, with_secrets, out)
    except OSError as error:  # a full disk, a destination that is not a directory
        failure = BackupError(f"could not write the backup: {error}")
        record_run(config.data_dir, BackupRun(time.time(), False, str(failure), every=every))
        raise failure from error
    except StoreError as error:
        record_run(config.data_dir, BackupRun(time.time(), False, str(error), every=every))
        raise
    if target.is_relative_to(config.data_dir):  # the default place, or one in the data dir
        with contextlib.suppress(OSError):
            owned_as([target.parent, target], config.data_dir)
    dumped = copy.file is not None
    record_run(
        config.data_dir,
        BackupRun(
            time.time(), True, str(target) if dumped else NOT_DUMPED, database=dumped, every=every
        ),
    )
    if keep is not None:
        try:
            removed = prune(target.parent, keep)
        except OSError as error:
            raise BackupError(
                f"backed up, but older backups could not be removed: {error}"
            ) from error
        if removed:
            print(f"Removed {len(removed)} older backup(s) (--keep {keep}).", file=out)
    return 0


def _backup(
    config: Config, target: Path, now: datetime.datetime, with_secrets: bool, out: TextIO
) -> DatabaseCopy:
    missing = missing_database(config)
    if missing is not None:
        raise BackupError(f"no database at {missing} yet: start the gateway once first")
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    files, left_out = data_parts(config, with_secrets=with_secrets)
    scratch = Path(tempfile.mkdtemp(prefix=".nightowl-backup-", dir=target.parent))
    try:
        copy = asyncio.run(_copy(config, scratch))
        written = _write_archive(target, copy, files, now, left_out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _report(target, copy, written, left_out, out)
    return copy


async def _copy(config: Config, directory: Path) -> DatabaseCopy:
    """The database into ``directory``, read-only: beside a running gateway or not, a
    backup never locks the data dir, migrates or writes (gateway/store/opening.py)."""
    store = open_store(config)
    await store.open("read_only")
    try:
        return await copy_database(store, directory)
    finally:
        await store.close()


def _default_target(config: Config, now: datetime.datetime) -> Path:
    directory = config.data_dir / BACKUPS_DIR
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    target = directory / f"nightowl-{stamp}.tar.gz"
    number = 1
    while target.exists():
        number += 1
        target = directory / f"nightowl-{stamp}-{number}.tar.gz"
    return target


def _write_archive(
    target: Path,
    copy: DatabaseCopy,
    files: list[tuple[str, Path]],
    now: datetime.datetime,
    left_out: list[str],
) -> dict[str, dict[str, Any]]:
    """The tar.gz, private from its first byte and put in place whole; the manifest's
    ``files``."""
    members = list(files)
    if copy.file is not None:
        members.insert(0, (f"database/{copy.file.name}", copy.file))
    hashes = {name: _hash(path) for name, path in members}
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "nightowl": nightowl_version(),
        "created": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "backend": copy.backend,
        "schema_version": copy.schema_version,
        "tables": copy.tables,
        "files": hashes,
        "not_included": left_out,
    }
    if copy.command:
        manifest["pg_dump"] = " ".join(copy.command)
    # Never replaces a file that appeared meanwhile (FileExistsError).
    with private_file(target, replace=False, make_dir=False) as raw:
        with tarfile.open(fileobj=raw, mode="w:gz") as archive:
            text = json.dumps(manifest, indent=2).encode()
            archive.addfile(_info(MANIFEST, len(text), now.timestamp()), io.BytesIO(text))
            for name, path in members:
                with path.open("rb") as file:
                    stat = os.fstat(file.fileno())
                    archive.addfile(_info(name, stat.st_size, stat.st_mtime), file)
    return hashes


def _info(name: str, size: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = int(mtime)
    info.mode = 0o600
    return info


def _hash(path: Path) -> dict[str, Any]:
    with path.open("rb") as file:
        return {"sha256": hashlib.file_digest(file, "sha256").hexdigest(), "bytes": file.tell()}


def _report(
    target: Path,
    copy: DatabaseCopy,
    files: dict[str, dict[str, Any]],
    left_out: list[str],
    out: TextIO,
) -> None:
    size = target.stat().st_size
    print(f"Backed up to {target} (mode 600, {_size(size)}):", file=out)
    tables = f"schema v{copy.schema_version}: {describe_tables(copy.tables)}"
    if copy.file is None:
        print(f"  database   not dumped ({tables}); pg_dump is not on PATH, run:", file=out)
        print(f"             PGPASSWORD=... {' '.join(copy.command)}", file=out)
    for part in group_parts(list(files)):
        if part.name == "database":
            how = "a consistent copy" if copy.backend == "sqlite" else "pg_dump"
            print(f"  database   {copy.file.name if copy.file else ''} ({how}), {tables}", file=out)
        elif part.name.endswith("/"):
            print(f"  {part.name:<10} {len(part.files)} file(s)", file=out)
        else:
            print(f"  {part.name}", file=out)
    for what in left_out:
        print(f"  not included: {what}", file=out)


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    return f"{size / 1024:.1f} KB" if size < 1 << 20 else f"{size / (1 << 20):.1f} MB"


def prune(directory: Path, keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` ``nightowl-<timestamp>.tar.gz`` in
    ``directory`` (nothing else there is touched); what was removed."""
    found = []
    for path in directory.iterdir():
        match = NAME.fullmatch(path.name)
        if match and path.is_file():
            found.append(((match.group(1), int(match.group(2) or 1)), path))
    found.sort(reverse=True)
    removed = [path for _, path in found[keep:]]
    for path in removed:
        path.unlink()
    return removed
