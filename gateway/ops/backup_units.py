"""``nightowl install-service --backup-daily``: a systemd timer and the oneshot service it
starts, running ``nightowl backup --keep N`` once a day (docs/operations.md#backups).

They are written beside the gateway's unit (``nightowl.service``), for the same venv,
config and user; the backup runs beside the gateway (a consistent copy while it
answers), at a low priority so a chat does not notice it.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

from gateway.config.schema import Config
from gateway.ops.service import (
    NO_PLATFORM,
    UnitSpec,
    default_unit_path,
    install_service,
    quote_exec_arg,
    unit_path,
    unit_spec,
    write_unit,
)
from gateway.private_files import write_private

SERVICE_NAME = "nightowl-backup.service"
TIMER_NAME = "nightowl-backup.timer"
#: Backups ``--backup-daily`` keeps when not told ``--keep``.
DEFAULT_KEEP = 7


def render_backup_service(spec: UnitSpec, keep: int) -> str:
    config = spec.config_path.absolute()
    argv = [*spec.command, "backup", "-c", str(config), "--keep", str(keep), "--daily"]
    lines = [
        "# nightowl-backup — written by `nightowl install-service --backup-daily`;",
        "# started once a day by nightowl-backup.timer. Re-run install-service rather than",
        "# editing this copy (--force overwrites it).",
        "",
        "[Unit]",
        f"Description=nightowl backup ({_escape(str(config))})",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=oneshot",
        f"ExecStart={' '.join(quote_exec_arg(a) for a in argv)}",
        f"WorkingDirectory={_escape(str(config.parent))}",
        "Environment=PYTHONUNBUFFERED=1",
        "# Beside a running gateway: a low priority, so chats do not notice it.",
        "Nice=10",
        "IOSchedulingClass=idle",
        "StandardOutput=journal",
        "StandardError=journal",
        "SyslogIdentifier=nightowl-backup",
        "# The backup holds the conversations: private to its user.",
        "UMask=0077",
    ]
    if spec.system:
        lines += [
            f"User={spec.user}",
            f"Group={spec.user}",
            "NoNewPrivileges=yes",
            "PrivateTmp=yes",
            "ProtectSystem=full",
        ]
    return "\n".join(lines) + "\n"


def render_backup_timer() -> str:
    return "\n".join(
        [
            "# nightowl-backup — written by `nightowl install-service --backup-daily`.",
            "",
            "[Unit]",
            "Description=Back up nightowl once a day",
            "",
            "[Timer]",
            "OnCalendar=daily",
            "# Not all at midnight; a day missed while the machine was off runs at boot.",
            "RandomizedDelaySec=1h",
            "Persistent=true",
            f"Unit={SERVICE_NAME}",
            "",
            "[Install]",
            "WantedBy=timers.target",
            "",
        ]
    )


def backup_units(spec: UnitSpec, keep: int, directory: Path) -> list[tuple[Path, str]]:
    """The two units and where they go (beside the gateway's unit)."""
    return [
        (directory / SERVICE_NAME, render_backup_service(spec, keep)),
        (directory / TIMER_NAME, render_backup_timer()),
    ]


def backup_steps(spec: UnitSpec, written: list[Path]) -> list[str]:
    """What to run once the units are written (copied first when written elsewhere)."""
    systemctl = "sudo systemctl" if spec.system else "systemctl --user"
    journal = "journalctl" if spec.system else "journalctl --user"
    home = default_unit_path(spec.system).parent
    copies = [
        f"{'sudo ' if spec.system else ''}install -D -m 644 {path} {home / path.name}"
        for path in written
        if path.absolute().parent != home
    ]
    return [
        *copies,
        f"{systemctl} daemon-reload",
        f"{systemctl} enable --now {TIMER_NAME}",
        f"{systemctl} list-timers {TIMER_NAME}",
        f"{systemctl} start {SERVICE_NAME}   # one backup now, to see it work",
        f"{journal} -u nightowl-backup",
    ]


def unit_without_daily(config_path: Path) -> Path | None:
    """The backup unit in systemd's own places (the user's, then the system's) that runs
    ``config_path``'s backup without ``--daily`` (written before the runs said so, so a
    timer that stops goes unnoticed); None when there is none."""
    config = quote_exec_arg(str(config_path.absolute()))
    for system in (False, True):
        path = default_unit_path(system).with_name(SERVICE_NAME)
        try:
            start = _exec_start(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        if config in start and "--daily" not in start.split():
            return path
    return None


def add_daily(path: Path) -> None:
    """``--daily`` at the end of the unit's ExecStart, the rest of it as it was (a user's
    own edits kept), written whole in its own mode. OSError: it could not be written;
    ValueError: its ExecStart goes on over several lines (to edit by hand)."""
    path = path.resolve()  # a linked unit (`systemctl link`): its file, not the link
    text = path.read_text(encoding="utf-8")
    start, *more = _exec_lines(text)
    if more:
        raise ValueError("its ExecStart goes on over several lines: add --daily by hand")
    before = path.stat()
    write_private(path, text.replace(start, f"{start} --daily", 1))
    path.chmod(stat.S_IMODE(before.st_mode))
    if os.geteuid() == 0:  # root fixing someone's unit leaves it theirs
        os.chown(path, before.st_uid, before.st_gid)


def _exec_lines(text: str) -> list[str]:
    """The ExecStart line and the lines a trailing backslash continues it onto (``[""]``:
    none)."""
    lines = iter(text.splitlines())
    found = [next((line for line in lines if line.startswith("ExecStart=")), "")]
    while found[-1].endswith("\\"):
        found.append(next(lines, ""))
    return found


def _exec_start(text: str) -> str:
    """The ExecStart command, whole."""
    return " ".join(line.removesuffix("\\") for line in _exec_lines(text))


def _escape(text: str) -> str:
    return text.replace("%", "%%")


def install_backup_daily(config: Config, args: Any) -> int:
    """``install-service --backup-daily``: the gateway's unit as ``install-service``
    writes it (kept when it exists, unless ``--force``), then the backup's two units
    beside it."""
    if config.source is None or args.keep < 1:
        return install_service(config, args) if config.source is None else _bad_keep()
    main_unit = unit_path(args)
    if main_unit.exists() and not args.force:
        print(f"Kept {main_unit} (it exists; --force rewrites it).")
    elif not config.platforms.remote:  # the console's chats are backed up all the same
        print(f"No {main_unit.name}: {NO_PLATFORM}.")
    else:
        code = install_service(config, args)
        if code:
            return code
    spec = unit_spec(config.source, args)
    units = backup_units(spec, args.keep, main_unit.parent)
    existing = [path for path, _ in units if path.exists()]
    if existing and not args.force:
        print(f"nightowl: {existing[0]} exists; pass --force to overwrite it", file=sys.stderr)
        return 1
    try:
        for path, text in units:
            write_unit(path, text, force=args.force)
    except PermissionError:
        print(
            f"nightowl: cannot write {units[0][0]} (permission denied). Run it with sudo, or"
            " write the units elsewhere with --output DIR/nightowl.service.",
            file=sys.stderr,
        )
        return 1
    timer, service = units[1][0], units[0][0]
    print(f"Wrote {service} and {timer} (daily `nightowl backup --keep {args.keep}`).")
    print("Next:")
    for step in backup_steps(spec, [service, timer]):
        print(f"  {step}")
    return 0


def _bad_keep() -> int:
    print("nightowl: --keep must be 1 or more", file=sys.stderr)
    return 2
