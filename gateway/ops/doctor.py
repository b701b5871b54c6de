"""``nightowl doctor``: is this install ready to run? One line per check, ✓ or ✗ with a fix.

Checks, in order: the config parses; the secrets it needs resolve; the model provider
lists the model and answers a 1-token request (and the summary model, when one is
configured), and a self-hosted server says what window it serves
(docs/design.md#served-window); the Telegram bot token works (getMe), its webhook's port
can be bound in webhook mode, and the Discord one logs in, when those platforms are
enabled, and the alerts can leave: each ``alerts.to`` on an enabled
platform, the ``alerts.webhook`` accepting a connection (those network checks live in
:mod:`gateway.reachability`); the database opens read-only, passes ``PRAGMA integrity_check`` and has a known
schema; the config, its ``.env``, the data dir and the files nightowl keeps there
(database and WAL files, chat.log, the context-length cache, the webhook secret, the
dashboard's token and logins) are open to no other user, group included (``--fix``, or
answering yes, makes them private); with the dashboard on, its token is not short enough
to guess, its port can be bound (or the running gateway holds it), and a ``listen``
beyond loopback without ``metrics_token`` is pointed out. The exit code is 0 only when
every check passes. Nothing is created, migrated or sent to a chat.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from agent.model_metadata import CACHE_FILE_NAME
from gateway.alerts.sending import UNSENT_FILE
from gateway.backup_status import STATUS_FILE, described, last_run, utc
from gateway.build import WEBHOOK_SECRET_FILE
from gateway.config.platforms import WebhookConfig
from gateway.config.routes import model_label
from gateway.config.schema import (
    NO_KEY_NEEDED,
    Config,
    ConfigError,
    default_config_paths,
    load_config,
    missing_llm_key_message,
    resolve_api_key,
)
from gateway.config.secrets import configured_secrets
from gateway.connecting import os_reason
from gateway.dashboard.exposure import SHORT_TOKEN_FIX, metrics_beyond_loopback, short_token
from gateway.dashboard.logins import LOGINS_FILE
from gateway.dashboard.token import DASHBOARD_TOKEN_FILE
from gateway.logs import CHAT_LOG_NAME, redact, setup_logging
from gateway.ops.backup_units import add_daily, unit_without_daily
from gateway.ops.doctor_postgres import postgres_checks
from gateway.ops.mcp_check import check_mcp_servers
from gateway.ops.reachability import (
    Check,
    check_alerts_reach,
    check_discord,
    check_providers,
    check_telegram,
)
from gateway.ops.service import default_unit_path
from gateway.store import DatabaseProbe, DatabaseReport, open_store
from gateway.store.datadir_lock import lock_holder
from gateway.store.errors import StoreError, write_problem


class Report:
    """Prints each check as it completes; ``ok`` is False after any failure."""

    def __init__(self, out: TextIO, secrets: list[str] | None = None) -> None:
        self.out = out
        self.secrets = list(secrets or [])
        self.ok = True
        encoding = getattr(out, "encoding", None) or "utf-8"
        try:
            "✓✗".encode(encoding)
            self.marks = ("✓", "✗")
        except (UnicodeEncodeError, LookupError):
            self.marks = ("OK  ", "FAIL")

    def add(self, check: Check) -> None:
        self.ok = self.ok and check.ok
        line = f"{self.marks[0] if check.ok else self.marks[1]} {check.name}: {check.detail}"
        if check.hint and not check.ok:  # under a detail of several lines, on its own
            line += f"\n  — {check.hint}" if "\n" in check.detail else f" — {check.hint}"
        print(redact(line, self.secrets), file=self.out, flush=True)


async def run_doctor(
    config_path: str | None,
    *,
    fix: bool = False,
    timeout: float = 10.0,
    log_format: str | None = None,
    out: TextIO | None = None,
    confirm: Callable[[str], str] | None = None,
) -> int:
    """Run every check, print one line each; 0 when all pass, else 1."""
    report = Report(out or sys.stdout)
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        report.add(Check("config", False, str(exc), _config_hint(config_path, exc)))
        return 1
    setup_logging(config, fmt=log_format)
    report.secrets = configured_secrets(config)
    report.add(describe_config(config))
    report.add(check_secrets(config))
    for check in await check_providers(config, timeout):
        report.add(check)
    for check in await check_mcp_servers(config, timeout):
        report.add(check)
    if config.platforms.telegram.enabled:
        report.add(await check_telegram(config, timeout))
        if (webhook := config.platforms.telegram.webhook) is not None:
            report.add(await check_webhook_port(config, webhook))
    if config.platforms.discord.enabled:
        report.add(await check_discord(config, timeout))
    alerts = await check_alerts_reach(config, timeout)
    if alerts is not None:
        report.add(alerts)
    for check in await check_database(config, timeout):
        report.add(check)
    report.add(check_permissions(config, fix=fix, confirm=confirm))
    report.add(check_backup(config))
    if (timer := check_backup_timer(config, fix=fix)) is not None:
        report.add(timer)
    if config.dashboard.enabled:
        report.add(await check_dashboard(config))
    return 0 if report.ok else 1


# -- config and secrets --------------------------------------------------------------------


def _config_hint(path: str | Path | None, error: ConfigError) -> str:
    file = Path(path).expanduser() if path is not None else None
    if file is not None and not file.is_file():
        return "check the path, or run `nightowl init` to write one"
    if file is not None and not os.access(file, os.R_OK):
        return "check the file's owner and permissions"
    several = len(str(error).splitlines()) > 1
    return f"fix {'the keys above' if several else 'that key'} (see config.yaml.example)"


def describe_config(config: Config) -> Check:
    if config.source is None:
        looked = ", ".join(str(p) for p in default_config_paths())
        where = (
            f"no config file ({looked} not found): built-in defaults; `nightowl init` writes one"
        )
    else:
        where = str(config.source.absolute())
    platforms = [
        name
        for name, on in (
            ("telegram", config.platforms.telegram.enabled),
            ("discord", config.platforms.discord.enabled),
            ("console", config.console_enabled),
        )
        if on
    ]
    model = config.model
    return Check(
        "config",
        True,
        f"{where} (model {model_label(model.name, model.provider, model.base_url)};"
        f" {', '.join(platforms)})",
    )


def check_secrets(config: Config) -> Check:
    model = config.model
    key = resolve_api_key(model.provider, model.api_key, model.base_url)
    if key is None:
        return Check("secrets", False, missing_llm_key_message(config).rstrip("."))
    found = ["LLM key found" if key != NO_KEY_NEEDED else "no LLM key needed (local server)"]
    for name in ("telegram", "discord"):
        if getattr(config.platforms, name).enabled:
            found.append(f"{name} token set")  # load_config refused it if missing
    detail = ", ".join(found)
    from_shell = shell_only_variables(config)
    if from_shell:
        where = (
            f"put them in {config.source.parent / '.env'}"
            if config.source
            else "`nightowl init` writes a config and keeps them in the .env beside it"
        )
        detail += (
            f" (note: {', '.join(from_shell)} came from this shell's environment, which a "
            f"systemd service does not have; {where})"
        )
    return Check("secrets", True, detail)


def shell_only_variables(config: Config) -> list[str]:
    """Environment variables holding a secret in use that the config's ``.env`` lacks."""
    secrets = set(configured_secrets(config))
    dotenv = config.source.parent / ".env" if config.source else None
    defined = dotenv.read_text(encoding="utf-8") if dotenv and dotenv.is_file() else ""
    names = {m.group(1) for m in re.finditer(r"^\s*(?:export\s+)?(\w+)\s*=", defined, re.M)}
    return sorted(
        name for name, value in os.environ.items() if value in secrets and name not in names
    )


