"""Where a model's requests go, and which key goes with them.

A key goes only where it was meant to go. A key written in the config (``model.api_key``,
``auxiliary.compression.api_key``) goes to the endpoint it was written for; the main
model's key reaches the summary model only when both are the same provider at the same
endpoint. The provider's own environment variable (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``) goes only to that provider's own API — never to a custom
``base_url`` (nor one the SDK would read from ``OPENAI_BASE_URL``/``ANTHROPIC_BASE_URL``),
which gets a placeholder instead: a local server wants no key, and any other endpoint
needs its key written in the config.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from agent.urls import host_port

#: Each provider's own key variable: sent to that provider's own API only.
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
#: The variable each SDK reads its base URL from when it is given none.
BASE_URL_VARIABLES = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}
OFFICIAL_HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
#: The "key" of a server that gets none (the SDK wants a string): a local server wants
#: none; any other answers 401, which names the problem.
NO_KEY_NEEDED = "not-needed"


@dataclass(frozen=True)
class ModelRoute:
    """Where requests to one model go: what a provider is built from and doctor checks."""

    provider: str
    name: str
    base_url: str | None
    #: As configured (None: the provider's usual environment variable); see resolve_api_key.
    api_key: str | None


def is_providers_own_api(
    provider: str, base_url: str | None, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether requests go to the provider's own API: no base URL (and none in the
    SDK's own variable), or an https URL on the provider's official host."""
    env = os.environ if environ is None else environ
    url = base_url or env.get(BASE_URL_VARIABLES.get(provider, ""), "")
    if not url:
        return True
    parts = urlsplit(url)
    return parts.scheme == "https" and parts.hostname == OFFICIAL_HOSTS.get(provider)


def model_label(model: str, provider: str, base_url: str | None) -> str:
    """A model as people are told of it: ``gpt-4o-mini via openai`` on the provider's own
    API, ``qwen3:8b at 127.0.0.1:11434`` on any other server (an Ollama speaks OpenAI's
    protocol but is not OpenAI, and two servers' models are told apart); never the
    URL's user, password, path or query."""
    url = base_url or os.environ.get(BASE_URL_VARIABLES.get(provider, ""), "")
    if not url or is_providers_own_api(provider, url):
        return f"{model} via {provider}"
    return f"{model} at {host_port(url)}"


def same_endpoint(
    provider: str, base_url: str | None, other_provider: str, other_base_url: str | None
) -> bool:
    """The same provider at the same endpoint (the official one however it is spelled)."""
    return provider == other_provider and _endpoint(provider, base_url) == _endpoint(
        other_provider, other_base_url
    )


def _endpoint(provider: str, base_url: str | None) -> str | None:
    if not base_url or is_providers_own_api(provider, base_url, {}):
        return None
    return base_url.rstrip("/")


def resolve_api_key(
    provider: str,
    configured: str | None,
    base_url: str | None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The key to send: the configured one; else, to the provider's own API only, its
    usual environment variable (None when that is unset: nothing to send); a custom
    endpoint without a configured key gets :data:`NO_KEY_NEEDED`."""
    env = os.environ if environ is None else environ
    if configured:
        return configured
    if not is_providers_own_api(provider, base_url, env):
        return NO_KEY_NEEDED
    return env.get(KEY_VARIABLES.get(provider, "")) or None
