"""What each model family's window is, as its vendor publishes it: the static table
(docs/design.md#window-resolution), and the window of a model nobody knows."""

from __future__ import annotations

import functools

#: Window for a model nobody knows. Most unknown models are served by local or
#: self-hosted servers (Ollama, llama.cpp, vLLM), which commonly run 8K-32K contexts.
#: Underestimating only compresses earlier; overestimating sends requests the server
#: rejects or, worse, silently truncates. 32K is the safer side.
DEFAULT_CONTEXT_LENGTH = 32_768

# Keys are matched as substrings of the lower-cased model name; the longest match wins,
# so "gpt-4o-mini" beats "gpt-4o" beats "gpt-4". Values are the vendors' published
# windows (total tokens, input + output).
STATIC_CONTEXT_LENGTHS: dict[str, int] = {
    # Anthropic
    "claude": 200_000,
    "claude-2": 100_000,
    "claude-instant": 100_000,
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-1106": 128_000,
    "gpt-4-0125": 128_000,
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4.5": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-5": 400_000,
    "gpt-5-chat": 128_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "gpt-oss": 131_072,
    # Google
    "gemini": 1_048_576,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.0": 32_768,
    "gemini-pro": 32_768,
    "gemma": 8_192,
    "gemma-3": 131_072,
    "gemma3": 131_072,
    # Meta
    "llama": 8_192,
    "llama-2": 4_096,
    "llama2": 4_096,
    "llama-3": 8_192,
    "llama3": 8_192,
    "llama-3.1": 131_072,
    "llama3.1": 131_072,
    "llama-3.2": 131_072,
    "llama3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3.3": 131_072,
    "llama-4": 1_048_576,
    "llama4": 1_048_576,
    # Alibaba
    "qwen": 32_768,
    "qwen2": 32_768,
    "qwen2.5": 131_072,
    "qwen-2.5": 131_072,
    "qwen3": 131_072,
    "qwen-3": 131_072,
    "qwen3-coder": 262_144,
    "qwq": 131_072,
    "qwen-plus": 131_072,
    "qwen-turbo": 1_000_000,
    "qwen-max": 32_768,
    # DeepSeek
    "deepseek": 131_072,
    "deepseek-chat": 131_072,
    "deepseek-reasoner": 131_072,
    "deepseek-coder": 16_384,
    "deepseek-coder-v2": 131_072,
    # Mistral
    "mistral": 32_768,
    "mistral-large": 131_072,
    "mistral-medium": 131_072,
    "mistral-small": 131_072,
    "mistral-nemo": 131_072,
    "ministral": 131_072,
    "pixtral": 131_072,
    "codestral": 262_144,
    "devstral": 131_072,
    "magistral": 40_000,
    "mixtral": 32_768,
    "mixtral-8x22b": 65_536,
}


def _key_matches(key: str, name: str) -> bool:
    # OpenAI's o-series keys ("o1", "o3-mini") are too short to match anywhere in a name:
    # they only match the start of the bare model name ("openai/o3-mini" -> "o3-mini").
    if key[0] == "o" and key[1:2].isdigit():
        return name.rsplit("/", 1)[-1].startswith(key)
    return key in name


@functools.lru_cache(maxsize=256)
def static_context_length(model: str) -> int | None:
    """The window the static table gives ``model`` (longest matching key), or None.

    Remembered: every turn asks, and the table never changes."""
    name = model.strip().lower()
    best: tuple[int, int] | None = None
    for key, value in STATIC_CONTEXT_LENGTHS.items():
        if _key_matches(key, name) and (best is None or len(key) > best[0]):
            best = (len(key), value)
    return best[1] if best else None
