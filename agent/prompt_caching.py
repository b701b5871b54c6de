"""Anthropic prompt caching: where the breakpoints go and when (docs/design.md#prompt-caching).

Pure functions over OpenAI-style messages. The ``system_and_3`` layout marks the system
prompt and the last three non-system messages: the system prompt is byte-stable across
turns (docs/design.md#prompt-caching), and the three moving markers let each turn read the prefix the previous turn
wrote. Anthropic allows at most four breakpoints per request.
"""

from __future__ import annotations

import copy

from agent.messages import Message

CacheTTL = str  # "5m" | "1h"

VALID_TTLS = ("5m", "1h")
#: Breakpoints on the newest messages, beside the system prompt's (Anthropic allows four).
TRAILING_BREAKPOINTS = 3


def cache_marker(ttl: CacheTTL = "5m") -> dict[str, str]:
    """The ``cache_control`` value for a TTL (5m is the API default, so it is left out)."""
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def apply_anthropic_cache_control(
    messages: list[Message], ttl: CacheTTL = "5m", native_anthropic: bool = True
) -> list[Message]:
    """Return a deep copy of ``messages`` with ``system_and_3`` cache breakpoints.

    Marks the first system message and the last three non-system messages: string
    content becomes one text block carrying the marker; list content gets it on its last
    block; empty content gets ``cache_control`` on the message itself; tool messages get
    it on the message only when ``native_anthropic`` (the Anthropic provider moves it onto
    the ``tool_result`` block; OpenAI-compatible routes such as OpenRouter skip them).
    The input is never mutated.
    """
    marked = copy.deepcopy(messages)
    system_index = next((i for i, m in enumerate(marked) if m.get("role") == "system"), None)
    if system_index is not None:
        _place_marker(marked[system_index], ttl, native_anthropic)
    others = [i for i, m in enumerate(marked) if m.get("role") != "system"]
    for index in others[-TRAILING_BREAKPOINTS:]:
        _place_marker(marked[index], ttl, native_anthropic)
    return marked


def _place_marker(message: Message, ttl: CacheTTL, native_anthropic: bool) -> None:
    content = message.get("content")
    if message.get("role") == "tool":
        if native_anthropic:
            message["cache_control"] = cache_marker(ttl)
        return
    if content is None or content == "" or content == []:
        message["cache_control"] = cache_marker(ttl)
    elif isinstance(content, str):
        message["content"] = [{"type": "text", "text": content, "cache_control": cache_marker(ttl)}]
    elif isinstance(content, list) and isinstance(content[-1], dict):
        content[-1]["cache_control"] = cache_marker(ttl)


def caching_enabled(provider_name: str, model: str, base_url: str | None) -> bool:
    """Claude models on the native Anthropic API or through OpenRouter (docs/design.md#prompt-caching)."""
    if "claude" not in (model or "").lower():
        return False
    return provider_name == "anthropic" or "openrouter" in (base_url or "").lower()


def resolve_cache_ttl(setting: str, *, human_paced: bool) -> CacheTTL:
    """``prompt_caching.cache_ttl`` for one request: "5m"/"1h" as set, or "auto".

    ``auto`` picks "1h" for a human-paced request (a person's chat: minutes between
    turns) and "5m" for a machine-paced one (the scheduler's). Raises ValueError for other
    settings.
    """
    setting = (setting or "").strip().lower()
    if setting in VALID_TTLS:
        return setting
    if setting != "auto":
        raise ValueError(f"prompt_caching.cache_ttl must be 5m, 1h or auto, not {setting!r}")
    return "1h" if human_paced else "5m"


def caching_log_line(model: str, provider: str, ttl: CacheTTL | None) -> str:
    """The startup line (docs/design.md#prompt-caching); ``ttl=None`` gives the DISABLED variant."""
    if ttl is None:
        return f"Prompt caching: DISABLED ({model} via {provider})"
    return f"Prompt caching: ENABLED ({model} via {provider}, {ttl} TTL)"