# -- database and files --------------------------------------------------------------------


async def check_database(config: Config, timeout: float = 10.0) -> list[Check]:
    """The store the config names, asked without being opened (nothing is created,
    migrated or locked)."""
    path = config.database_path
    if not config.store.shared and not path.exists():
        writable = _nearest_existing(path.parent)
        if not _can_write(writable):
            return [
                Check(
                    "database",
                    False,
                    f"{path} does not exist and {writable} is not writable",
                    "fix data_dir or its owner",
                )
            ]
        return [Check("database", True, f"none yet; the first run creates {path}")]
    try:
        found = await open_store(config).examine(timeout)
    except StoreError as problem:  # says what is wrong: permissions are not a backup's to fix
        return [
            Check("database", False, str(problem), "check store.dsn" if config.store.shared else "")
        ]
    if isinstance(found, DatabaseProbe):
        return postgres_checks(config, found)
    return [_file_check(path, found)]


def _file_check(path: Path, found: DatabaseReport) -> Check:
    if not found.sound:
        more = len(found.integrity) - 1
        detail = f"damaged: {found.integrity[0][:160]}" + (f" (and {more} more)" if more else "")
        return Check("database", False, detail, _RESTORE_HINT)
    unwritable = write_problem(path)
    if unwritable is not None:
        return Check("database", False, str(unwritable))
    version = f"schema v{found.schema_version}"
    if found.schema_version > found.current_version:
        return Check(
            "database",
            False,
            f"{version} is newer than this nightowl (v{found.current_version})",
            "upgrade nightowl",
        )
    if found.schema_version < found.current_version:
        version += f" (upgraded to v{found.current_version} at the next start)"
    holder = lock_holder(path.parent)
    running = "" if holder is None else f"; in use by a running gateway (pid {holder or '?'})"
    return Check("database", True, f"{path}: integrity ok, {version}{running}")


