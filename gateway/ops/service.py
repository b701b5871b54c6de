"""Running nightowl under systemd: the unit ``install-service`` writes, and sd_notify.

The unit is rendered from the template ``systemd/nightowl.service`` for the virtualenv
nightowl runs from and the absolute path of its config. By default it is a user unit
(``~/.config/systemd/user/nightowl.service``); ``--system`` writes a system unit that
runs as a dedicated user with a little sandboxing.

With ``Type=notify`` (the default) the gateway tells systemd when it is ready, when it
starts stopping, and pings the watchdog; :class:`Notifier` speaks that protocol in a few
lines (a datagram to ``$NOTIFY_SOCKET``), so there is no dependency on libsystemd.
``--no-notify`` writes a ``Type=simple`` unit without a watchdog instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from gateway.ops.shipped import shipped

if TYPE_CHECKING:
    from gateway.config.schema import Config

log = logging.getLogger(__name__)

UNIT_NAME = "nightowl.service"
#: How long SIGTERM waits for replies in progress before stopping them (``run``'s default).
DEFAULT_DRAIN_SECONDS = 30.0
#: systemd restarts a gateway whose event loop stopped answering for this long.
WATCHDOG_SECONDS = 60
#: RestartSteps= / RestartMaxDelaySec= (a growing restart delay) exist from systemd 254.
BACKOFF_SINCE_SYSTEMD = 254


# -- the unit ------------------------------------------------------------------------------


@dataclass(frozen=True)
class UnitSpec:
    """What goes into the unit. ``command`` starts nightowl (the venv's script)."""

    config_path: Path
    command: tuple[str, ...]
    system: bool = False
    user: str = "nightowl"
    notify: bool = True
    drain_seconds: float = DEFAULT_DRAIN_SECONDS
    #: The target machine's systemd major version; None when unknown.
    systemd_version: int | None = None


def find_template() -> Path:
    """The unit template: in the source tree, or where a package install put it."""
    found = shipped("systemd", UNIT_NAME)
    if found is not None:
        return found
    raise FileNotFoundError(
        "the unit template systemd/nightowl.service is missing from this installation"
    )


def nightowl_command() -> tuple[str, ...]:
    """How systemd should start this nightowl: the ``nightowl`` script of this venv."""
    # Not resolved: a venv's python is a symlink, and the venv is what must be used.
    script = Path(sys.executable).parent / "nightowl"
    if script.is_file() and os.access(script, os.X_OK):
        return (str(script.absolute()),)
    return (str(Path(sys.executable).absolute()), "-m", "gateway")


def quote_exec_arg(arg: str) -> str:
    """One ExecStart= argument: ``%`` and ``$`` escaped, quoted when it has spaces."""
    escaped = arg.replace("%", "%%").replace("$", "$$")
    if re.search(r"[\s\"'\\;]", escaped):
        escaped = '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return escaped


def render_unit(spec: UnitSpec, template: str | None = None) -> str:
    """The unit file text for ``spec``."""
    text = template if template is not None else find_template().read_text(encoding="utf-8")
    config = spec.config_path.absolute()
    argv = [*spec.command, "run", "-c", str(config)]
    if spec.drain_seconds != DEFAULT_DRAIN_SECONDS:
        argv += ["--shutdown-timeout", f"{spec.drain_seconds:g}"]
    values = {
        "config": str(config).replace("%", "%%"),
        "type": "notify" if spec.notify else "simple",
        "notify_block": (
            f"NotifyAccess=main\nWatchdogSec={WATCHDOG_SECONDS}" if spec.notify else ""
        ),
        "exec_start": " ".join(quote_exec_arg(a) for a in argv),
        "working_directory": str(config.parent).replace("%", "%%"),
        "backoff_block": _backoff_block(spec.systemd_version),
        "drain_seconds": f"{spec.drain_seconds:g}",
        "stop_timeout": f"{spec.drain_seconds + 15:g}",
        "system_block": _system_block(spec.user) if spec.system else "",
        "wanted_by": "multi-user.target" if spec.system else "default.target",
    }
    lines = []
    for line in text.splitlines():
        if line.startswith("##"):
            continue  # notes about the template itself
        # A line that is only an empty block placeholder disappears instead of leaving a gap.
        block = re.fullmatch(r"\$\{(\w+_block)\}", line.strip())
        if block and not values[block.group(1)]:
            continue
        lines.append(line)
    return Template("\n".join(lines) + "\n").substitute(values)


def _backoff_block(version: int | None) -> str:
    if version is not None and version >= BACKOFF_SINCE_SYSTEMD:
        return (
            "# Each restart waits longer, up to 5 minutes.\nRestartSteps=5\nRestartMaxDelaySec=300"
        )
    return "# (systemd 254+ would also grow the restart delay: RestartSteps=, RestartMaxDelaySec=)"


def _system_block(user: str) -> str:
    return "\n".join(
        [
            f"User={user}",
            f"Group={user}",
            "# /var/lib/nightowl, owned by the service user: a good data_dir for a system unit.",
            "StateDirectory=nightowl",
            "StateDirectoryMode=0700",
            "NoNewPrivileges=yes",
            "PrivateTmp=yes",
            "ProtectSystem=full",
            "ProtectKernelTunables=yes",
            "ProtectKernelModules=yes",
            "ProtectControlGroups=yes",
            "RestrictSUIDSGID=yes",
        ]
    )


def default_unit_path(system: bool, environ: Mapping[str, str] | None = None) -> Path:
    if system:
        return Path("/etc/systemd/system") / UNIT_NAME
    env = os.environ if environ is None else environ
    config_home = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return config_home / "systemd" / "user" / UNIT_NAME


def systemd_version() -> int | None:
    """This machine's systemd major version (from ``systemctl --version``), if any."""
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return None
    try:
        out = subprocess.run(
            [systemctl, "--version"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"systemd (\d+)", out)
    return int(match.group(1)) if match else None


def next_steps(spec: UnitSpec, unit_path: Path, data_dir: Path) -> list[str]:
    """The exact commands to enable, start and follow the unit just written."""
    name = UNIT_NAME.removesuffix(".service")
    if not spec.system:
        return [
            "systemctl --user daemon-reload",
            f"systemctl --user enable --now {UNIT_NAME}",
            f"loginctl enable-linger {_login_name()}   # keep it running after you log out",
            f"systemctl --user status {name}",
            f"journalctl --user -u {name} -f",
        ]
    user = spec.user
    config = _shell_quote(str(spec.config_path.absolute()))
    steps = [
        f"sudo useradd --system --home-dir /var/lib/{name} --shell /usr/sbin/nologin {user}"
        "   # once",
        f"sudo chown {user}: {config} && sudo chmod 600 {config}"
        "   # and the same for a .env beside it",
    ]
    if spec.config_path.absolute().is_relative_to(Path.home()):
        steps.append(
            f"# {user} cannot read your home directory: keep the config in /etc/{name}/ instead"
        )
    if Path(spec.command[0]).is_relative_to(Path.home()):
        steps.append(
            f"# {user} cannot run a virtualenv in your home directory: install nightowl in"
            f" e.g. /opt/{name}/venv and run install-service from there"
        )
    if data_dir != Path("/var/lib") / name:
        steps.append(
            f"# set data_dir: /var/lib/{name} in the config (the unit creates it for {user}),"
            f" or: sudo chown -R {user}: {_shell_quote(str(data_dir))}"
        )
    return [
        *steps,
        "sudo systemctl daemon-reload",
        f"sudo systemctl enable --now {UNIT_NAME}",
        f"systemctl status {name}",
        f"journalctl -u {name} -f",
    ]


def _login_name() -> str:
    try:
        return os.getlogin()
    except OSError:
        return os.environ.get("USER", "$USER")


def _shell_quote(text: str) -> str:
    return text if re.fullmatch(r"[\w./@:+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def write_unit(path: Path, text: str, *, force: bool = False) -> None:
    """Write the unit (0644: systemd must read it); an existing one needs ``force``."""
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists; pass --force to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o644)


def unit_spec(config_path: Path, args: Any) -> UnitSpec:
    """The unit ``install-service``'s arguments ask for."""
    return UnitSpec(
        config_path=config_path.absolute(),
        command=nightowl_command(),
        system=args.system,
        user=args.user,
        notify=not args.no_notify,
        drain_seconds=args.shutdown_timeout,
        systemd_version=systemd_version(),
    )


def unit_path(args: Any) -> Path:
    """Where ``install-service`` writes the gateway's unit."""
    return Path(args.output).expanduser() if args.output else default_unit_path(args.system)


#: Why a config with only the console gets no service: it would stop as it starts.
NO_PLATFORM = (
    "no platform is enabled in the config, and a service has no terminal for the console"
    " chat: it would stop as soon as it started. Enable telegram or discord (platforms."
    "telegram.enabled: true, and its token), or chat with `nightowl chat` instead"
)


def install_service(config: Config, args: Any) -> int:
    """``nightowl install-service``: write the unit, print what to run next."""
    if config.source is None:
        print(
            "nightowl: install-service needs a config file (-c PATH): `nightowl init` writes"
            " one (or start from `nightowl init --example`, with secrets in a .env beside it)",
            file=sys.stderr,
        )
        return 2
    if not config.platforms.remote:  # the console needs a terminal
        print(f"nightowl: {NO_PLATFORM}", file=sys.stderr)
        return 2
    spec = unit_spec(config.source, args)
    target = default_unit_path(spec.system)
    path = unit_path(args)
    try:
        write_unit(path, render_unit(spec), force=args.force)
    except FileExistsError as exc:
        print(f"nightowl: {exc}", file=sys.stderr)
        return 1
    except PermissionError:
        print(
            f"nightowl: cannot write {path} (permission denied). Run it with sudo, or write "
            f"it elsewhere with --output ./{UNIT_NAME} and copy it to {target}.",
            file=sys.stderr,
        )
        return 1
    kind = f"Type=notify, watchdog {WATCHDOG_SECONDS} s" if spec.notify else "Type=simple"
    print(f"Wrote {path} ({'system' if spec.system else 'user'} unit, {kind}).")
    steps = next_steps(spec, path, config.data_dir)
    if path.absolute() != target:
        sudo = "sudo " if spec.system else ""
        steps.insert(0, f"{sudo}install -D -m 644 {_shell_quote(str(path))} {target}")
    print("Next:")
    for step in steps:
        print(f"  {step}")
    doctor = " ".join(_shell_quote(part) for part in spec.command)
    doctor += f" doctor -c {_shell_quote(str(spec.config_path))}"
    if spec.system:
        doctor = f"sudo -u {spec.user} {doctor}"
    print(f"Check the setup first with: {doctor}")
    return 0


# -- sd_notify -----------------------------------------------------------------------------


class Notifier:
    """sd_notify(3) without libsystemd: ``KEY=VALUE`` lines in one datagram.

    Outside systemd (no ``$NOTIFY_SOCKET``) every call does nothing and returns False.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.address = env.get("NOTIFY_SOCKET") or None
        self.watchdog_seconds = _watchdog_seconds(env)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *assignments: str) -> bool:
        if self.address is None:
            return False
        # "@name" is a socket in the abstract namespace.
        target = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.setblocking(False)  # never stall the event loop on a full queue
                sock.sendto("\n".join(assignments).encode(), target)
        except OSError as exc:
            log.debug("sd_notify to %s failed: %s", self.address, exc)
            return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def stopping(self, status: str = "") -> bool:
        return self.send("STOPPING=1", *([f"STATUS={status}"] if status else []))

    async def feed_watchdog(self) -> None:
        """Ping the watchdog at half its interval until cancelled; returns at once without one.

        A blocked event loop stops the pings, and systemd restarts the service.
        """
        if self.watchdog_seconds is None or not self.enabled:
            return
        while True:
            self.send("WATCHDOG=1")
            await asyncio.sleep(self.watchdog_seconds / 2)


def _watchdog_seconds(env: Mapping[str, str]) -> float | None:
    with contextlib.suppress(ValueError):
        usec = int(env.get("WATCHDOG_USEC", ""))
        pid = env.get("WATCHDOG_PID")
        if usec > 0 and (not pid or int(pid) == os.getpid()):
            return usec / 1_000_000
    return None
