"""`nightowl install-service` writes a unit systemd accepts; sd_notify reaches its socket."""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from gateway.ops.cli import main
from gateway.ops.service import Notifier

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed on this machine"
)


def config_file(tmp_path: Path, folder: str = "my nightowl") -> Path:
    path = tmp_path / folder / "config.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(
        f"data_dir: {tmp_path / 'data'}\n"
        "platforms:\n  telegram:\n    enabled: true\n    token: '123456:service-token'\n"
    )
    return path


def install(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["install-service", *args])
    out, err = capsys.readouterr()
    return code, out + err


def verify(unit: Path) -> None:
    """systemd-analyze verify accepts the unit without a single warning."""
    assert SYSTEMD_ANALYZE is not None
    checked = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", str(unit)], capture_output=True, text=True, timeout=30
    )
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout + checked.stderr == ""


def settings(unit: Path) -> dict[str, str]:
    pairs = [line.split("=", 1) for line in unit.read_text().splitlines() if "=" in line]
    return {key: value for key, value in pairs if not key.startswith("#")}


@needs_systemd_analyze
def test_user_unit_runs_this_venv_with_the_absolute_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path)  # a space in the path must survive quoting
    unit = tmp_path / "out" / "nightowl.service"
    code, out = install(capsys, "-c", str(config), "--output", str(unit))
    assert code == 0, out
    verify(unit)
    values = settings(unit)
    assert values["Type"] == "notify" and values["WatchdogSec"] == "60"
    assert values["NotifyAccess"] == "main"
    assert values["Restart"] == "on-failure" and values["RestartSec"] == "5"
    assert values["StartLimitBurst"] == "5"
    assert values["StandardError"] == "journal"
    assert values["WantedBy"] == "default.target"
    assert "User" not in values
    assert values["ExecStart"].endswith(f'run -c "{config}"')
    assert Path(values["ExecStart"].split()[0]).name == "nightowl"
    assert "systemctl --user enable --now nightowl.service" in out
    assert "journalctl --user -u nightowl -f" in out
    assert oct(unit.stat().st_mode & 0o777) == "0o644"


@needs_systemd_analyze
def test_system_unit_runs_as_a_dedicated_user(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, "etc")
    unit = tmp_path / "nightowl.service"
    code, out = install(
        capsys, "-c", str(config), "--output", str(unit), "--system", "--user", "owl"
    )
    assert code == 0, out
    verify(unit)
    values = settings(unit)
    assert values["User"] == "owl" and values["Group"] == "owl"
    assert values["WantedBy"] == "multi-user.target"
    assert values["NoNewPrivileges"] == "yes"
    assert "sudo systemctl enable --now nightowl.service" in out
    assert "sudo useradd --system" in out and " owl" in out


@needs_systemd_analyze
def test_no_notify_writes_a_simple_unit_and_the_drain_bound_sets_the_stop_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, "cfg")
    unit = tmp_path / "nightowl.service"
    code, out = install(
        capsys,
        *("-c", str(config), "--output", str(unit)),
        *("--no-notify", "--shutdown-timeout", "12"),
    )
    assert code == 0, out
    verify(unit)
    values = settings(unit)
    assert values["Type"] == "simple"
    assert "WatchdogSec" not in values and "NotifyAccess" not in values
    assert values["ExecStart"].endswith("--shutdown-timeout 12")
    assert values["TimeoutStopSec"] == "27"


def test_an_existing_unit_is_kept_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, "cfg")
    unit = tmp_path / "nightowl.service"
    unit.write_text("# mine\n")
    code, out = install(capsys, "-c", str(config), "--output", str(unit))
    assert code == 1 and "--force" in out
    assert unit.read_text() == "# mine\n"
    code, _ = install(capsys, "-c", str(config), "--output", str(unit), "--force")
    assert code == 0 and "ExecStart=" in unit.read_text()


def test_a_config_file_is_required(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.nightowl/config.yaml either
    code, out = install(capsys, "--output", str(tmp_path / "nightowl.service"))
    assert code == 2 and "needs a config file" in out
    assert not (tmp_path / "nightowl.service").exists()


def test_notifier_sends_datagrams_to_the_notify_socket(tmp_path: Path) -> None:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(path))
        listener.settimeout(5)
        notifier = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "30000000"})
        assert notifier.ready("serving console")
        assert listener.recv(4096).decode() == "READY=1\nSTATUS=serving console"
        assert notifier.stopping()
        assert listener.recv(4096).decode() == "STOPPING=1"
    assert notifier.watchdog_seconds == 30


def test_outside_systemd_the_notifier_does_nothing() -> None:
    notifier = Notifier({})
    assert not notifier.enabled and not notifier.ready() and notifier.watchdog_seconds is None
    # A watchdog meant for another process is not ours to feed.
    assert Notifier({"WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}).watchdog_seconds is None