_RESTORE_HINT = (
    "stop the gateway, save what can be read with `nightowl sessions export`, then restore"
    " state.db from a backup"
)


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _can_write(path: Path) -> bool:
    return os.access(path, os.W_OK | os.X_OK)


def private_files(config: Config) -> list[Path]:
    """What holds transcripts or secrets and must be its owner's alone: the config, its
    ``.env``, the data dir and what nightowl keeps there (docs/design.md#private-files)."""
    data = config.data_dir
    db = config.database_path
    files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    files += [data / name for name in _DATA_FILES]
    if config.source is not None:
        files += [config.source, config.source.parent / ".env"]
    return ([data] if data.is_dir() else []) + [f for f in files if f.is_file()]


#: Files in the data dir besides the database: what they hold is private.
_DATA_FILES = (
    CACHE_FILE_NAME,  # which models and endpoints this install talks to
    WEBHOOK_SECRET_FILE,  # whoever reads it can post updates as any user
    DASHBOARD_TOKEN_FILE,  # whoever reads it can log in to the dashboard
    LOGINS_FILE,  # says when the operator logged in (it opens no login)
    CHAT_LOG_NAME,  # names sessions, may quote what went wrong
    CHAT_LOG_NAME + ".1",
    STATUS_FILE,  # where the backups go, and why the last one failed
    UNSENT_FILE,  # alerts not sent yet: what is wrong with this install
)


def check_permissions(
    config: Config, *, fix: bool = False, confirm: Callable[[str], str] | None = None
) -> Check:
    """Flag private files (and the data dir) other users may read or write; ``fix`` (or a
    yes) makes them 0600 (the data dir 0700).

    ``confirm`` asks the question; by default only an interactive terminal is asked.
    """
    modes = [(f, stat.S_IMODE(f.stat().st_mode)) for f in private_files(config)]
    exposed = [(f, mode) for f, mode in modes if mode & 0o077]
    if not exposed:
        return Check(
            "permissions", True, "config, database and data dir are not open to other users"
        )
    listing = ", ".join(f"{f} ({mode:04o})" for f, mode in exposed)
    if not fix:
        fix = _ask_to_fix(listing, confirm)
    if not fix:
        directory = ", 700 for the data dir" if any(f.is_dir() for f, _ in exposed) else ""
        return Check(
            "permissions",
            False,
            f"readable by other users: {listing}",
            f"run: nightowl doctor --fix (chmod 600{directory})",
        )
    for path, _ in exposed:
        path.chmod(0o700 if path.is_dir() else 0o600)
    return Check("permissions", True, f"made private: {listing}")


