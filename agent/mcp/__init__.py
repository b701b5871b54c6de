"""Tools from Model Context Protocol servers (docs/design.md#mcp-tools), with the official
``mcp`` SDK: stdio servers (children that never outlive the gateway) and streamable HTTP.

The gateway builds one :class:`McpServers` from the config, starts it with itself and
stops it last; each session's tool box gets a :class:`McpToolSource` over the servers its
chat is offered. Tools are named ``<server>__<tool>``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from agent.mcp.connection import McpConnection, McpServerSpec, State
from agent.tools import Tool

__all__ = ["McpConnection", "McpServerSpec", "McpServers", "McpToolSource", "State"]


class McpServers:
    """Every configured server's connection, started and stopped together."""

    def __init__(self, specs: Sequence[McpServerSpec]) -> None:
        self.connections: dict[str, McpConnection] = {
            spec.name: McpConnection(spec) for spec in specs
        }

    async def start(self, ready_within: float) -> None:
        """Start every server and wait (up to ``ready_within`` seconds) for each first
        attempt, so the first turns already have the tools of the servers that came up.
        A server still starting, or down, is retried in the background."""
        for connection in self.connections.values():
            connection.start()
        await asyncio.gather(*(c.wait_attempted(ready_within) for c in self.connections.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.connections.values()))

    def source(self, names: Iterable[str], *, vision: bool) -> McpToolSource:
        """The tools of the servers ``names`` (in the config's order), for one session."""
        chosen = set(names)
        return McpToolSource(
            [c for name, c in self.connections.items() if name in chosen], vision=vision
        )


class McpToolSource:
    """A session's view of some servers' tools; what each server lists now."""

    def __init__(self, connections: Sequence[McpConnection], *, vision: bool) -> None:
        self.connections = tuple(connections)
        self.vision = vision

    def tools(self) -> Iterable[Tool]:
        for connection in self.connections:
            yield from connection.tools(vision=self.vision)
