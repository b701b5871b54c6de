"""How a failed provider call becomes one :class:`ProviderError` (docs/design.md#overflow-errors, STYLE errors).

Both SDKs raise the same family of exceptions (status errors, connection errors,
timeouts, mid-stream errors). Each provider pulls out status, error type, code, message
and headers, and :func:`classify_failure` decides the kind from those alone, so the rules
live in one place:

- ``overflow``: OpenAI ``context_length_exceeded``, Anthropic "prompt is too long" and the
  wordings of OpenAI-compatible servers (vLLM, llama.cpp, Ollama, OpenRouter, TGI, LM
  Studio, Mistral, Gemini); the stated window goes into ``context_limit`` and the prompt's
  size as the server counted it into ``prompt_tokens``.
- ``rate_limit`` (429, ``retry_after`` from the headers or "try again in Ns"),
  ``overloaded`` (529, ``overloaded_error``, 503 "overloaded"/"at capacity"),
  ``auth`` (401/403, and quota exhaustion with ``detail="quota"``), ``timeout``,
  ``network``, and ``other`` for everything else — a 404 naming the model as
  ``detail="no_such_model"`` (never pulled, or its name typed wrong).
"""

from __future__ import annotations

import email.utils
import json
import re
import ssl
import time
from collections.abc import Mapping
from typing import Any

import httpx2

from agent.providers.base import ErrorKind, ProviderError
from nightowl_errors import redact as redact  # the one redact (its tests import it here)

#: ``ProviderError.detail`` values. The compressor aborts (and paces retries) on these
#: instead of falling back to a deterministic summary (docs/design.md#failure-ladder).
STREAM_CLOSED = "stream_closed"
JSON_DECODE = "json_decode"
EMPTY_RESPONSE = "empty_response"
QUOTA = "quota"
#: The server has no such model (kind ``other``): never pulled, or a name typed wrong.
NO_SUCH_MODEL = "no_such_model"
#: Not sent (kind ``overflow``): what travels beside the conversation fills the window,
#: which no summary of the conversation makes room in (docs/design.md#no-room).
NO_ROOM = "no_room"

MAX_MESSAGE_CHARS = 500

_OVERFLOW_PHRASES = (
    "context_length_exceeded",
    "prompt is too long",
    "exceed context limit",
    "maximum context length",
    "context length exceeded",
    "exceeds the available context size",
    "exceed_context_size",
    "too long to fit into the model",
    "maximum model length",
    "exceeds context length",
    "exceeds the context length",
    "exceeds the context window",
    "exceeds the maximum context",
    "maximum context size",
    "context window exceeded",
    "context_window_exceeded",
    "input is too long",
    "too many tokens",
    "maximum number of tokens allowed",
    "`inputs` tokens + `max_new_tokens`",
    "context length of only",
    "request_too_large",
    "prompt too long",
    "longer than the context length",  # Ollama without context shift
    "greater than the context length",  # LM Studio 0.4
    "reached context length of",  # LM Studio, mid-generation
    "context size has been exceeded",  # LM Studio, MLX
)

# Ordered: the first pattern that matches states the window (group 1).
_LIMIT_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"prompt is too long: \d+ tokens > (\d+) maximum",
        r"exceed context limit: \d+ \+ \d+ > (\d+)",
        r"maximum context length is (\d+)",
        r"available context size \((\d+) tokens?\)",
        r"\(context length (\d+)\)",
        r"maximum model length of (\d+)",
        r"(\d+) maximum context length",
        r"must be <= (\d+)",
        r"maximum number of tokens allowed \((\d+)\)",
        r"context length of only (\d+)",
        r"context (?:length|window|size) (?:of|is) (\d+)",
        r"n_ctx: (\d+)",  # LM Studio 0.4
    )
)

# Ordered: the first pattern that matches states the prompt's size as the server counted
# it (group 1) — the truth nightowl's estimate is calibrated by (docs/design.md#calibration).
_PROMPT_PATTERNS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\((\d+) in the messages",  # OpenAI, older vLLM
        r"request has (\d+) input tokens",  # newer vLLM
        r"messages resulted in (\d+) tokens",
        r"prompt is too long: (\d+) tokens",  # Anthropic
        r"exceed context limit: (\d+) \+",
        r"prompt \((?:total )?length (\d+)\)",  # vLLM
        r"request \((\d+) tokens\) exceeds",  # llama.cpp before the JSON fields
        r"prompt contains (\d+) tokens",  # Mistral
        r"given: (\d+) `inputs` tokens",  # TGI
        r"input token count \((\d+)\)",  # Gemini
        r"keep the first (\d+) tokens",  # LM Studio
        r"input length \((\d+)\)",
        r"prompt contains at least (\d+) input tokens",  # vLLM 2026
        r"n_keep: (\d+)",  # LM Studio 0.4
    )
)

_RETRY_IN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)
_OVERLOADED = re.compile(r"overloaded|at capacity", re.IGNORECASE)
_QUOTA = re.compile(r"insufficient_quota|exceeded your current quota|credit", re.IGNORECASE)
#: A 404 about the model, not the path (a ``base_url`` that misses or doubles ``/v1`` is
#: a 404 too, whose type may be ``not_found_error``): OpenAI's code ``model_not_found``,
#: Anthropic's "model: x", Ollama's "model 'x' not found", vLLM's "The model `x` does
#: not exist." (tests/fakes/local_servers.py). A LiteLLM proxy says it with a 400:
#: "Invalid model name passed in model=x" (BerriAI/litellm#3142).
_NO_SUCH_MODEL = re.compile(
    r"model_not_found|^model: |\bmodel\b.{0,200}\b(?:not found|does not exist)",
    re.IGNORECASE,
)


