"""What an MCP tool result becomes in the conversation (docs/design.md#mcp-results).

A tool row holds text, or text and images: ``content`` is a string, or a list of OpenAI
parts (``text`` and ``image_url`` with a data URL) — the shape user rows with photos
have, which both providers convert at their edge. Everything else an MCP server can
return becomes a line of text: an embedded text resource its text, a binary one or a
resource link a note naming it, audio a note. Images become parts only when the model
can see them; otherwise a note says one was returned.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import mcp_types as types

from agent.messages import JSON

#: Tool names the model sees: what both providers accept.
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME_LENGTH = 64
#: Images bigger than this (decoded) are described, not sent.
MAX_IMAGE_BYTES = 5_000_000


def tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>``, with characters providers refuse replaced, at most 64 long."""
    return _NAME_CHARS.sub("_", f"{server}__{tool}")[:MAX_NAME_LENGTH]


def result_content(result: types.CallToolResult, *, vision: bool) -> str | list[JSON]:
    """The content of the tool row for ``result``: text, or text and image parts."""
    texts: list[str] = []
    images: list[JSON] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent):
            image = _image_part(block.data, block.mime_type) if vision else None
            if image is None:
                texts.append(f"[image: {block.mime_type}, {_size(block.data)}; not shown]")
            else:
                images.append(image)
                texts.append(f"[image {len(images)}: {block.mime_type}]")
        elif isinstance(block, types.EmbeddedResource):
            texts.append(_embedded(block.resource, vision, images))
        elif isinstance(block, types.ResourceLink):
            name = f" ({block.name})" if block.name else ""
            texts.append(f"[resource link: {block.uri}{name}]")
        elif isinstance(block, types.AudioContent):
            texts.append(f"[audio: {block.mime_type}, {_size(block.data)}; not played]")
    if not result.content and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(texts) if texts else "(no output)"
    if result.is_error:
        text = f"Error from the tool: {text}"
    if not images:
        return text
    return [{"type": "text", "text": text}, *images]


def _embedded(resource: Any, vision: bool, images: list[JSON]) -> str:
    uri = str(resource.uri)
    mime = resource.mime_type or "unknown type"
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {uri}]\n{resource.text}"
    blob = getattr(resource, "blob", "")
    if vision and mime.startswith("image/"):
        image = _image_part(blob, mime)
        if image is not None:
            images.append(image)
            return f"[resource {uri}: image {len(images)}, {mime}]"
    return f"[resource {uri}: {mime}, {_size(blob)}; binary, not shown]"


def _image_part(data: str, mime: str) -> JSON | None:
    """An ``image_url`` part, or None for data that is not an image a model can take."""
    if not mime.startswith("image/"):
        return None
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw or len(raw) > MAX_IMAGE_BYTES:
        return None
    return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}}


def _size(data: str) -> str:
    size = len(data) * 3 // 4
    return f"{size / 1000:.0f} KB" if size >= 1000 else f"{size} bytes"
