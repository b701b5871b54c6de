"""Tools the agent can call, and the built-in ones (docs/design.md#tools).

A tool is a name, an OpenAI function schema and an async handler that returns plain text.
Handlers get a :class:`ToolContext` — the agent's narrow view of the session — so a tool
never reaches the store or a platform directly. Tool results are bounded in size.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent.memory import Memory
from agent.messages import JSON, ToolSchema
from agent.transcript import Transcript
from nightowl_errors import NightowlError

log = logging.getLogger(__name__)

#: What a tool answers: text, or a list of OpenAI content parts (text and ``image_url``),
#: the shape a user row with photos has (docs/design.md#mcp-results).
ToolOutput = str | list[JSON]
Handler = Callable[[JSON, "ToolContext"], Awaitable[ToolOutput]]


@dataclass(frozen=True)
class ToolContext:
    """What a tool may touch: the session's transcript and where the turn came from."""

    transcript: Transcript
    source: str = "console"  # telegram | discord | console | scheduler
    timezone: str = "UTC"
    #: Long-term memory of this turn's chat (docs/design.md#memory); None: memory is off.
    memory: Memory | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: JSON
    handler: Handler

    #: Built once: every request offers it and a turn measures it (read-only, shared).
    _schema: ToolSchema = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        function = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        object.__setattr__(self, "_schema", {"type": "function", "function": function})

    def schema(self) -> ToolSchema:
        return self._schema


class ToolSource(Protocol):
    """Tools that can change while the gateway runs: an MCP server's, listed when it
    comes up (docs/design.md#mcp-tools). Asked at every request and every call."""

    def tools(self) -> Iterable[Tool]: ...


@dataclass
class ToolBox:
    """The tools offered in one turn; runs a call and always returns text for the model."""

    tools: dict[str, Tool] = field(default_factory=dict)
    max_result_chars: int = 8000
    #: More tools, asked each time; a name already in ``tools`` keeps its own tool.
    sources: tuple[ToolSource, ...] = ()

    @classmethod
    def of(
        cls,
        tools: Iterable[Tool],
        max_result_chars: int = 8000,
        sources: Iterable[ToolSource] = (),
    ) -> ToolBox:
        return cls({tool.name: tool for tool in tools}, max_result_chars, tuple(sources))

    def offered(self) -> dict[str, Tool]:
        """Every tool by name: the box's own, then its sources' (first name wins)."""
        if not self.sources:
            return self.tools
        offered = dict(self.tools)
        for source in self.sources:
            for tool in source.tools():
                offered.setdefault(tool.name, tool)
        return offered

    def schemas(self) -> list[ToolSchema]:
        return [tool.schema() for tool in self.offered().values()]

    async def run(self, name: str, arguments: JSON, context: ToolContext) -> ToolOutput:
        tool = self.offered().get(name)
        if tool is None:
            return f"Error: there is no tool named {name!r}."
        try:
            result = await tool.handler(arguments, context)
        except ToolInputError as exc:
            return f"Error: {exc}"
        except Exception:  # a broken tool must not end the turn; the model is told instead
            log.exception("tool %s failed", name)
            return f"Error: the tool {name} failed unexpectedly."
        if isinstance(result, list):  # text and images: the text is cut, images stay
            return [
                {**part, "text": self.cut(part["text"])}
                if isinstance(part.get("text"), str)
                else part
                for part in result
            ]
        return self.cut(result)

    def cut(self, text: str) -> str:
        """``text`` at most ``max_result_chars`` long, with a marker saying how much went."""
        if len(text) <= self.max_result_chars:
            return text
        cut = self.max_result_chars
        return text[:cut] + f"\n[… truncated {len(text) - cut} characters]"


class ToolInputError(NightowlError):
    """The model called a tool with arguments it cannot use; the message tells it why."""


# -- built-in tools -----------------------------------------------------------------------


async def _current_time(arguments: JSON, context: ToolContext) -> str:
    name = str(arguments.get("timezone") or context.timezone or "UTC")
    try:
        zone: Any = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolInputError(
            f"unknown time zone {name!r}; use an IANA name like Europe/Berlin"
        ) from None
    now = datetime.now(UTC).astimezone(zone)
    return now.strftime(f"%A, %Y-%m-%d %H:%M:%S ({name}, UTC%z)")


async def _session_search(arguments: JSON, context: ToolContext) -> str:
    query = str(arguments.get("query") or "").strip()
    if not query:
        raise ToolInputError("query is required")
    try:
        limit = max(1, min(int(arguments.get("limit") or 5), 20))
    except (TypeError, ValueError):
        limit = 5
    hits = await context.transcript.search(query, limit)
    if not hits:
        return f"No earlier messages match {query!r}."
    lines = []
    for hit in hits:
        when = datetime.fromtimestamp(hit.created_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
        where = " (archived)" if hit.archived else ""
        lines.append(f"- {when} {hit.source or hit.role}{where}: {hit.snippet}")
    return "\n".join(lines)


CURRENT_TIME = Tool(
    name="current_time",
    description="The current date and time, optionally in a given IANA time zone.",
    parameters={
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Berlin"}
        },
    },
    handler=_current_time,
)

SESSION_SEARCH = Tool(
    name="session_search",
    description=(
        "Search this conversation's full history, including parts that were summarized "
        "away and earlier conversations in this chat (before /new), and the notes "
        "remembered here, for messages matching the query. Returns snippets with time and role."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words to look for"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        },
        "required": ["query"],
    },
    handler=_session_search,
)

BUILTIN_TOOLS: tuple[Tool, ...] = (SESSION_SEARCH, CURRENT_TIME)
