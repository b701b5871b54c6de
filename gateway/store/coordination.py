"""Who runs a session's turn when several gateways share one database
(docs/design.md#replicas).

A lane (:mod:`gateway.conversation.lanes`) runs a session's work only while its replica
*holds* the session. With SQLite one process owns the data dir, so it always does
(:class:`OneProcess`). On PostgreSQL a hold is an advisory lock on one connection per
replica (:mod:`gateway.store.postgres.coordination`): it goes with the connection when a
replica dies, and a message stored by any replica wakes every replica, the holder among
them, so a replica that cannot hold a session leaves its messages to the holder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

#: Called with a session key when another replica stored work for it.
OnWork = Callable[[str], None]


class Coordination(Protocol):
    #: True when other processes may run this database's sessions.
    shared: bool

    async def start(self, on_work: OnWork) -> None:
        """Begin: ``on_work(key)`` is called for work stored anywhere from now on."""
        ...

    async def try_hold(self, key: str) -> bool:
        """Hold ``key`` unless another replica does; never waits."""
        ...

    async def release(self, key: str) -> None: ...

    def holds(self, key: str) -> bool:
        """Whether this replica still holds ``key`` (a hold goes with a broken connection)."""
        ...

    async def stop(self) -> None:
        """Let go of every hold."""
        ...


class OneProcess:
    """SQLite's: the data-dir lock already makes this process the only one."""

    shared = False

    async def start(self, on_work: OnWork) -> None:
        return None

    async def try_hold(self, key: str) -> bool:
        return True

    async def release(self, key: str) -> None:
        return None

    def holds(self, key: str) -> bool:
        return True

    async def stop(self) -> None:
        return None
