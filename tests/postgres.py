"""PostgreSQL for the tests: one database per test run, one schema per test.

The server comes from ``NIGHTOWL_TEST_POSTGRES`` (default ``postgresql://127.0.0.1:5432/
postgres``, this project's machines: trust auth). A machine without it skips the
PostgreSQL tests with one line; under ``CI=true`` a missing server fails them instead,
because CI must run them.
"""

from __future__ import annotations

import os
import secrets
import urllib.parse

import asyncpg
import pytest

ADMIN_DSN = os.environ.get("NIGHTOWL_TEST_POSTGRES", "postgresql://127.0.0.1:5432/postgres")


def with_database(dsn: str, database: str, **params: str) -> str:
    parts = urllib.parse.urlsplit(dsn)
    query = urllib.parse.urlencode(params)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{database}", query=query))


class TestDatabase:
    """A database of its own for this test run; each test gets a fresh schema in it."""

    def __init__(self) -> None:
        self.name = f"nightowl_test_{secrets.token_hex(4)}"
        self.error: str | None = None

    async def create(self) -> None:
        try:
            admin = await asyncpg.connect(ADMIN_DSN, timeout=5)
        except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            return
        try:
            await admin.execute(f'CREATE DATABASE "{self.name}"')
        finally:
            await admin.close()

    async def drop(self) -> None:
        if self.error is not None:
            return
        admin = await asyncpg.connect(ADMIN_DSN, timeout=5)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            await admin.close()

    def require(self) -> None:
        if self.error is None:
            return
        message = f"PostgreSQL not reachable at {ADMIN_DSN} ({self.error})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}: CI must run the PostgreSQL tests")
        pytest.skip(f"{message}: PostgreSQL tests skipped")

    async def fresh_schema(self) -> str:
        """A new empty schema; the DSN to reach the database with it as the search path."""
        self.require()
        schema = f"t_{secrets.token_hex(6)}"
        connection = await asyncpg.connect(with_database(ADMIN_DSN, self.name))
        try:
            await connection.execute(f'CREATE SCHEMA "{schema}"')
        finally:
            await connection.close()
        return with_database(ADMIN_DSN, self.name, search_path=schema)
