"""LLM providers behind one interface (:class:`Provider`), built from settings.

``make_provider(ProviderSettings(provider="openai" | "anthropic", model=..., ...))``
returns a provider whose ``complete()`` takes OpenAI-style messages and raises only
:class:`ProviderError`.
"""

from __future__ import annotations

from agent.providers.base import (
    Completion,
    ErrorKind,
    Provider,
    ProviderError,
    ProviderSettings,
    TextCallback,
    ToolCall,
    Usage,
)

__all__ = [
    "Completion",
    "ErrorKind",
    "Provider",
    "ProviderError",
    "ProviderSettings",
    "TextCallback",
    "ToolCall",
    "Usage",
    "make_provider",
]

PROVIDER_NAMES = ("openai", "anthropic")


def make_provider(settings: ProviderSettings) -> Provider:
    """Build the provider ``settings.provider`` names. Raises ValueError for unknown names."""
    if settings.provider == "openai":
        from agent.providers.openai import OpenAIProvider

        return OpenAIProvider(settings)
    if settings.provider == "anthropic":
        from agent.providers.anthropic import AnthropicProvider

        return AnthropicProvider(settings)
    raise ValueError(
        f"unknown provider {settings.provider!r}; expected one of {', '.join(PROVIDER_NAMES)}"
    )
