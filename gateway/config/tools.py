"""``tools:`` in config.yaml: MCP servers the agent's tools come from
(docs/design.md#mcp-tools). Parsed with the rest of the config (gateway/config/schema.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from gateway.config.typed_yaml import SECRET_VALUES, Problem

#: Who is offered a server's tools: private chats, groups, every chat, or these session keys.
ChatScope = Literal["private", "groups", "all"]
#: A server's name starts its tools' names (``files__read``): what providers accept.
_SERVER_NAME = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")


@dataclass(frozen=True)
class McpServerConfig:
    """One MCP server: ``command`` (stdio, started and ended with the gateway) or ``url``
    (streamable HTTP)."""

    enabled: bool = True
    #: The program and its arguments, as a list.
    command: tuple[str, ...] = ()
    #: Added to the few variables a stdio server gets (PATH, HOME...): nothing else of
    #: the gateway's environment, its keys included, reaches it. Each value is a secret.
    env: dict[str, str] = field(default_factory=dict, metadata=SECRET_VALUES)
    url: str | None = None
    #: Sent with every HTTP request (an Authorization header); each value is a secret.
    headers: dict[str, str] = field(default_factory=dict, metadata=SECRET_VALUES)
    #: Tools with side effects in a group are the operator's choice: private by default.
    chats: ChatScope | tuple[str, ...] = "private"
    #: A tool call (and connecting) may take this long.
    timeout_seconds: float = field(default=60.0, metadata={"range": (1, 3600)})


@dataclass(frozen=True)
class ToolsConfig:
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    #: Past this share of the model's window, the tool schemas are not all sent: the model
    #: finds the ones it needs (docs/design.md#lean-tools).
    lean_share: float = field(default=0.20, metadata={"range": (0.01, 0.25)})


def check_tools(tools: ToolsConfig) -> list[Problem]:
    """Checks across a server's keys: one transport, a usable name, real session keys."""
    problems = []
    for name, server in tools.mcp_servers.items():
        path = f"tools.mcp_servers.{name}"
        if not _SERVER_NAME.fullmatch(name) or len(name) > 32:
            problems.append(
                Problem(path, "a server name is letters, digits, - and single _ (32 at most)")
            )
        if bool(server.command) == bool(server.url):
            problems.append(Problem(path, "give either command (stdio) or url (HTTP)"))
        if len(server.command) == 1 and " " in server.command[0].strip():
            problems.append(
                Problem(f"{path}.command", 'write the command as a list: ["program", "arg"]')
            )
        if server.url and not server.url.startswith(("http://", "https://")):
            problems.append(Problem(f"{path}.url", "expected an http:// or https:// URL"))
        if isinstance(server.chats, tuple):
            for key in server.chats:
                if ":" not in key:
                    problems.append(
                        Problem(
                            f"{path}.chats",
                            f'expected private, groups, all or session keys like "telegram:12345", got "{key}"',
                        )
                    )
    return problems
