"""Which chats are offered which MCP servers' tools, and ``/tools`` (docs/design.md#mcp-tools).

``chats: private`` (the default) offers a server's tools in private chats only — a tool
with side effects in a group is the operator's choice; ``groups`` in groups only,
``all`` everywhere, or a list of session keys (docs/design.md#session-keys). Whether a
chat is private is read from its session key by its platform's traits, failing closed:
a key they cannot place is a group's (:meth:`Platforms.is_private_chat`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from gateway.config.schema import Config
from gateway.platforms import Platforms


class ServerStatus(Protocol):
    """What /tools says about a server (``agent.mcp.McpConnection`` is one)."""

    @property
    def state(self) -> str: ...

    @property
    def last_error(self) -> str: ...


def offered_servers(config: Config, session_key: str, platforms: Platforms) -> list[str]:
    """The enabled MCP servers whose tools this chat is offered, in the config's order."""
    private = platforms.is_private_chat(session_key)
    offered = []
    for name, server in config.tools.mcp_servers.items():
        chats = server.chats
        if not server.enabled:
            continue
        if isinstance(chats, tuple):
            allowed = session_key in chats
        else:
            allowed = chats == "all" or (chats == "private") == private
        if allowed:
            offered.append(name)
    return offered


#: ``/tools`` when the window is too small for every schema (docs/design.md#lean-tools).
LEAN_NOTE = (
    "This model's window is small: it is offered find_tools and call_tool, and the few of"
    " these that fit, and reaches the others through them."
)


def describe_tools(
    schemas: Sequence[Mapping[str, Any]],
    servers: Mapping[str, ServerStatus],
    *,
    lean: bool = False,
) -> str:
    """``/tools``: the built-in tools, then each offered server with its state and tools;
    ``lean``: the model reaches them through find_tools (a small window)."""
    own: list[str] = []
    by_server: dict[str, list[str]] = {name: [] for name in servers}
    for schema in schemas:
        function = schema.get("function", schema)
        name = str(function.get("name", ""))
        server, separator, _ = name.partition("__")
        if separator and server in by_server:
            by_server[server].append(name)
        else:
            own.append(f"• {name} — {_first_sentence(str(function.get('description', '')))}")
    lines = ["Tools in this chat:", *own]
    for server, names in by_server.items():
        status = servers[server]
        state = status.state
        if state != "up" and status.last_error:
            state += f": {status.last_error}"
        lines.append(f"• {server} ({state}): {_names(names)}")
    if lean:
        lines.append(LEAN_NOTE)
    return "\n".join(lines)


def _names(names: Iterable[str]) -> str:
    listed = list(names)
    return ", ".join(listed) if listed else "no tools listed yet"


#: A sentence ends at a full stop before a capital or a digit, not at "e.g." nor "i.e.".
_SENTENCE_END = re.compile(r"(?<!\b[eE]\.g)(?<!\b[iI]\.e)\.\s+(?=[A-Z0-9])")


def _first_sentence(text: str, limit: int = 90) -> str:
    sentence = _SENTENCE_END.split(text.strip(), maxsplit=1)[0].rstrip(".")
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"
