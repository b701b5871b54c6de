"""One MCP server: connected in its own task, restarted with back-off when it dies
(docs/design.md#mcp-tools).

The SDK's client must be entered and left in one task (its cancel scopes), so each
server has a task that connects, lists the tools, then waits — pinging now and then —
until the server dies or the gateway stops; then it waits out a back-off and connects
again. Tool calls come from the turns' tasks and share the client. A call never raises:
a server that is down, dies mid-call, hangs past ``timeout_seconds`` or fails answers
the model with a sentence saying so, and the turn goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.caching import CacheMode
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from agent.mcp.results import result_content, tool_name
from agent.messages import JSON
from agent.tools import Tool, ToolContext, ToolOutput

log = logging.getLogger(__name__)

#: Seconds between attempts after a server died: doubling, then holding at the last.
BACKOFF_SECONDS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0)
#: A server that stayed up this long starts the back-off from the beginning again.
STABLE_SECONDS = 60.0
#: How often an idle connection is checked (its tools listed again), so a dead server is
#: restarted before a call needs it.
PING_SECONDS = 30.0
#: How long a stopping server may take (the SDK closes stdin, then signals the group).
STOP_SECONDS = 10.0
#: The program every stdio server is started through (docs/design.md#mcp-children).
LEASH = str(Path(__file__).with_name("leash.py"))

State = Literal["starting", "up", "down", "stopped"]


@dataclass(frozen=True)
class McpServerSpec:
    """One server from the config: a command (stdio) or a URL (streamable HTTP)."""

    name: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: A tool call (and connecting) may take this long.
    timeout_seconds: float = 60.0

    @property
    def transport(self) -> str:
        return "stdio" if self.command else "http"

    @property
    def where(self) -> str:
        """What to show an operator: the command or the URL (never the headers)."""
        return " ".join(self.command) if self.command else str(self.url)


class McpConnection:
    """A server's tools and the way to call them, whatever state the server is in."""

    def __init__(self, spec: McpServerSpec, *, backoff: tuple[float, ...] = BACKOFF_SECONDS):
        self.spec = spec
        self.backoff = backoff
        self.state: State = "starting"
        #: Why the server is down, in one line (no secrets: never the headers).
        self.last_error = ""
        self.restarts = 0
        #: The server's tools as last listed; kept while it is down so the tools offered
        #: (and the cached prompt prefix) do not change — their calls answer an error.
        self.listed: tuple[types.Tool, ...] = ()
        self._tools: dict[bool, tuple[Tool, ...]] = {}
        self._client: Client | None = None
        self._attempted = asyncio.Event()
        self._is_up = asyncio.Event()
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"mcp:{self.spec.name}")

    async def wait_attempted(self, within: float) -> bool:
        """Wait until the first connection attempt succeeded or failed (False: still trying)."""
        try:
            async with asyncio.timeout(within):
                await self._attempted.wait()
        except TimeoutError:
            return False
        return True

    async def wait_up(self, within: float) -> None:
        """Wait until the server is up (raises TimeoutError after ``within`` seconds)."""
        async with asyncio.timeout(within):
            await self._is_up.wait()

    async def stop(self) -> None:
        """Stop the server (a stdio child is ended, its process group with it)."""
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=STOP_SECONDS)
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.state = "stopped"

    async def _run(self) -> None:
        attempt = 0
        while not self._stopping:
            began = time.monotonic()
            try:
                async with self._connect() as client:
                    async with asyncio.timeout(self.spec.timeout_seconds):
                        listed = await _list_all(client)
                    self._up(client, listed)
                    await self._until_dead(client)
            except Exception as exc:  # any failure of a server only takes its tools down
                self.last_error = _describe(exc)
            finally:
                self._client = None
                self._is_up.clear()
                self._attempted.set()
            if self._stopping:
                break
            self.state = "down"
            if time.monotonic() - began >= STABLE_SECONDS:
                attempt = 0
            delay = self.backoff[min(attempt, len(self.backoff) - 1)]
            attempt += 1
            log.warning(
                "MCP server %s is down (%s); restarting in %gs",
                self.spec.name,
                self.last_error or "it stopped",
                delay,
            )
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()  # only stop() wakes it early
            self.restarts += 1

    def _up(self, client: Client, listed: tuple[types.Tool, ...]) -> None:
        coming_up = self.state != "up"
        if [t.model_dump() for t in listed] != [t.model_dump() for t in self.listed]:
            self.listed = listed
            self._tools = {}
        self._client = client
        self.state = "up"
        self.last_error = ""
        self._attempted.set()
        self._is_up.set()
        if coming_up:
            log.info("MCP server %s is up with %d tool(s)", self.spec.name, len(listed))

    async def _until_dead(self, client: Client) -> None:
        self._wake.clear()
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PING_SECONDS):
                    await self._wake.wait()
            if self._wake.is_set():
                return  # stopping, or a call saw the connection close
            # ping is gone from the 2026 protocol; a fresh listing works with every server
            # (and a server that changed its tools is seen).
            async with asyncio.timeout(self.spec.timeout_seconds):
                self._up(client, await _list_all(client, cache_mode="refresh"))

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[Client]:
        spec = self.spec
        if spec.command:
            # The leash ties the server's life to ours, even if we are killed
            # (docs/design.md#mcp-children).
            # Run by path in isolated mode: it needs only the standard library, and
            # nothing of ours reaches the server's environment.
            params = StdioServerParameters(
                command=sys.executable,
                args=["-I", LEASH, str(os.getpid()), "--", *spec.command],
                env=dict(spec.env),  # over the SDK's few safe variables (PATH, HOME...)
            )
            async with Client(params, read_timeout_seconds=None) as client:
                yield client
            return
        async with httpx2.AsyncClient(
            headers=dict(spec.headers), timeout=httpx2.Timeout(30.0, read=300.0)
        ) as http:
            transport = streamable_http_client(str(spec.url), http_client=http)
            async with Client(transport) as client:
                yield client

    # -- tools -----------------------------------------------------------------------------

    def tools(self, *, vision: bool) -> tuple[Tool, ...]:
        """The server's tools as the model sees them: ``<server>__<tool>``."""
        if vision not in self._tools:
            self._tools[vision] = tuple(self._as_tool(listed, vision) for listed in self.listed)
        return self._tools[vision]

    def _as_tool(self, listed: types.Tool, vision: bool) -> Tool:
        async def handler(arguments: JSON, context: ToolContext) -> ToolOutput:
            return await self.call(listed.name, arguments, vision=vision)

        parameters = dict(listed.input_schema or {})
        parameters.setdefault("type", "object")
        return Tool(
            name=tool_name(self.spec.name, listed.name),
            description=listed.description or listed.title or listed.name,
            parameters=parameters,
            handler=handler,
        )

    async def call(self, tool: str, arguments: JSON, *, vision: bool) -> ToolOutput:
        """Run ``tool``; a text for the model whatever happens."""
        name = self.spec.name
        client = self._client
        if client is None:
            why = f" ({self.last_error})" if self.last_error else ""
            return (
                f"Error: the tool server {name!r} is not running right now{why}; it is being "
                "restarted. Carry on without it, or try again later."
            )
        try:
            async with asyncio.timeout(self.spec.timeout_seconds):
                result = await client.call_tool(tool, arguments)
        except TimeoutError:
            return (
                f"Error: the tool {tool_name(name, tool)} did not answer within "
                f"{self.spec.timeout_seconds:g} seconds; it was abandoned."
            )
        except MCPError as exc:
            if exc.code != types.CONNECTION_CLOSED:
                return f"Error: {exc.message}"
            return self._died_during(tool, "the connection closed")
        except Exception as exc:  # a transport failing (HTTP): the server is gone for now
            return self._died_during(tool, _describe(exc))
        return result_content(result, vision=vision)

    def _died_during(self, tool: str, why: str) -> str:
        self.last_error = why
        self._client = None
        self._is_up.clear()
        self.state = "down"
        self._wake.set()  # the connection task restarts it
        log.warning("MCP server %s failed during %s: %s", self.spec.name, tool, why)
        return (
            f"Error: the tool server {self.spec.name!r} stopped while running {tool} "
            f"({why}); it is being restarted. Carry on without it, or try again later."
        )


async def _list_all(client: Client, cache_mode: CacheMode = "use") -> tuple[types.Tool, ...]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose pages never end cannot hang the start
        page = await client.list_tools(cursor=cursor, cache_mode=cache_mode)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(tools)


def _describe(exc: BaseException) -> str:
    """One line about a failure; a group of them (anyio's task groups) by its first."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
