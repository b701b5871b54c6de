"""Files are private by their own modes, not only by the command line's umask: the store,
the context-length cache and chat.log made inside a process whose umask is 022 (a gateway
embedded in someone's program, a test) are 0600 in a 0700 data dir
(docs/design.md#private-files)."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.model_metadata import ContextLengthResolver
from gateway.config.schema import parse_config
from gateway.logs import setup_logging
from gateway.store import SQLiteStore


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    before = os.umask(0o022)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_store_and_its_wal_files_are_private_while_open(tmp_path: Path) -> None:
    data = tmp_path / "data"
    database = data / "state.db"
    async with SQLiteStore(database):
        assert mode(data) == 0o700
        for name in ("state.db", "state.db-wal", "state.db-shm"):
            assert mode(data / name) == 0o600, name


async def test_wal_files_an_older_version_left_readable_are_made_private(tmp_path: Path) -> None:
    database = tmp_path / "state.db"
    async with SQLiteStore(database):
        pass
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (tmp_path / name).touch()
        (tmp_path / name).chmod(0o644)
    async with SQLiteStore(database):
        for name in ("state.db", "state.db-wal", "state.db-shm"):
            assert mode(tmp_path / name) == 0o600, name


def test_the_context_length_cache_is_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    ContextLengthResolver(data).confirm("m", "openai", None, 3_000)
    assert mode(data) == 0o700
    assert mode(data / "context_length_cache.yaml") == 0o600


def test_chat_log_and_its_rotation_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    setup_logging(parse_config({"data_dir": str(data)}, {}), chat=True)  # undone by conftest
    assert not data.exists()  # made at the first line, not before
    logging.getLogger("nightowl.test").warning("the first line")
    assert mode(data) == 0o700 and mode(data / "chat.log") == 0o600
    root = logging.getLogger()
    chat_log = next(h for h in root.handlers if isinstance(h, logging.FileHandler))
    chat_log.doRollover()  # type: ignore[attr-defined]
    logging.getLogger("nightowl.test").warning("after the rotation")
    assert mode(data / "chat.log.1") == 0o600
    assert mode(data / "chat.log") == 0o600
