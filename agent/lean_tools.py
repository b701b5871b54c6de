"""Tools on a small window: find them, rather than carry every schema
(docs/design.md#lean-tools).

Sixty MCP tools are some 12,000 tokens of JSON schemas, sent with every request; on an
8K window that is more than the window. When the schemas would take more than a share of
the window (``tools.lean_share``, 20%), a request offers instead two small tools —
``find_tools(query)``, which answers with the schemas of the tools that match, and
``call_tool(name, arguments)`` — beside as many of the others as fit within that share,
the ones the model found this turn first: never past a quarter of the window. A tool found is offered by its own
schema from the next step on, and any tool is run when called by its name, offered or not.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.context_engine import ContextEngine
from agent.memory import TOOL_NAMES as MEMORY_TOOL_NAMES
from agent.messages import JSON, ToolSchema
from agent.tokens import estimate_json_tokens_rough, estimate_schemas_tokens_rough
from agent.tools import ToolBox, ToolContext, ToolOutput
from agent.window import Window

log = logging.getLogger(__name__)

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"
#: Schemas never take more than this share of the window, whatever is offered.
MAX_SHARE = 0.25
#: Tools a search answers with at most.
FOUND_AT_MOST = 5

_FIND_SCHEMA: ToolSchema = {
    "type": "function",
    "function": {
        "name": FIND_TOOLS,
        "description": (
            "More tools exist than are listed. Describe what you need in a few words; the "
            "answer lists the matching tools with their parameters, callable next."
        ),
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}
_CALL_SCHEMA: ToolSchema = {
    "type": "function",
    "function": {
        "name": CALL_TOOL,
        "description": "Call a tool find_tools showed you, by name, with its arguments.",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name"],
        },
    },
}
_WORD = re.compile(r"[a-z0-9]+")
#: Words that match every tool's description, and so find nothing.
_COMMON = frozenset(
    "a an and are as at be by can do for from get i in is it me my of on or set "
    "that the this to tool tools use what when with you your".split()
)
#: Offered first on a small window, after what the model found: the memory block the
#: request carries tells the model to remember.
_FIRST = ("remember", "forget")


def schema_name(schema: ToolSchema) -> str:
    return str(schema.get("function", {}).get("name", ""))


@dataclass
class ToolOffer:
    """What one turn offers of ``schemas`` (every tool it may call)."""

    schemas: list[ToolSchema]
    #: Share of the window past which the schemas are not all sent.
    lean_share: float = 0.20
    #: Tools ``find_tools`` answered with this turn: offered first.
    found: list[str] = field(default_factory=list)
    _chosen: dict[tuple[int, float, int, int], list[ToolSchema]] = field(
        default_factory=dict, repr=False
    )

    @classmethod
    def of(cls, schemas: list[ToolSchema], lean_share: float, *, memory: bool) -> ToolOffer:
        """A turn's offer of ``schemas``: without a memory block (``memory``), memory's
        own tools are left out (docs/design.md#memory-tools)."""
        if not memory:
            schemas = [s for s in schemas if schema_name(s) not in MEMORY_TOOL_NAMES]
        return cls(schemas, lean_share)

    def offered(self, window: Window) -> list[ToolSchema]:
        """The schemas a request on ``window`` carries (worked out once per window)."""
        key = (window.context_length, window.scale, len(self.found), len(self.schemas))
        if key not in self._chosen:
            self._chosen[key] = self._choose(window)
        return self._chosen[key]

    def _choose(self, window: Window) -> list[ToolSchema]:
        everything = window.real(estimate_schemas_tokens_rough(self.schemas))
        if everything <= self.lean_share * window.context_length:
            return self.schemas
        # Filled to the same share, so that JSON counting heavier than the estimate (a
        # first request knows no better) still keeps within a quarter of the window.
        room = int(min(self.lean_share, MAX_SHARE) * window.context_length)
        chosen = [_FIND_SCHEMA, _CALL_SCHEMA]
        used = window.real(estimate_schemas_tokens_rough(chosen))
        by_name = {schema_name(s): s for s in self.schemas}
        names = dict.fromkeys((*self.found, *_FIRST))
        first = [by_name[name] for name in names if name in by_name]
        picked: list[ToolSchema] = []
        for schema in first + [s for s in self.schemas if s not in first]:
            cost = window.real(estimate_json_tokens_rough([schema]))  # once per window
            if used + cost <= room:
                picked.append(schema)
                used += cost
        # In their own order, whatever was picked first: the prefix a server caches holds.
        return chosen + [s for s in self.schemas if any(s is p for p in picked)]

    async def answer(
        self,
        name: str,
        arguments: JSON,
        engine: ContextEngine,
        toolbox: ToolBox,
        context: ToolContext,
    ) -> ToolOutput:
        """Run a call of the model's: ``find_tools``, ``call_tool``, or any tool of the
        turn by its own name, offered in the last request or not."""
        if name == FIND_TOOLS:
            # An answer about as big as a message may be on this window.
            return self.find(str(arguments.get("query") or ""), engine.context_length // 2)
        if name == CALL_TOOL:
            name, arguments = _call_arguments(arguments)
            if name == FIND_TOOLS:
                return self.find(str(arguments.get("query") or ""), engine.context_length // 2)
        if name in {schema_name(schema) for schema in engine.tools()}:
            try:
                return await engine.call_tool(name, arguments)
            except Exception:  # a plugin's tool failing must not end the turn
                log.exception("context engine tool %s failed", name)
                return f"Error: the tool {name} failed unexpectedly."
        return await toolbox.run(name, arguments, context)

    def find(self, query: str, max_chars: int = 8_000) -> str:
        """The answer to ``find_tools``: the best matches, each with its parameters, in
        at most ``max_chars`` (the best one always, whole)."""
        wanted = set(_WORD.findall(query.lower())) - _COMMON
        scored = []
        for index, schema in enumerate(self.schemas):
            function = schema.get("function", {})
            words = set(
                _WORD.findall(
                    f"{function.get('name', '')} {function.get('description', '')}".lower()
                )
            )
            score = len(wanted & words)
            if score:
                scored.append((-score, index, function))
        if not scored:
            return f"No tool matches {query!r}. Try other words."
        lines: list[str] = []
        for _, _, function in sorted(scored)[:FOUND_AT_MOST]:
            name = str(function.get("name", ""))
            parameters = json.dumps(function.get("parameters", {}), separators=(",", ":"))
            line = f"{name}: {function.get('description', '')} parameters: {parameters}"
            if lines and sum(map(len, lines)) + len(line) > max_chars:
                break
            lines.append(line)
            if name not in self.found:
                self.found.append(name)
        return "Tools you can call now, by name:\n" + "\n".join(lines)


def _call_arguments(arguments: JSON) -> tuple[str, JSON]:
    """``call_tool``'s tool name and its arguments (an object, or JSON text of one)."""
    inner = arguments.get("arguments") or {}
    if isinstance(inner, str):
        try:
            inner = json.loads(inner)
        except ValueError:
            inner = {}
    return str(arguments.get("name") or ""), inner if isinstance(inner, dict) else {}


def is_lean(names: Sequence[str]) -> bool:
    """Whether an offer was the lean one (its first tool finds the others)."""
    return bool(names) and names[0] == FIND_TOOLS
