"""One gateway per data dir: an exclusive ``flock`` on ``<data_dir>/lock``, held while open.

Two gateways on one database would both take the same inbox row into a turn and answer it
twice. The lock is the kernel's, so it goes away with the process however it ends (a
crash or ``kill -9`` leaves no stale lock); the file keeps the holder's pid for the
message the next one shows.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from gateway.store.errors import DataDirInUse

LOCK_NAME = "lock"


class DataDirLock:
    """Held from :meth:`acquire` until :meth:`release` (or the process's end)."""

    def __init__(self, path: Path, descriptor: int) -> None:
        self.path = path
        self._descriptor: int | None = descriptor

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        """Take the lock at once or raise :class:`DataDirInUse`; OSError when it cannot be made."""
        path = data_dir / LOCK_NAME
        # Not inherited by child processes (os.open's default), so none keeps it after exit.
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(descriptor)
            os.close(descriptor)
            raise DataDirInUse(data_dir, pid) from None
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        return cls(path, descriptor)

    def release(self) -> None:
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is not None:
            os.close(descriptor)  # closing the only descriptor drops the flock


def lock_holder(data_dir: Path) -> int | None:
    """The pid holding ``data_dir``'s lock (0 when unknown), or None when nobody does.

    Probes with a shared lock, released at once: a gateway starting in that instant could
    be refused, which is why only ``doctor`` asks.
    """
    try:
        descriptor = os.open(data_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _read_pid(descriptor) or 0
    except OSError:
        return None
    else:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


def _read_pid(descriptor: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(descriptor, 32, 0).decode().strip()) or None
    return None
