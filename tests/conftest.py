"""Shared fixtures. The fake LLM server (both APIs) lives in tests/fakes/llm_server.py."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from _pytest.logging import LogCaptureHandler

from gateway.store import SQLiteStore
from gateway.store.postgres import PostgresStore
from tests.child_process import Chat, Spawn
from tests.fakes.llm_server import FakeLLM
from tests.postgres import TestDatabase
from tests.waiting import CEILING

_getaddrinfo = socket.getaddrinfo


#: The names a test may resolve: this machine's, and the PostgreSQL server the run was
#: pointed at (README: NIGHTOWL_TEST_POSTGRES).
_RESOLVABLE = {"localhost", urlsplit(os.environ.get("NIGHTOWL_TEST_POSTGRES", "")).hostname}


def _this_machine_only(host: Any, *args: Any, **kwargs: Any) -> Any:
    """No test reaches the internet: a name other than those does not resolve in this
    process (as on a machine without a network), whatever the machine has. An address
    written as such (``127.0.0.1``, ``10.255.255.1``) is left to connect or not."""
    name = host.decode() if isinstance(host, bytes) else host
    try:  # a name no resolver would take fails as it would anyway, before any lookup
        (name or "").encode("idna")
    except UnicodeError:
        return _getaddrinfo(host, *args, **kwargs)
    if name is not None and name not in _RESOLVABLE and not _is_address(name):
        raise socket.gaierror(
            socket.EAI_NONAME,
            f"tests resolve no name but localhost's (and NIGHTOWL_TEST_POSTGRES's): {name}",
        )
    return _getaddrinfo(host, *args, **kwargs)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


socket.getaddrinfo = _this_machine_only


@pytest.fixture(autouse=True)
def _logging_restored() -> Iterator[None]:
    """Whatever a test does to logging (``nightowl run`` replaces the root handlers and
    sets library levels) is undone after it, so no test depends on the ones before it.
    pytest's per-phase capture handlers are left as they are; its session-wide ones
    (--log-cli-level, --log-file) come back if a test removed them."""
    root = logging.getLogger()
    before = root.handlers[:]
    level, levels = root.level, _logger_levels()
    yield
    for handler in root.handlers:
        if handler not in before and not _is_pytests(handler):
            handler.close()
    phase = [h for h in root.handlers if isinstance(h, LogCaptureHandler)]  # teardown's
    root.handlers[:] = [h for h in before if not isinstance(h, LogCaptureHandler)] + phase
    root.setLevel(level)
    for name, logger in logging.root.manager.loggerDict.items():
        if isinstance(logger, logging.Logger) and logger.level != levels.get(name, 0):
            logger.setLevel(levels.get(name, logging.NOTSET))  # clears every logger's cache


def _is_pytests(handler: logging.Handler) -> bool:
    return type(handler).__module__.startswith("_pytest")


def _logger_levels() -> dict[str, int]:
    loggers = logging.root.manager.loggerDict.items()
    return {name: lg.level for name, lg in loggers if isinstance(lg, logging.Logger)}


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    """A started :class:`FakeLLM` on 127.0.0.1 (random port), stopped after the test."""
    async with FakeLLM() as llm:
        yield llm


@pytest.fixture
async def spawn() -> AsyncIterator[Spawn]:
    """``await spawn(*args, cwd=...)``: a running ``nightowl <args>`` child
    (see :meth:`Chat.start`); whatever still runs at teardown is killed."""
    started: list[Chat] = []

    async def start(*args: str, **options: Any) -> Chat:
        chat = await Chat.start(*args, **options)
        started.append(chat)
        return chat

    yield start
    for chat in started:
        chat.kill()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(chat.process.wait(), CEILING)


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[TestDatabase]:
    """This run's PostgreSQL database (dropped at the end); see tests/postgres.py."""
    database = TestDatabase()
    asyncio.run(database.create())
    yield database
    asyncio.run(database.drop())


@pytest.fixture
async def postgres_dsn(postgres_database: TestDatabase) -> str:
    """A DSN to an empty schema of its own (skips, or fails under CI, without a server)."""
    return await postgres_database.fresh_schema()


@pytest.fixture(params=["sqlite", "postgres"])
async def backend_store(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_database: TestDatabase
) -> AsyncIterator[Any]:
    """An open store on each backend: the store's tests run against both, so the two
    cannot drift (docs/design.md#postgresql)."""
    if request.param == "sqlite":
        store: Any = SQLiteStore(tmp_path / "state.db")
    else:
        store = PostgresStore(await postgres_database.fresh_schema())
    async with store:
        yield store
