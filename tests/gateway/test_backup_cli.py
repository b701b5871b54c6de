"""`nightowl backup` and `nightowl restore` through the real command line, in process
(docs/operations.md#backups): what is refused, what secrets go in, --keep, PostgreSQL,
and the daily timer `install-service --backup-daily` writes. The end-to-end run beside a
gateway answering messages is tests/e2e/test_backup.py."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import asyncpg
import pytest
import yaml

from gateway.backup_status import STATUS_FILE
from gateway.config.schema import load_config
from gateway.ops.cli import main
from gateway.ops.doctor import check_backup, check_backup_timer
from gateway.ops.restore import point_dsn_at
from tests.gateway.test_memory_cli import fill, fill_postgres
from tests.postgres import ADMIN_DSN, TestDatabase, with_database


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A config with a .env beside it, a data dir with a database, a hook and a token."""
    home = tmp_path / "home"
    home.mkdir()
    path = home / "config.yaml"
    path.write_text(f"# mine\ndata_dir: {tmp_path / 'data'}\nmodel:\n  name: m\n")
    (home / ".env").write_text("OPENAI_API_KEY=sk-very-secret\n")
    asyncio.run(fill(tmp_path / "data" / "state.db"))
    (tmp_path / "data" / "hooks").mkdir()
    (tmp_path / "data" / "hooks" / "audit.py").write_text("def on_event(event): pass\n")
    (tmp_path / "data" / "dashboard_token").write_text("t0ken\n")
    return path


