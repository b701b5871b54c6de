"""The store's errors, and why a ``state.db`` cannot be used, in one sentence a user can act on.

Every failure to open the database, and every driver or file error a statement meets
after that, leaves the store as :class:`StoreError` (:func:`explained` here for SQLite,
``mapped_errors`` in gateway/store/postgres/connection.py); its text is shown to users
as is (no traceback): a permissions problem says whose and which file, a
read-only file system says so, a damaged file quotes ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import pwd
import sqlite3
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

from gateway.store.sqlite_files import read_only_uri
from nightowl_errors import NightowlError

Reason = Literal["in_use", "permission", "read_only", "damaged", "full", "schema", "empty", "other"]

_DAMAGED = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
_FULL = ("SQLITE_FULL",)
_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")


class StoreError(NightowlError):
    """The database cannot be used; ``str()`` is one sentence for the user."""

    reason: Reason = "other"

    def __init__(self, message: str, *, reason: Reason | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class SessionEnded(StoreError):
    """The session was ended (``/new``, erased) while something still wrote to it."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id} has ended")
        self.session_id = session_id


class DataDirInUse(StoreError):
    """Another process holds the data dir's lock (a gateway or chat is running on it)."""

    reason: Reason = "in_use"

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "another process"
        super().__init__(
            f"data dir in use by {who} ({data_dir}): another nightowl run or chat is using"
            " it; stop that one first, or give this one its own data_dir"
        )
        self.data_dir = data_dir
        self.pid = pid


async def diagnose(path: Path, error: BaseException, *, writing: bool = True) -> StoreError:
    """Why ``path`` could not be opened (``error`` is what SQLite or the OS said)."""
    data_dir = path.parent
    code = getattr(error, "sqlite_errorname", "")
    os_errno = error.errno if isinstance(error, OSError) else None
    if writing or os_errno == errno.EROFS:
        problem = write_problem(path)
        if problem is not None:
            return problem
    elif code == "SQLITE_CANTOPEN" or code.startswith("SQLITE_READONLY"):
        # Even a reader of a WAL database writes: it creates state.db-shm beside it.
        if _on_read_only_fs(data_dir):
            return StoreError(
                f"{_nearest_existing(data_dir)} is on a read-only file system, where SQLite"
                f" cannot even read {path.name} (it must create {path.name}-shm beside it):"
                " remount it read-write, or copy the file elsewhere to look at it",
                reason="read_only",
            )
        problem = write_problem(path)
        if problem is not None:
            return problem
    denied = _first_denied(path, writing=False)
    if denied is not None:
        return StoreError(denied, reason="permission")
    if code in _FULL or os_errno == errno.ENOSPC:
        return StoreError(
            f"the disk holding {data_dir} is full: free some space",
            reason="full",
        )
    if code in _BUSY or code.startswith("SQLITE_BUSY"):
        return StoreError(
            f"{path} stayed locked by another program past the busy timeout (a sqlite3"
            " shell or a backup holding a transaction open?): end that one, then try again"
        )
    if code in _DAMAGED or code.startswith("SQLITE_CORRUPT"):
        problems = await _damage(path)
        return StoreError(
            f"{path} is damaged (PRAGMA integrity_check: {problems}): stop nightowl, move"
            " the file aside and restore a backup",
            reason="damaged",
        )
    return StoreError(f"cannot use {path}: {error}")


def write_problem(path: Path) -> StoreError | None:
    """Why a gateway could not write ``path`` (read-only file system, permissions), if so."""
    data_dir = path.parent
    if _on_read_only_fs(data_dir):
        return StoreError(
            f"{_nearest_existing(data_dir)} is on a read-only file system and nightowl must"
            " write its database there: remount it read-write or set data_dir to a writable"
            " directory",
            reason="read_only",
        )
    denied = _first_denied(path, writing=True)
    return StoreError(denied, reason="permission") if denied else None


#: What a look at a damaged file found, by path, and when: every statement that meets
#: the damage is told why, without reading the whole file again each time.
_DAMAGE_SEEN: dict[Path, tuple[float, str]] = {}
DAMAGE_LOOK_SECONDS = 600.0


async def _damage(path: Path) -> str:
    seen = _DAMAGE_SEEN.get(path)
    if seen is not None and time.monotonic() - seen[0] < DAMAGE_LOOK_SECONDS:
        return seen[1]
    problems = await asyncio.to_thread(integrity_problems, path)
    _DAMAGE_SEEN[path] = (time.monotonic(), problems)
    return problems


def integrity_problems(path: Path, limit: int = 3, *, quick: bool = False) -> str:
    """``PRAGMA integrity_check``'s first lines (``quick_check``'s: no index against its
    table), or the error that stopped it, opened read-only; ``"ok"`` for a sound file."""
    check = "quick_check" if quick else "integrity_check"
    try:
        db = sqlite3.connect(read_only_uri(path), uri=True)
        try:
            rows = db.execute(f"PRAGMA {check}({limit})").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        return str(exc)
    return "; ".join(str(row[0]) for row in rows)


async def damage_found(path: Path) -> str | None:
    """One sentence when ``path`` is damaged somewhere (``PRAGMA quick_check``, off the
    event loop), with what to do; None for a sound file. The gateway asks at every start."""
    problems = await asyncio.to_thread(integrity_problems, path, 1, quick=True)
    if problems == "ok":
        return None
    return (
        f"{path} is damaged ({problems[:200]}): replies may fail where it is; stop nightowl,"
        " save what can be read with `nightowl sessions export`, then restore a backup"
        " (docs/operations.md#backups)"
    )


def _on_read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(_nearest_existing(path)).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _first_denied(path: Path, *, writing: bool) -> str | None:
    """One sentence about the first file or directory this user cannot use, if any."""
    data_dir = path.parent
    if not data_dir.exists():
        parent = _nearest_existing(data_dir)
        if not os.access(parent, os.W_OK | os.X_OK):
            return _denied_sentence(parent, f"create {data_dir} in")
        return None
    need = os.W_OK | os.X_OK if writing else os.X_OK
    if not os.access(data_dir, need):
        return _denied_sentence(data_dir, "write to" if writing else "enter")
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", "lock"):
        file = data_dir / name
        if not file.exists():
            continue
        if not os.access(file, os.R_OK):
            return _denied_sentence(file, "read")
        if writing and not os.access(file, os.W_OK):
            return _denied_sentence(file, "write")
    return None


def _denied_sentence(path: Path, action: str) -> str:
    info = path.stat()
    me, owner = _user_name(os.geteuid()), _user_name(info.st_uid)
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid == os.geteuid():
        return (
            f"permission denied: cannot {action} {path} (mode {mode:04o}, owner {me}): give"
            f" its owner access again, e.g. chmod u+rwX {path}"
        )
    return (
        f"permission denied: {me} cannot {action} {path} (owner {owner}, mode {mode:04o}):"
        f" run nightowl as {owner}, or give {me} the data dir (chown -R)"
    )


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


@contextlib.asynccontextmanager
async def explained(path: Path, *, writing: bool = True) -> AsyncIterator[None]:
    """Turn SQLite's and the OS's errors inside the block into a :class:`StoreError`
    saying why (the one mapping every SQLite statement of the store goes through)."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise await diagnose(path, exc, writing=writing) from exc
