"""``nightowl restore FILE``: a backup back into an empty data dir
(docs/operations.md#backups).

Nothing is written before the whole archive was read and every file matched the sha256
its manifest holds. Then the parts go in place private (the data dir 0700, each file
0600), holding the data dir's lock so no gateway starts meanwhile; the database's rows
are counted again and compared with the manifest's; ``config.yaml`` lands in the data
dir with its ``data_dir`` pointing there. A PostgreSQL backup's dump goes into an empty
database with ``--dsn`` (pg_restore), else it is left in the data dir with the command
to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import zlib
from pathlib import Path
from typing import IO, Any, TextIO, cast

from gateway.config.routes import KEY_VARIABLES, resolve_api_key
from gateway.config.schema import parse_config
from gateway.config.typed_yaml import VARIABLE, ConfigError, read_dotenv, read_yaml
from gateway.ops.backup import (
    DATA_DIRS,
    DATA_FILES,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    BackupError,
    describe_tables,
    group_parts,
)
from gateway.ops.init_files import env_with
from gateway.private_files import private_file, write_private
from gateway.store.datadir_lock import DataDirLock
from gateway.store.schema import SCHEMA_VERSION
from gateway.store.snapshot import POSTGRES_PART, SQLITE_PART, count_sqlite_file, restore_dump

#: Where each of the archive's files goes, relative to the data dir.
FIXED = {
    f"database/{SQLITE_PART}": SQLITE_PART,
    f"database/{POSTGRES_PART}": POSTGRES_PART,
    "config/config.yaml": "config.yaml",
    "config/.env": ".env",
    **{f"data/{name}": name for name in DATA_FILES},
}
DATA_DIR_LINE = re.compile(r"^data_dir[ \t]*:.*$", re.MULTILINE)


def destination(name: str) -> str | None:
    """Where the archive's file ``name`` goes in the data dir; None for a name a backup
    never holds (an absolute path, ``..``, anything unknown)."""
    if name in FIXED:
        return FIXED[name]
    parts = name.split("/")
    if len(parts) >= 3 and parts[0] == "data" and parts[1] in DATA_DIRS:
        if all(part not in ("", ".", "..") for part in parts[2:]):
            return "/".join(parts[1:])
    return None


def verify(file: Path) -> dict[str, Any]:
    """The manifest, once every file in ``file`` matched its sha256 (and nothing is
    missing or extra); a :class:`BackupError` saying what is wrong otherwise."""
    manifest: dict[str, Any] | None = None
    seen: dict[str, str] = {}
    try:
        with tarfile.open(file, "r:gz") as archive:
            for member in archive:
                stream = archive.extractfile(member) if member.isfile() else None
                if stream is None:  # a directory, a link: nightowl backup writes files only
                    kind = "a directory" if member.isdir() else "a link or special file"
                    raise BackupError(
                        f"{file} holds {member.name} ({kind}), which no backup holds: restore"
                        " the archive nightowl backup wrote, not one unpacked and packed again"
                    )
                if member.name == MANIFEST:
                    manifest = json.loads(stream.read())
                elif destination(member.name) is None:
                    raise BackupError(f"{file} holds {member.name}, which no backup holds")
                else:
                    reader = cast(io.BufferedReader, stream)  # what extractfile gives
                    seen[member.name] = hashlib.file_digest(reader, "sha256").hexdigest()
    except (tarfile.TarError, OSError, EOFError, zlib.error, ValueError) as exc:
        raise BackupError(f"{file} is not a readable nightowl backup ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{file} is not a nightowl backup (it has no manifest)")
    expected = manifest.get("files")
    if not isinstance(expected, dict) or int(manifest.get("format_version", 0)) > FORMAT_VERSION:
        raise BackupError(
            f"{file} was written by a newer nightowl ({manifest.get('nightowl')}) in a form"
            " this one does not read: upgrade nightowl first"
        )
    for name, entry in expected.items():
        if name not in seen:
            raise BackupError(
                f"{file} lacks {name}, which its manifest lists: the backup is incomplete;"
                " nothing was restored"
            )
        if seen[name] != entry.get("sha256"):
            raise BackupError(
                f"{file} was altered or is damaged: {name} does not match the sha256 its"
                " manifest holds; nothing was restored"
            )
    extra = sorted(set(seen) - set(expected))
    if extra:
        raise BackupError(
            f"{file} holds {extra[0]}, which its manifest does not list; nothing was restored"
        )
    version = int(manifest.get("schema_version", 0))
    if version > SCHEMA_VERSION:
        raise BackupError(
            f"{file} was written by a newer nightowl ({manifest.get('nightowl')}, schema"
            f" v{version}; this one knows v{SCHEMA_VERSION}): upgrade nightowl first"
        )
    return manifest


def restore(
    file: Path,
    target: Path,
    *,
    force: bool = False,
    dsn: str | None = None,
    out: TextIO | None = None,
) -> int:
    """Restore ``file`` into the data dir ``target``; say what was restored; 0 (a
    :class:`StoreError` otherwise)."""
    out = out or sys.stdout
    if not file.is_file():
        raise BackupError(f"no backup at {file}")
    if target.exists() and not target.is_dir():
        raise BackupError(f"{target} is not a directory")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise BackupError(
            f"{target} is not empty: restore into an empty data dir, or pass --force to"
            " write over what is there"
        )
    manifest = verify(file)
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.chmod(0o700)
    lock = DataDirLock.acquire(target)  # refuses while a gateway runs here
    try:
        written = _extract(file, target)
        lines = [asyncio.run(_database_line(manifest, written, dsn))]
        dump = written.get(f"database/{POSTGRES_PART}")
        if dsn is not None and dump is not None:
            dump.unlink()  # it is in the database now
            lines.append(point_dsn_at(target, dsn))
    finally:
        lock.release()
    when = manifest.get("created", "?")
    print(
        f"Restored {file} (nightowl {manifest.get('nightowl')}, {when}) into {target}:",
        file=out,
    )
    for line in lines + _file_lines(manifest, target):
        print(line, file=out)
    config = target / "config.yaml"
    if config.exists():
        had_secrets = "config/.env" in written  # a .env --dsn wrote holds only the DSN
        needed = [] if had_secrets else _variables_needed(config)
        secrets = f" (first put {', '.join(needed)} in .env beside it)" if needed else ""
        print(f"Check it with: nightowl doctor -c {config}{secrets}", file=out)
    return 0


def _variables_needed(config: Path) -> list[str]:
    """The variables the restored config needs that neither this shell nor the restored
    ``.env`` gives: the ``${VAR}``s its values name (not its comments), and the model's
    key when it talks to a hosted API with none configured. What doctor and run would
    stop at; only advice, so anything unreadable makes it say nothing."""
    try:
        raw, _ = read_yaml(config.read_text(encoding="utf-8"), config)
        given = {**read_dotenv(config.parent / ".env"), **os.environ}
        named = list(dict.fromkeys(VARIABLE.findall(" ".join(_strings(raw)))))
        needed = [name for name in named if name not in given]
        # Each named one given a stand-in: what is asked of the model's key is the same.
        standing_in = {**given, **{name: "set" for name in needed}}
        model = parse_config(raw or {}, standing_in).model
    except Exception:  # advice only: a restore that worked never fails on it
        return []
    if resolve_api_key(model.provider, model.api_key, model.base_url, standing_in) is None:
        needed.append(KEY_VARIABLES.get(model.provider, "OPENAI_API_KEY"))
    return list(dict.fromkeys(needed))


def _strings(value: Any) -> list[str]:
    """Every string in a parsed YAML document's values."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