def nightowl(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def backup(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> Path:
    code, out, err = nightowl(capsys, "backup", "-c", str(config), *args)
    assert code == 0, err
    return Path(out.splitlines()[0].removeprefix("Backed up to ").split(" (mode")[0])


def names(archive: Path) -> list[str]:
    with tarfile.open(archive) as opened:
        return opened.getnames()


def test_restore_refuses_a_data_dir_that_is_not_empty(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = backup(capsys, config)
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    code, out, err = nightowl(capsys, "restore", str(archive), "--data-dir", str(target))
    assert code == 1 and out == ""
    assert err == (
        f"nightowl: {target} is not empty: restore into an empty data dir, or pass --force"
        " to write over what is there\n"
    )
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    code, out, err = nightowl(capsys, "restore", str(archive), "--data-dir", str(target), "--force")
    assert code == 0, err
    assert (target / "state.db").exists() and (target / "notes.txt").read_text() == "mine"


def tampered(archive: Path, part: str, target: Path) -> Path:
    """``archive`` again, with ``part``'s bytes changed and the manifest left as it was."""
    with tarfile.open(archive) as source, tarfile.open(target, "w:gz") as copy:
        for member in source:
            data = source.extractfile(member)
            assert data is not None
            content = data.read()
            if member.name == part:
                content = content.replace(b"mine", b"MINE")
                member.size = len(content)
            copy.addfile(member, io.BytesIO(content))
    return target


def test_a_tampered_archive_is_refused_with_a_sentence_and_nothing_is_restored(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tampered(backup(capsys, config), "config/config.yaml", tmp_path / "bad.tar.gz")
    target = tmp_path / "restored"
    code, out, err = nightowl(capsys, "restore", str(bad), "--data-dir", str(target))
    assert code == 1 and out == ""
    assert err == (
        f"nightowl: {bad} was altered or is damaged: config/config.yaml does not match the"
        " sha256 its manifest holds; nothing was restored\n"
    )
    assert not target.exists()
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a backup at all")
    code, _, err = nightowl(capsys, "restore", str(junk), "--data-dir", str(target))
    assert code == 1 and err.startswith(f"nightowl: {junk} is not a readable nightowl backup")

    # Unpacked and packed again: tar adds the directories, which no backup holds.
    repacked = tmp_path / "repacked.tar.gz"
    with tarfile.open(backup(capsys, config)) as original, tarfile.open(repacked, "w:gz") as copy:
        folder = tarfile.TarInfo("config")
        folder.type = tarfile.DIRTYPE
        copy.addfile(folder)
        for member in original:
            copy.addfile(member, original.extractfile(member))
    code, _, err = nightowl(capsys, "restore", str(repacked), "--data-dir", str(target))
    assert code == 1 and not target.exists()
    assert err == (
        f"nightowl: {repacked} holds config (a directory), which no backup holds: restore the"
        " archive nightowl backup wrote, not one unpacked and packed again\n"
    )


def test_secrets_go_in_only_with_with_secrets(
    config: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    without = backup(capsys, config)
    code, out, _ = nightowl(capsys, "backup", "-c", str(config), "--to", str(tmp_path / "b.tgz"))
    assert code == 0
    assert "not included: .env (the secrets: pass --with-secrets to include it)" in out
    assert "config/.env" not in names(without)
    assert not any(b"sk-very-secret" in chunk for chunk in _contents(without))

    code, out, err = nightowl(capsys, "restore", str(without), "--data-dir", str(tmp_path / "bare"))
    assert code == 0, err  # the model's key is what doctor and run would stop at: named
    assert out.splitlines()[-1].endswith("(first put OPENAI_API_KEY in .env beside it)")

    with_secrets = backup(capsys, config, "--with-secrets")
    assert "config/.env" in names(with_secrets)
    target = tmp_path / "restored"
    code, out, err = nightowl(capsys, "restore", str(with_secrets), "--data-dir", str(target))
    assert code == 0, err
    assert "✓ .env (the secrets)" in out.splitlines()
    assert out.splitlines()[-1] == f"Check it with: nightowl doctor -c {target / 'config.yaml'}"
    assert (target / ".env").read_text() == "OPENAI_API_KEY=sk-very-secret\n"
    assert stat.S_IMODE((target / ".env").stat().st_mode) == 0o600
    code, out, err = nightowl(capsys, "memory", "list", "-c", str(target / "config.yaml"))
    assert code == 0 and "standup at half past nine" in out

    (config.parent / ".env").unlink()  # asked for secrets where there are none: said
    code, out, err = nightowl(
        capsys, "backup", "-c", str(config), "--with-secrets", "--to", str(tmp_path / "c.tgz")
    )
    assert code == 0, err
    assert f"not included: .env (--with-secrets: there is none beside {config})" in out


def test_restore_names_every_variable_the_config_still_needs_and_no_comment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As init writes it: a comment that speaks of ${VARIABLES}, a token named in a
    value, and the model's key given by the provider's own variable."""
    home = tmp_path / "home"
    home.mkdir()
    path = home / "config.yaml"
    path.write_text(
        "# secrets live in .env, named here as ${VARIABLES}\n"
        f"data_dir: {tmp_path / 'data'}\nmodel:\n  name: m\n"
        "platforms:\n  telegram:\n    enabled: true\n    token: ${TELEGRAM_BOT_TOKEN}\n"
    )
    asyncio.run(fill(tmp_path / "data" / "state.db"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "1:token-of-this-shell")
    archive = backup(capsys, path)
    monkeypatch.delenv("TELEGRAM_BOT_TOKEN")
    code, out, err = nightowl(capsys, "restore", str(archive), "--data-dir", str(tmp_path / "r"))
    assert code == 0, err
    assert out.splitlines()[-1].endswith(
        "(first put TELEGRAM_BOT_TOKEN, OPENAI_API_KEY in .env beside it)"
    )


def _contents(archive: Path) -> list[bytes]:
    with tarfile.open(archive) as opened:
        return [opened.extractfile(m).read() for m in opened if m.isfile()]  # type: ignore[union-attr]


def test_keep_leaves_the_newest_n_and_nothing_else_is_touched(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backups = tmp_path / "data" / "backups"
    written = [backup(capsys, config) for _ in range(3)]  # the same second, often
    (backups / "notes.txt").write_text("mine")
    code, out, err = nightowl(capsys, "backup", "-c", str(config), "--keep", "2")
    assert code == 0, err
    newest = Path(out.splitlines()[0].removeprefix("Backed up to ").split(" (mode")[0])
    assert "Removed 2 older backup(s) (--keep 2)." in out
    assert sorted(p.name for p in backups.iterdir()) == sorted(
        [written[2].name, newest.name, "notes.txt"]
    )
    with pytest.raises(SystemExit):
        main(["backup", "-c", str(config), "--keep", "0"])
    assert "--keep: must be 1 or more" in capsys.readouterr().err


def test_a_backup_needs_a_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\n")
    code, _, err = nightowl(capsys, "backup", "-c", str(path))
    assert code == 1
    assert err == (
        f"nightowl: no database at {tmp_path / 'data' / 'state.db'} yet: start the gateway"
        " once first\n"
    )


# -- PostgreSQL ----------------------------------------------------------------------------


@pytest.fixture
async def fresh_database(postgres_database: TestDatabase) -> object:
    """A database of its own, empty, for a restore; dropped after."""
    postgres_database.require()
    name = f"{postgres_database.name}_restore"
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    yield name
    admin = await asyncpg.connect(ADMIN_DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def test_each_run_is_kept_for_the_alerts_and_doctor(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/operations.md#backup-alerts: a failure is one sentence on stderr and the
    data dir's record; the next whole backup clears it; a later failure names it."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory\n")
    code, out, err = nightowl(capsys, "backup", "-c", str(config), "--to", f"{blocked}/x.tar.gz")
    assert code == 1 and out == ""
    assert err.startswith("nightowl: could not write the backup: ") and err.count("\n") == 1
    status = tmp_path / "data" / STATUS_FILE
    assert stat.S_IMODE(status.stat().st_mode) == 0o600
    failed = check_backup(load_config(config))
    assert not failed.ok and "failed: could not write the backup: " in failed.detail
    assert failed.detail.endswith("(no whole backup since this was kept)")

    archive = backup(capsys, config)
    whole = check_backup(load_config(config))
    assert whole.ok and whole.detail.endswith(f": {archive}")

    code, _, err = nightowl(capsys, "backup", "-c", str(config), "--to", str(archive))
    assert code == 1 and "exists: choose another name with --to" in err
    assert check_backup(load_config(config)) == whole  # a typo refused is not a run

    (tmp_path / "data" / "state.db").unlink()  # the timer's next run finds no database
    code, _, _ = nightowl(capsys, "backup", "-c", str(config))
    assert code == 1
    again = check_backup(load_config(config))
    assert not again.ok and "failed: no database at " in again.detail
    assert "(the last whole backup: " in again.detail


def test_a_daily_run_that_stops_coming_is_said_by_doctor(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The timer's runs say --daily: a user's timer stops at logout without lingering,
    and only the missing next run tells that it stopped."""
    code, _, err = nightowl(capsys, "backup", "-c", str(config), "--daily")
    assert code == 0, err
    assert check_backup(load_config(config)).ok  # on time
    record = tmp_path / "data" / STATUS_FILE
    run = json.loads(record.read_text())
    assert run["every"] == 86_400
    run["at"] -= 3 * 86_400  # three days on, no run since
    record.write_text(json.dumps(run))
    late = check_backup(load_config(config))
    assert not late.ok and late.detail.startswith("the daily backup has not run since ")
    assert "systemctl --user list-timers nightowl-backup.timer" in late.hint
    code, _, _ = nightowl(capsys, "backup", "-c", str(config))  # by hand: on time again,
    assert check_backup(load_config(config)).ok
    assert json.loads(record.read_text())["every"] == 86_400  # and the timer still expected


def test_a_record_that_cannot_be_read_is_said_not_taken_for_no_backup_yet(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record there but unreadable (half written by hand, a disk error) hides what the
    last run did: doctor says that, not "none made yet", and the next run writes it anew."""
    record = tmp_path / "data" / STATUS_FILE
    record.write_text('{"at": 17')
    unknown = check_backup(load_config(config))
    assert not unknown.ok
    assert unknown.detail.startswith("what the last backup did is not known: ")
    assert f"{record} cannot be read (JSONDecodeError(" in unknown.detail
    backup(capsys, config)
    assert check_backup(load_config(config)).ok


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: `sudo nightowl backup`")
def test_a_backup_run_by_root_leaves_its_record_to_the_data_dir_s_owner(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Else the gateway, running as that owner, could not read it: no alert at all."""
    data = tmp_path / "data"
    os.chown(data, 65534, 65534)  # nobody's
    archive = backup(capsys, config)
    record = data / STATUS_FILE
    for made in (record, archive, archive.parent):  # and the owner's next backup writes there
        assert (made.stat().st_uid, made.stat().st_gid) == (65534, 65534), made
    assert stat.S_IMODE(record.stat().st_mode) == 0o600


@pytest.mark.skipif(shutil.which("pg_dump") is None, reason="pg_dump is not on PATH")
def test_postgres_backup_runs_pg_dump_and_restores_into_a_fresh_database(
    tmp_path: Path, postgres_dsn: str, fresh_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(fill_postgres(postgres_dsn))
    dsn = postgres_dsn.replace("postgresql://", "postgresql://postgres:pw-not-in-files@", 1)
    path = tmp_path / "config.yaml"
    path.write_text(
        f"data_dir: {tmp_path / 'data'}\nstore:\n  backend: postgres\n  dsn: ${{NIGHTOWL_DSN}}\n"
    )
    (tmp_path / ".env").write_text(f"NIGHTOWL_DSN={dsn}\n")
    (tmp_path / "data").mkdir(mode=0o700)
    (tmp_path / "data" / "dashboard_token").write_text("t0ken\n")
    code, before, err = nightowl(capsys, "memory", "list", "-c", str(path))
    assert code == 0, err

    code, out, err = nightowl(capsys, "backup", "-c", str(path))
    assert code == 0, err
    assert "database   postgres.dump (pg_dump), schema v" in out and "memories 3" in out
    archive = Path(out.splitlines()[0].removeprefix("Backed up to ").split(" (mode")[0])
    assert names(archive)[:2] == ["manifest.json", "database/postgres.dump"]
    manifest = json.loads(_contents(archive)[0])
    assert manifest["backend"] == "postgres" and manifest["tables"]["memories"] == 3
    assert manifest["pg_dump"].startswith("pg_dump --format=custom --no-owner")
    assert "postgres@127.0.0.1" in manifest["pg_dump"]
    assert not any(b"pw-not-in-files" in chunk for chunk in _contents(archive))

    # Without --dsn: the dump is left in the data dir, private, with what to run.
    code, out, err = nightowl(capsys, "restore", str(archive), "--data-dir", str(tmp_path / "a"))
    assert code == 0, err
    dump = tmp_path / "a" / "postgres.dump"
    assert f"load it into an empty database with: pg_restore --no-owner --dbname=... {dump}" in out
    assert stat.S_IMODE(dump.stat().st_mode) == 0o600 and dump.read_bytes().startswith(b"PGDMP")

    schema = postgres_dsn.rsplit("search_path=", 1)[1]
    target_dsn = with_database(ADMIN_DSN, fresh_database, search_path=schema)
    target = tmp_path / "restored"
    code, out, err = nightowl(
        capsys, "restore", str(archive), "--data-dir", str(target), "--dsn", target_dsn
    )
    assert code == 0, err
    [database] = [line for line in out.splitlines() if line.startswith("✓ database")]
    assert "pg_restore" in database and "memories 3" in database and "sessions 1" in database
    assert (target / "dashboard_token").read_text() == "t0ken\n"
    assert not (target / "postgres.dump").exists()
    assert "✓ store.dsn  $NIGHTOWL_DSN, written to .env, names the database --dsn names" in out
    assert (target / ".env").read_text().splitlines()[-1] == f"NIGHTOWL_DSN={target_dsn}"
    assert stat.S_IMODE((target / ".env").stat().st_mode) == 0o600
    restored = target / "config.yaml"
    code, after, err = nightowl(capsys, "memory", "list", "-c", str(restored))
    assert code == 0, err
    assert after == before

    # Into a database that holds nightowl tables already: refused, in one sentence.
    code, _, err = nightowl(
        capsys, "restore", str(archive), "--data-dir", str(tmp_path / "again"), "--dsn", target_dsn
    )
    assert code == 1 and "holds nightowl tables already: restore into an empty database" in err


def test_without_pg_dump_the_backup_holds_the_files_and_the_command_to_run(
    tmp_path: Path,
    postgres_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    asyncio.run(fill_postgres(postgres_dsn))
    dsn = postgres_dsn.replace("postgresql://", "postgresql://postgres:pw-not-in-files@", 1)
    path = tmp_path / "config.yaml"
    path.write_text(f"data_dir: {tmp_path / 'data'}\nstore:\n  backend: postgres\n  dsn: {dsn}\n")
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_dump there
    code, out, err = nightowl(capsys, "backup", "-c", str(path))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].startswith("  database   not dumped (schema v") and "memories 3" in lines[1]
    assert lines[1].endswith("pg_dump is not on PATH, run:")
    assert lines[2].strip().startswith("PGPASSWORD=... pg_dump --format=custom --no-owner")
    assert "pw-not-in-files" not in out
    archive = Path(lines[0].removeprefix("Backed up to ").split(" (mode")[0])
    assert "database/postgres.dump" not in names(archive)
    code, out, err = nightowl(
        capsys, "restore", str(archive), "--data-dir", str(tmp_path / "restored")
    )
    assert code == 0, err
    assert "✗ database   not in this backup (pg_dump was not on PATH when it was made)" in out
    partial = check_backup(load_config(path))  # and the alert says so (a timer's backups)
    assert not partial.ok and " holds no database: pg_dump is not on PATH" in partial.detail


# -- install-service --backup-daily --------------------------------------------------------


def serving_telegram(config: Path) -> None:
    """``config`` with Telegram on: a service answers someone (the console needs a terminal)."""
    config.write_text(
        config.read_text() + "platforms:\n  telegram:\n    enabled: true\n"
        "    token: ${TELEGRAM_BOT_TOKEN}\n"
    )
    env = config.parent / ".env"
    env.write_text(env.read_text() + "TELEGRAM_BOT_TOKEN=123456:backup-token\n")


def test_backup_daily_writes_a_timer_and_a_oneshot_service_beside_the_unit(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serving_telegram(config)
    unit = tmp_path / "units" / "nightowl.service"
    args = ("install-service", "-c", str(config), "--output", str(unit), "--backup-daily")
    code, out, err = nightowl(capsys, *args, "--keep", "5")
    assert code == 0, err
    service, timer = unit.parent / "nightowl-backup.service", unit.parent / "nightowl-backup.timer"
    assert unit.exists()
    values = dict(line.split("=", 1) for line in service.read_text().splitlines() if "=" in line)
    assert values["Type"] == "oneshot" and values["UMask"] == "0077"
    assert values["ExecStart"].endswith(f"backup -c {config} --keep 5 --daily")
    assert "OnCalendar=daily" in timer.read_text() and "Persistent=true" in timer.read_text()
    assert "systemctl --user enable --now nightowl-backup.timer" in out
    analyze = shutil.which("systemd-analyze")
    if analyze is not None:
        checked = subprocess.run(
            [analyze, "verify", str(service), str(timer)], capture_output=True, text=True
        )
        assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stderr

    # Again: the gateway's unit is kept, the backup's are not overwritten without --force.
    code, out, err = nightowl(capsys, *args)
    assert code == 1 and f"Kept {unit}" in out and "nightowl-backup.service exists" in err
    code, out, err = nightowl(capsys, *args, "--force", "--keep", "3")
    assert code == 0, err
    assert "--keep 3" in service.read_text()


def test_the_console_s_chats_get_daily_backups_but_no_service_that_stops_at_once(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the console: under systemd it has no terminal, and would stop as it starts."""
    unit = tmp_path / "units" / "nightowl.service"
    code, out, err = nightowl(capsys, "install-service", "-c", str(config), "--output", str(unit))
    assert code == 2 and out == "" and not unit.exists()
    assert err.startswith("nightowl: no platform is enabled in the config, and a service has")
    assert "or chat with `nightowl chat` instead" in err
    args = ("install-service", "-c", str(config), "--output", str(unit), "--backup-daily")
    code, out, err = nightowl(capsys, *args)
    assert code == 0, err
    assert out.startswith("No nightowl.service: no platform is enabled in the config")
    assert not unit.exists() and (unit.parent / "nightowl-backup.timer").exists()


def test_a_timer_written_before_daily_runs_is_said_by_doctor_and_fixed_in_place(
    config: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A unit from before ``--daily`` records no schedule, so its timer stopping would
    never be told: doctor says so beside the last backup's line, and ``--fix`` adds the
    flag to its ExecStart, leaving the rest (a user's own edits) as it was."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    serving_telegram(config)
    code, _, err = nightowl(capsys, "install-service", "-c", str(config), "--backup-daily")
    assert code == 0, err
    service = tmp_path / "xdg" / "systemd" / "user" / "nightowl-backup.service"
    assert check_backup_timer(load_config(config)) is None  # as written now
    old = service.read_text().replace(" --keep 7 --daily", " --keep=14")
    old += "Environment=HTTPS_PROXY=http://proxy:3128\n"  # the user's own line
    service.write_text(old)  # as an older nightowl wrote it, and its user edited it
    stale = check_backup_timer(load_config(config))
    assert stale is not None and not stale.ok
    assert stale.detail.startswith(f"{service} runs `nightowl backup` without --daily")
    assert stale.hint == (
        "run: nightowl doctor --fix (adds --daily to its ExecStart), then systemctl --user"
        " daemon-reload"
    )
    assert check_backup(load_config(config)).ok  # the last backup's own line stays
    fixed = check_backup_timer(load_config(config), fix=True)
    assert fixed is not None and fixed.ok
    assert fixed.detail.endswith("ExecStart: now systemctl --user daemon-reload")
    assert service.read_text() == old.replace(" --keep=14", " --keep=14 --daily")
    assert check_backup_timer(load_config(config)) is None

    # A unit linked into place (`systemctl link`): its own file gets the flag.
    linked = tmp_path / "units" / "nightowl-backup.service"
    linked.parent.mkdir()
    linked.write_text(old)
    service.unlink()
    service.symlink_to(linked)
    fixed = check_backup_timer(load_config(config), fix=True)
    assert fixed is not None and fixed.ok and service.is_symlink()
    assert "--keep=14 --daily" in linked.read_text()
    # An ExecStart over several lines is the user's to edit; once done, it is seen.
    start = next(line for line in old.splitlines() if line.startswith("ExecStart="))
    continued = start.replace(" backup ", " \\\n    backup ")
    service.unlink()
    service.write_text(old.replace(start, continued))
    refused = check_backup_timer(load_config(config), fix=True)
    assert refused is not None and not refused.ok
    assert "goes on over several lines: add --daily by hand" in refused.detail
    service.write_text(old.replace(start, continued + " --daily"))
    assert check_backup_timer(load_config(config)) is None


def test_a_restored_config_with_the_dsn_written_in_it_gets_it_through_the_env(
    tmp_path: Path,
) -> None:
    """A DSN may hold a password: the restored one goes to ``.env``, never config.yaml, and
    a ``.env`` restored with the secrets no longer names the old database."""
    (tmp_path / "config.yaml").write_text(
        "data_dir: .\nstore:\n  backend: postgres\n  dsn: postgresql://old@db/prod\n"
    )
    (tmp_path / ".env").write_text(
        "OPENAI_API_KEY=sk-kept\nNIGHTOWL_DSN=postgresql://old@db/prod\n"
    )
    said = point_dsn_at(tmp_path, "postgresql://u:secret@127.0.0.1/restored")
    assert said.startswith("✓ store.dsn  $NIGHTOWL_DSN, written to .env")
    config = (tmp_path / "config.yaml").read_text()
    assert "secret" not in config and "old@db" not in config
    assert yaml.safe_load(config)["store"] == {"backend": "postgres", "dsn": "${NIGHTOWL_DSN}"}
    assert (tmp_path / ".env").read_text().splitlines() == [
        "OPENAI_API_KEY=sk-kept",
        "NIGHTOWL_DSN=postgresql://u:secret@127.0.0.1/restored",
    ]