def looks_like_overflow(*texts: str | None) -> bool:
    """True when any text (message, type or code) reads as a context-window overflow."""
    joined = " ".join(t for t in texts if t).lower()
    return any(phrase.lower() in joined for phrase in _OVERFLOW_PHRASES)


def parse_context_limit(text: str, body: Any = None) -> int | None:
    """The window an overflow error states, e.g. "... 210000 tokens > 200000 maximum"."""
    return _stated(text, body, "n_ctx", _LIMIT_PATTERNS)


def parse_prompt_tokens(text: str, body: Any = None) -> int | None:
    """The prompt's size an overflow error states, as the server counted it, if it does."""
    return _stated(text, body, "n_prompt_tokens", _PROMPT_PATTERNS)


def _stated(text: str, body: Any, field: str, patterns: tuple[re.Pattern[str], ...]) -> int | None:
    """A number the error object carries as ``field`` (llama.cpp's way), or the first of
    ``patterns`` finds in the text."""
    if isinstance(body, Mapping) and isinstance(body.get(field), int):
        return int(body[field])
    for pattern in patterns:
        match = pattern.search(text or "")
        if match:
            return int(match.group(1))
    return None


def parse_retry_after(headers: Mapping[str, str] | None, message: str = "") -> float | None:
    """Seconds to wait: ``retry-after-ms``, ``retry-after`` (seconds or a date), the text."""
    headers = headers or {}
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    match = _RETRY_IN.search(message or "")
    if match:
        amount = float(match.group(1))
        return amount / 1000 if match.group(2).lower() == "ms" else amount
    return None


def classify_kind(
    status: int | None, error_type: str | None, code: str | None, message: str
) -> tuple[ErrorKind, str]:
    """(kind, detail) for an error the server described. ``status`` is None mid-stream."""
    error_type = (error_type or "").lower()
    code = (code or "").lower()
    if status == 401 or error_type in ("authentication_error", "permission_error"):
        return "auth", ""
    if status == 402 or (status == 429 and _QUOTA.search(f"{code} {message}")):
        return "auth", QUOTA
    if status == 403:
        return "auth", ""
    if status == 429 or error_type in ("rate_limit_error", "rate_limit_exceeded"):
        return "rate_limit", ""
    if status == 413 or looks_like_overflow(message, error_type, code):
        return "overflow", ""
    if status == 529 or error_type == "overloaded_error":
        return "overloaded", ""
    if (status is None or status == 200 or status >= 500) and _OVERLOADED.search(message):
        return "overloaded", ""
    if status in (408, 504) or error_type == "timeout_error":
        return "timeout", ""
    if status == 404 and (code == "model_not_found" or _NO_SUCH_MODEL.search(message)):
        return "other", NO_SUCH_MODEL
    if status == 400 and "Invalid model name passed in model=" in message:  # LiteLLM's
        return "other", NO_SUCH_MODEL
    return "other", ""


def classify_failure(
    provider: str,
    *,
    status: int | None,
    error_type: str | None,
    code: str | None,
    message: str,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    secret: str | None = None,
) -> ProviderError:
    """Build the :class:`ProviderError` for a failure the server described."""
    kind, detail = classify_kind(status, error_type, code, message)
    overflow = kind == "overflow"
    label = " ".join(str(p) for p in (status if status != 200 else None, error_type) if p)
    text = redact(f"{label}: {message}" if label else message, secret)
    return ProviderError(
        kind,
        text[:MAX_MESSAGE_CHARS],
        status=status,
        retry_after=parse_retry_after(headers, message) if kind == "rate_limit" else None,
        context_limit=parse_context_limit(message, body) if overflow else None,
        prompt_tokens=parse_prompt_tokens(message, body) if overflow else None,
        provider=provider,
        detail=detail,
    )


def local_failure(
    provider: str, kind: ErrorKind, message: str, *, detail: str = "", secret: str | None = None
) -> ProviderError:
    """A failure seen on our side (no server error text): timeout, network, bad stream."""
    return ProviderError(
        kind, redact(message, secret)[:MAX_MESSAGE_CHARS], provider=provider, detail=detail
    )


def transport_failure(
    provider: str,
    exc: BaseException,
    *,
    sdk: Any,
    stream_started: bool,
    target: str,
    secret: str | None = None,
) -> ProviderError | None:
    """Failures below the API that both SDKs raise alike (their exception classes share
    one shape): a timeout, a lost connection, an unparsable body. None for anything else.

    The transport's own errors are mapped here too: the anthropic SDK lets a stream's
    read fail with httpx2's exception, unwrapped (openai wraps it), so a stream that
    stalls past the read timeout would otherwise leave as no ProviderError at all
    (docs/design.md#slow-models).
    """
    if isinstance(exc, sdk.APITimeoutError | httpx2.TimeoutException):
        return local_failure(provider, "timeout", "the request timed out")
    if isinstance(exc, sdk.APIConnectionError | httpx2.RequestError | ssl.SSLError):
        if stream_started:
            return local_failure(
                provider, "other", "the connection closed mid-stream", detail=STREAM_CLOSED
            )
        return local_failure(
            provider, "network", f"cannot reach {target}: {exc.__cause__ or exc}", secret=secret
        )
    if isinstance(exc, json.JSONDecodeError):
        return local_failure(provider, "other", f"malformed response: {exc}", detail=JSON_DECODE)
    return None