def _ask_to_fix(listing: str, confirm: Callable[[str], str] | None) -> bool:
    if confirm is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            return False
        confirm = input
    try:
        answer = confirm(f"Other users can read {listing}. Make them private now? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


# -- backups -------------------------------------------------------------------------------


def check_backup(config: Config) -> Check:
    """The last ``nightowl backup``'s outcome, as the alerts see it
    (docs/operations.md#backup-alerts)."""
    run = last_run(config.data_dir)
    if run is None:
        return Check(
            "backup",
            True,
            "none made yet (`nightowl backup`; daily: `nightowl install-service --backup-daily`)",
        )
    wrong = described(run, time.time())
    if not wrong:
        return Check("backup", True, f"the last one, {utc(run.at)}: {run.what}")
    if run.whole:  # whole, but the next one did not come
        return Check(
            "backup",
            False,
            wrong,
            "check its timer: systemctl --user list-timers nightowl-backup.timer",
        )
    return Check("backup", False, wrong, "run `nightowl backup` to see what it says and fix that")


def check_backup_timer(config: Config, *, fix: bool = False) -> Check | None:
    """A daily backup unit written before its runs said ``--daily``: its timer stopping
    would never be told (docs/operations.md#backup-alerts). ``fix`` adds the flag to its
    ExecStart and nothing else. None: no such unit."""
    path = unit_without_daily(config.source) if config.source is not None else None
    if path is None:
        return None
    system = path.parent == default_unit_path(True).parent
    reload = "sudo systemctl daemon-reload" if system else "systemctl --user daemon-reload"
    if fix:
        try:
            add_daily(path)
        except ValueError as exc:
            return Check("backup timer", False, f"could not add --daily to {path}: {exc}")
        except OSError as exc:
            return Check(
                "backup timer",
                False,
                f"could not add --daily to {path}: {os_reason(exc)}",
                "run `sudo nightowl doctor --fix`" if system else "check its owner",
            )
        return Check("backup timer", True, f"added --daily to {path}'s ExecStart: now {reload}")
    return Check(
        "backup timer",
        False,
        f"{path} runs `nightowl backup` without --daily (an older nightowl wrote it): a daily"
        " backup that stops coming would not be told",
        f"run: nightowl doctor --fix (adds --daily to its ExecStart), then {reload}",
    )


# -- the dashboard -------------------------------------------------------------------------


async def check_dashboard(config: Config) -> Check:
    """A token short enough to guess fails, and so does a port the gateway could not
    listen on (it would run without its dashboard); /metrics under no token of its own on
    a ``listen`` beyond loopback is a note (docs/design.md#dashboard)."""
    settings = config.dashboard
    if settings.token:
        source = "dashboard.token"
    else:
        kept = config.data_dir / DASHBOARD_TOKEN_FILE
        source = str(kept) if kept.is_file() else f"{kept} (made at the first start)"
    metrics = "needs its token" if settings.metrics_token else "for this machine only"
    where = f"{settings.listen or '*'}:{settings.port}"
    bound, taken, port_hint = await _dashboard_port(config, where)
    detail = f"on {where}{bound}, token from {source}; /metrics {metrics}"
    weak = short_token(settings)
    note = metrics_beyond_loopback(settings)
    failures = [said for said in (weak, taken) if said]
    if failures:
        detail = "; ".join(failures)
    if note:
        detail += f" (note: {note})"
    hints = ([SHORT_TOKEN_FIX] if weak else []) + ([port_hint] if taken else [])
    return Check("dashboard", not failures, detail, "; ".join(hints))


async def _dashboard_port(config: Config, where: str) -> tuple[str, str, str]:
    settings = config.dashboard
    if not settings.port:
        return " (any free port)", "", ""
    return await _port_free(
        config, settings.listen, settings.port, where, _WITHOUT_DASHBOARD, "dashboard"
    )


async def check_webhook_port(config: Config, webhook: WebhookConfig) -> Check:
    """Whether the gateway could listen for Telegram's webhook: a port another program
    holds stops its start (docs/operations.md, "Check it")."""
    where = f"{webhook.listen}:{webhook.port}"
    bound, taken, hint = await _port_free(
        config,
        webhook.listen,
        webhook.port,
        where,
        "the gateway would not start",
        "platforms.telegram.webhook",
    )
    return Check("telegram webhook", not taken, taken or f"can listen on {where}{bound}", hint)


async def _port_free(
    config: Config, listen: str, port: int, where: str, without: str, section: str
) -> tuple[str, str, str]:
    """Whether ``listen:port`` can be bound, bound as aiohttp does it (SO_REUSEADDR) and
    closed at once: words for the ✓ line, or why the gateway could not listen there
    (``without``: what it would do then) and what to do (``section``: where the
    settings are)."""
    try:
        server = await asyncio.get_running_loop().create_server(
            asyncio.Protocol, listen, port, reuse_address=True
        )
    except OSError as error:
        problem: OSError | None = error
    else:
        server.close()
        await server.wait_closed()
        problem = None
    # A gateway on SQLite holds its data dir's lock; one on PostgreSQL leaves no sign.
    holder = None if config.store.shared else lock_holder(config.database_path.parent)
    gateway = f"the running gateway, pid {holder or '?'}"
    if problem is None:
        if holder is None:
            return " (free)", "", ""
        return f" (free: {gateway}, does not listen there: restart it)", "", ""
    if problem.errno != errno.EADDRINUSE:
        said = f"cannot listen on {where}: {os_reason(problem)}; {without}"
        return "", said, f"check {section}.listen and {section}.port"
    if holder is not None:
        return f" (in use by {gateway})", "", ""
    if config.store.shared:
        return " (in use: by the gateway if it runs here; on PostgreSQL doctor cannot tell)", "", ""
    said = f"{where} is in use by another program; {without}"
    return "", said, f"choose another {section}.port, or stop that program"


_WITHOUT_DASHBOARD = "the gateway would log that and run without its dashboard"