def _extract(file: Path, target: Path) -> dict[str, Path]:
    """Every file into place, 0600 (directories 0700); archive name → where it went."""
    for stale in ("state.db-wal", "state.db-shm"):  # would be replayed into the new file
        with contextlib.suppress(FileNotFoundError):
            (target / stale).unlink()
    written: dict[str, Path] = {}
    with tarfile.open(file, "r:gz") as archive:
        for member in archive:
            where = destination(member.name)
            stream = archive.extractfile(member)
            if where is None or stream is None:
                continue
            path = target / where
            _make_dirs(target, path.parent)
            _write(path, stream)
            written[member.name] = path
    config = written.get("config/config.yaml")
    if config is not None:
        _point_at(config, target)
    return written


def _make_dirs(root: Path, directory: Path) -> None:
    for parent in reversed([directory, *directory.parents]):
        if parent == root or not parent.is_relative_to(root):
            continue
        parent.mkdir(mode=0o700, exist_ok=True)
        parent.chmod(0o700)


def _write(path: Path, stream: IO[bytes]) -> None:
    with private_file(path, make_dir=False) as file:
        shutil.copyfileobj(stream, file)


def _point_at(config: Path, target: Path) -> None:
    """The restored config's ``data_dir`` names the data dir it was restored into."""
    text = config.read_text(encoding="utf-8")
    line = f"data_dir: {json.dumps(str(target))}  # set by nightowl restore"
    text, found = DATA_DIR_LINE.subn(lambda _: line, text, count=1)
    if not found:
        text = f"{line}\n{text}"
    write_private(config, text, make_dir=False)


