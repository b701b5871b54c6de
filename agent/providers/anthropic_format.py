"""OpenAI-style messages and tools in, Anthropic Messages API request parts out.

The rest of nightowl speaks OpenAI-style dicts (docs/design.md#context-engine); this module is the Anthropic
edge. The rules the API enforces, and so this conversion does:

- system prompts are a top-level ``system`` list of text blocks, not messages;
- roles alternate, so consecutive same-role messages are merged;
- tool results are ``tool_result`` blocks at the start of the next user message;
- text blocks are never empty; tool ids match ``[A-Za-z0-9_-]+``.

Cache markers placed by :func:`agent.prompt_caching.apply_anthropic_cache_control`
survive the conversion: a marker on a message (empty content, tool results) moves onto
the message's last block, since Anthropic only accepts them on blocks.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from agent.messages import JSON, Message

_DATA_URL = re.compile(r"^data:(?P<media>[\w.+/-]+);base64,(?P<data>.*)$", re.DOTALL)
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")
#: Anthropic requires the conversation to open with a user turn.
OPENING_USER_TEXT = "(conversation continues)"


def tool_id(raw: str | None) -> str:
    """A tool call id Anthropic accepts, stable for the same input."""
    return _BAD_ID_CHARS.sub("_", raw) if raw else f"toolu_{uuid.uuid4().hex[:12]}"


def convert_tools(tools: list[JSON] | None) -> list[JSON]:
    """OpenAI function schemas to Anthropic tool schemas (Anthropic-shaped ones pass)."""
    converted = []
    for tool in tools or []:
        if "input_schema" in tool:
            converted.append(tool)
            continue
        function = tool.get("function", tool)
        schema = function.get("parameters") or {"type": "object", "properties": {}}
        entry = {"name": function["name"], "input_schema": schema}
        if function.get("description"):
            entry["description"] = function["description"]
        converted.append(entry)
    return converted


def convert_messages(
    messages: list[Message],
) -> tuple[list[JSON], list[JSON]]:
    """(system blocks, alternating Anthropic messages) for OpenAI-style ``messages``."""
    system: list[JSON] = []
    turns: list[JSON] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            system.extend(_with_message_marker(_content_blocks(message.get("content")), message))
            continue
        if role == "tool":
            blocks = [_tool_result_block(message)]
            role = "user"
        elif role == "assistant":
            blocks = _assistant_blocks(message)
        else:
            blocks = _content_blocks(message.get("content"))
            role = "user"
        blocks = _with_message_marker(blocks, message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:
        if turn["role"] == "user":
            # tool_result blocks must open the user turn that answers the tool calls
            turn["content"].sort(key=lambda block: block.get("type") != "tool_result")
    if turns and turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": OPENING_USER_TEXT}]})
    return system, turns


def _with_message_marker(blocks: list[JSON], message: Message) -> list[JSON]:
    marker = message.get("cache_control")
    if marker and blocks:
        blocks[-1]["cache_control"] = dict(marker)
    return blocks


def _content_blocks(content: Any) -> list[JSON]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks = []
    for part in content:
        block = _convert_part(part)
        if block is not None:
            blocks.append(block)
    return blocks


def _convert_part(part: Any) -> JSON | None:
    if isinstance(part, str):
        part = {"type": "text", "text": part}
    if not isinstance(part, dict):
        return None
    kind = part.get("type")
    if kind == "text":
        if not str(part.get("text", "")).strip():
            return None
        block = {"type": "text", "text": part["text"]}
    elif kind == "image_url":
        block = _image_block(part.get("image_url"))
    else:
        return dict(part)  # already Anthropic-shaped (image, document, ...)
    if part.get("cache_control"):
        block["cache_control"] = dict(part["cache_control"])
    return block


def _image_block(image_url: Any) -> JSON:
    url = image_url.get("url", "") if isinstance(image_url, dict) else str(image_url or "")
    match = _DATA_URL.match(url)
    if match:
        source = {"type": "base64", "media_type": match["media"], "data": match["data"]}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


def _assistant_blocks(message: Message) -> list[JSON]:
    blocks = _content_blocks(message.get("content"))
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_id(call.get("id")),
                "name": function.get("name", ""),
                "input": _parse_arguments(function.get("arguments")),
            }
        )
    return blocks


def _parse_arguments(arguments: Any) -> JSON:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments or "{}")
    except (TypeError, json.JSONDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _tool_result_block(message: Message) -> JSON:
    content = message.get("content")
    block: JSON = {
        "type": "tool_result",
        "tool_use_id": tool_id(message.get("tool_call_id")),
    }
    if isinstance(content, list):
        if blocks := _content_blocks(content):
            block["content"] = blocks
    elif content:
        block["content"] = str(content)
    return block
