"""What the last ``nightowl backup`` did, kept beside the data it backed up, so that a
backup failing every night under its timer is told, not found the day it is needed
(docs/operations.md#backup-alerts).

``nightowl backup`` writes ``<data_dir>/backup_status.json`` (0600) after every run, by
hand or by the timer; the gateway's alerts read it at each check (condition ``backup``)
and ``nightowl doctor`` shows it. One small file, not a table: a backup reads the
database and writes nothing there (gateway/ops/backup.py), and the file outlives a
database that cannot be opened, which is when a backup fails.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from gateway.private_files import owned_as, write_private

log = logging.getLogger(__name__)

STATUS_FILE = "backup_status.json"


@dataclass(frozen=True)
class BackupRun:
    """One run of ``nightowl backup``: when, whether it wrote an archive holding the
    database, and one sentence (where it went, or why it failed)."""

    at: float
    #: An archive was written.
    ok: bool
    #: Where the archive went, or why there is none.
    what: str
    #: The archive holds the database (a PostgreSQL one without ``pg_dump`` does not).
    database: bool = True
    #: When the last run that wrote a whole archive ended, across failures since.
    last_whole: float | None = None
    #: How often runs are expected (seconds; the daily timer's ``--daily``), else None.
    every: float | None = None
    #: False: the file is there but cannot be read (``what`` says why, ``at`` is its
    #: time); what the last run did is not known.
    known: bool = True

    @property
    def whole(self) -> bool:
        """An archive that can bring everything back."""
        return self.ok and self.database


def record_run(data_dir: Path, run: BackupRun) -> None:
    """Keep ``run`` as the last one, carrying when the last whole one was. A data dir
    that is not there (the backup found nothing to back up) or cannot be written (the
    disk alert tells that) keeps nothing: the backup's own answer says what happened."""
    if not data_dir.is_dir():
        return
    before = last_run(data_dir)
    whole = run.at if run.whole else (before.last_whole if before else None)
    # A run by hand between the timer's keeps the timer expected.
    every = run.every if run.every is not None else (before.every if before else None)
    kept = BackupRun(run.at, run.ok, run.what, run.database, whole, every)
    path = data_dir / STATUS_FILE
    try:
        write_private(path, json.dumps(asdict(kept)) + "\n", make_dir=False)
        owned_as([path], data_dir)
    except OSError as error:
        log.warning("could not keep the backup's outcome in %s: %s", data_dir, error)


def last_run(data_dir: Path) -> BackupRun | None:
    """The last run kept in ``data_dir``; None when none was. A file that is there but
    cannot be read (its owner or mode changed, a disk error, half a write by hand) is a
    run not known (``known=False``), told as such, never as "no backup yet"."""
    path = data_dir / STATUS_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return BackupRun(
            at=float(raw["at"]),
            ok=bool(raw["ok"]),
            what=str(raw["what"]),
            database=bool(raw.get("database", True)),
            last_whole=float(raw["last_whole"]) if raw.get("last_whole") is not None else None,
            every=float(raw["every"]) if raw.get("every") is not None else None,
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else repr(error)
        try:
            at = path.stat().st_mtime
        except OSError:
            at = time.time()
        return BackupRun(at, ok=False, what=f"{path} cannot be read ({why})", known=False)


def utc(moment: float) -> str:
    """``2026-12-06 07:40 UTC``."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%d %H:%M UTC")


#: A scheduled run this late past its time has not happened: twice its interval, and an
#: hour for the timer's random delay.
LATE_AFTER_INTERVALS, LATE_SLACK_SECONDS = 2, 3600.0


def overdue(run: BackupRun, now: float) -> bool:
    """A timer's backup that should have run again by ``now`` (a stopped timer: a user's
    timers end at logout without ``loginctl enable-linger``)."""
    return (
        run.every is not None
        and now - run.at > LATE_AFTER_INTERVALS * run.every + LATE_SLACK_SECONDS
    )


def described(run: BackupRun, now: float) -> str:
    """What is wrong with ``run`` at ``now``, in one sentence: it failed or left the
    database out (with the last whole backup), or the timer's next one is overdue;
    empty when it was whole and on time."""
    if not run.known:
        return f"what the last backup did is not known: {run.what}"
    if run.whole:
        return f"the daily backup has not run since {utc(run.at)}" if overdue(run, now) else ""
    if run.ok:
        what = f"the backup of {utc(run.at)} holds no database: {run.what}"
    else:
        what = f"the backup of {utc(run.at)} failed: {run.what}"
    if run.last_whole is None:
        return f"{what} (no whole backup since this was kept)"
    return f"{what} (the last whole backup: {utc(run.last_whole)})"