#: The variable a restored config names its database by, when it named none.
DSN_VARIABLE = "NIGHTOWL_DSN"
#: Said when the restored config's ``store.dsn`` cannot be rewritten in place.
_SET_DSN_BY_HAND = "  set store.dsn in the restored config.yaml to the database --dsn names"


def point_dsn_at(target: Path, dsn: str) -> str:
    """The restored config names the database restored into: through the variable its
    ``store.dsn`` names, set in the ``.env`` beside it (a DSN may hold a password: it
    goes where the secrets go, never into config.yaml); a literal DSN there becomes
    ``${NIGHTOWL_DSN}``. Without this, a ``.env`` restored with the secrets would name the
    database the backup was taken from."""
    config = target / "config.yaml"
    try:
        text = config.read_text(encoding="utf-8")
        raw, lines = read_yaml(text, config)
        written = raw["store"]["dsn"]
    except (OSError, ConfigError, KeyError, TypeError):
        return _SET_DSN_BY_HAND
    named = VARIABLE.fullmatch(str(written))
    variable = named.group(1) if named else DSN_VARIABLE
    rows = text.splitlines(keepends=True)
    at = lines.get("store.dsn", 0) - 1
    if not named and not (0 <= at < len(rows) and rows[at].lstrip().startswith("dsn:")):
        return _SET_DSN_BY_HAND
    env = target / ".env"
    existing = env.read_text(encoding="utf-8") if env.is_file() else ""
    write_private(env, env_with(existing, {variable: dsn}, "# Secrets for config.yaml."))
    if not named:
        indent = rows[at][: len(rows[at]) - len(rows[at].lstrip())]
        rows[at] = f"{indent}dsn: ${{{variable}}}  # set by nightowl restore\n"
        write_private(config, "".join(rows))
    return (
        f"✓ store.dsn  ${variable}, written to .env, names the database --dsn names"
        " (a variable set in the environment still wins over .env)"
    )


async def _database_line(
    manifest: dict[str, Any], written: dict[str, Path], dsn: str | None
) -> str:
    expected = {str(k): int(v) for k, v in manifest.get("tables", {}).items()}
    version = manifest.get("schema_version")
    sqlite = written.get(f"database/{SQLITE_PART}")
    dump = written.get(f"database/{POSTGRES_PART}")
    if sqlite is not None:
        _, counted = await count_sqlite_file(sqlite)
        _compare(expected, counted)
        return f"✓ database   {SQLITE_PART}, schema v{version}: {describe_tables(counted)}"
    if dump is None:
        command = manifest.get("pg_dump", "pg_dump")
        return (
            "✗ database   not in this backup (pg_dump was not on PATH when it was made);"
            f" the manifest's tables: {describe_tables(expected)}. Dump it with: {command}"
        )
    if dsn is None:
        return (
            f"✓ database   {dump} (PostgreSQL, schema v{version}: {describe_tables(expected)});"
            f" load it into an empty database with: pg_restore --no-owner --dbname=... {dump},"
            " or run restore again with --dsn DSN --force (until then the restored config"
            " still names the database the backup came from)"
        )
    _, counted = await restore_dump(dump, dsn)
    _compare(expected, counted)
    return (
        f"✓ database   pg_restore into the database --dsn names, schema v{version}:"
        f" {describe_tables(counted)}"
    )


def _compare(expected: dict[str, int], counted: dict[str, int]) -> None:
    wrong = [
        f"{table} (backup {expected[table]}, restored {counted.get(table, 0)})"
        for table in expected
        if counted.get(table, 0) != expected[table]
    ]
    if wrong:
        raise BackupError(f"the rows differ after restoring: {', '.join(wrong)}")


def _file_lines(manifest: dict[str, Any], target: Path) -> list[str]:
    lines = []
    names = [n for n in manifest.get("files", {}) if not n.startswith("database/")]
    for part in group_parts(names):
        if part.name.endswith("/"):
            lines.append(f"✓ {part.name:<10} {len(part.files)} file(s)")
        elif part.name == "config.yaml":
            lines.append(f"✓ config.yaml (its data_dir now says {target})")
        elif part.name == ".env":
            lines.append("✓ .env (the secrets)")
        else:
            lines.append(f"✓ {part.name}")
    lines += [f"  not in this backup: {what}" for what in manifest.get("not_included", [])]
    return lines
