"""What ``nightowl sessions``, ``memory`` and ``pairing`` do around their actions: say so
when there is no database yet, open the store the config names for the action, close it
after, and turn a :class:`StoreError` into its sentence and exit code 1."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TextIO

from gateway.config.schema import Config
from gateway.store.backend import Access, Store
from gateway.store.errors import StoreError
from gateway.store.opening import missing_database, open_store


def no_database(
    config: Config, out: TextIO, err: TextIO, *, nothing: str | None = None, hint: str = ""
) -> int | None:
    """The exit code when the database is not there yet (SQLite before the first start),
    else None: 0 with ``nothing`` (e.g. ``"No sessions yet"``) when a listing was asked
    for, which finds nothing; otherwise 1, with ``hint`` after the sentence."""
    path = missing_database(config)
    if path is None:
        return None
    if nothing is not None:
        print(f"{nothing} ({path} does not exist).", file=out)
        return 0
    print(f"nightowl: no database at {path}{hint}", file=err)
    return 1


async def with_store(
    config: Config,
    access: Access,
    err: TextIO,
    action: Callable[[Store], Awaitable[int]],
    *,
    nothing: str | None = None,
    out: TextIO | None = None,
) -> int:
    """``action``'s exit code on the store opened for ``access``; 1 when the store fails.
    A PostgreSQL database no gateway has used yet is, for a listing (``nothing``), like
    SQLite's file not there yet: nothing to list."""
    store = open_store(config)
    try:
        await store.open(access)
        return await action(store)
    except StoreError as exc:
        if exc.reason == "empty" and nothing is not None and out is not None:
            print(f"{nothing} ({exc}).", file=out)
            return 0
        print(f"nightowl: {exc}", file=err)
        return 1
    finally:
        await store.close()
