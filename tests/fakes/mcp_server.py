"""A small MCP server written with the official SDK, for the tests and the benchmark.

Run as a stdio server: ``python tests/fakes/mcp_server.py [--tools N]``; serve over
streamable HTTP in the test's own event loop with :func:`serving_http`. Tools:

- ``echo(text)`` → ``echo: <text>``
- ``big(kilobytes=400)`` → that much text between ``BIG-START`` and ``BIG-END``
- ``crash()`` → the process exits mid-call
- ``hang()`` → never answers
- ``picture()`` → a text and a 1×1 PNG
- ``note()`` → an embedded text resource
- ``pid()`` → the server's process id
- with ``--tools N``: ``tool_1`` … ``tool_N``, each with a few typed parameters

With ``MCP_PID_FILE`` set, a stdio server writes its pid there once it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import EmbeddedResource, ImageContent, TextContent, TextResourceContents

#: A 1×1 transparent PNG.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


def build_server(extra_tools: int = 0) -> MCPServer:
    server = MCPServer("nightowl-test")

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return f"echo: {text}"

    @server.tool()
    def big(kilobytes: int = 400) -> str:
        """Return a very long text."""
        body = "x" * (kilobytes * 1000 - 18)  # exactly that many characters in all
        return f"BIG-START {body} BIG-END"

    @server.tool()
    def crash() -> str:
        """Exit the server in the middle of the call."""
        os._exit(3)

    @server.tool()
    async def hang() -> str:
        """Never answer."""
        await asyncio.Event().wait()
        return "never"

    @server.tool()
    def picture() -> list[Any]:
        """A small picture."""
        return [
            TextContent(type="text", text="a red dot"),
            ImageContent(type="image", data=PNG, mime_type="image/png"),
        ]

    @server.tool()
    def note() -> list[Any]:
        """A note, as an embedded resource."""
        resource = TextResourceContents(
            uri="notes://today", mime_type="text/plain", text="buy milk"
        )
        return [EmbeddedResource(type="resource", resource=resource)]

    @server.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    for number in range(1, extra_tools + 1):
        _add_numbered_tool(server, number)
    return server


def _add_numbered_tool(server: MCPServer, number: int) -> None:
    def tool(query: str, limit: int = 10, exact: bool = False) -> str:
        return f"tool_{number}: {query} ({limit}, {exact})"

    server.add_tool(
        tool,
        name=f"tool_{number}",
        description=(
            f"Look up records in collection {number} matching a query; returns at most "
            "`limit` results, optionally only exact matches."
        ),
    )


@dataclass
class HttpServer:
    url: str
    #: The Authorization header of every request, in order ("" when there was none).
    authorizations: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def serving_http(extra_tools: int = 0) -> AsyncIterator[HttpServer]:
    """The server over streamable HTTP on 127.0.0.1 (a free port)."""
    import uvicorn

    inner = build_server(extra_tools).streamable_http_app()
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(dict(scope["headers"]).get(b"authorization", b"").decode())
        await inner(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # listening now: connections wait in the backlog until uvicorn serves
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", seen)
    finally:
        server.should_exit = True
        await task
        sock.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=0)
    args = parser.parse_args()
    if os.environ.get("MCP_PID_FILE"):
        with open(os.environ["MCP_PID_FILE"], "w", encoding="ascii") as file:
            file.write(str(os.getpid()))
    build_server(args.tools).run()


if __name__ == "__main__":
    sys.exit(main())
