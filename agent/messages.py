"""The shape of a conversation message, one name for it everywhere (docs/glossary.md).

A message is OpenAI's chat shape, because that is what most servers speak and what the
store keeps: ``role``, ``content`` (text, a list of parts for images, or None beside tool
calls), ``tool_calls`` on an assistant message, ``tool_call_id`` and ``name`` on a tool
result. Providers that speak something else convert at their edge
(:mod:`agent.providers.anthropic_format`); nothing else in the agent or the gateway builds
another shape.

Free-form JSON (a tool's arguments and schema, an engine's saved state) is :data:`JSON`:
its keys are chosen by someone else, so naming them here would be a guess.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

#: A JSON object whose keys someone else decides (a tool's arguments, a schema, a state).
JSON = dict[str, Any]

Role = Literal["system", "user", "assistant", "tool"]


class ToolCallFunction(TypedDict):
    name: str
    arguments: str  # JSON text, exactly as the model produced it


class ToolCallPart(TypedDict):
    """One entry of an assistant message's ``tool_calls``."""

    id: str
    type: Literal["function"]
    function: ToolCallFunction


class Message(TypedDict):
    """One message of a conversation, in OpenAI's chat shape."""

    role: str  # a Role; rows written by older versions are read as they are
    content: NotRequired[str | list[JSON] | None]
    tool_calls: NotRequired[list[ToolCallPart]]
    tool_call_id: NotRequired[str]
    name: NotRequired[str]
    #: Anthropic's cache breakpoint on the message (docs/design.md#prompt-caching).
    cache_control: NotRequired[JSON]


#: A tool's schema as offered to the model: ``{"type": "function", "function": {...}}``.
ToolSchema = JSON
