"""Error classification on real servers' wording (SPEC T4): overflow, limits, retry-after."""

from __future__ import annotations

import email.utils
import time

import pytest

from agent.providers.errors import (
    classify_failure,
    looks_like_overflow,
    parse_context_limit,
    parse_retry_after,
    redact,
)

# (server, message as that server sends it, the window it states)
OVERFLOW_MESSAGES = [
    ("anthropic", "prompt is too long: 210000 tokens > 200000 maximum", 200000),
    (
        "anthropic",
        "input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, "
        "decrease input length or `max_tokens` and try again",
        200000,
    ),
    (
        "openai",
        "This model's maximum context length is 8192 tokens. However, your messages resulted "
        "in 9000 tokens. Please reduce the length of the messages.",
        8192,
    ),
    ("openai", "Your input exceeds the context window of this model.", None),
    (
        "vllm",
        "This model's maximum context length is 4096 tokens. However, you requested 5000 "
        "tokens (4000 in the messages, 1000 in the completion).",
        4096,
    ),
    (
        "vllm",
        "The prompt (total length 25938) is too long to fit into the model (context length "
        "4096). Make sure that `max_model_len` is no smaller than the number of text tokens.",
        4096,
    ),
    (
        "vllm",
        "The decoder prompt (length 5000) is longer than the maximum model length of 4096.",
        4096,
    ),
    ("llama.cpp", "request (4476 tokens) exceeds the available context size (4096 tokens)", 4096),
    ("llama.cpp", "the request exceeds the available context size, try increasing it", None),
    ("ollama", "input exceeds context length", None),
    (
        "openrouter",
        "This endpoint's maximum context length is 200000 tokens. However, you requested "
        "about 250000 tokens. Please reduce the length, or use the middle-out transform.",
        200000,
    ),
    (
        "mistral",
        "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
        "maximum context length",
        32768,
    ),
    (
        "tgi",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193. "
        "Given: 9000 `inputs` tokens and 1000 `max_new_tokens`",
        8193,
    ),
    (
        "gemini",
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        1048576,
    ),
    (
        "lmstudio",
        "Trying to keep the first 5000 tokens when context the overflows. However, the model "
        "is loaded with context length of only 4096 tokens, which is not enough.",
        4096,
    ),
]


@pytest.mark.parametrize(("server", "message", "limit"), OVERFLOW_MESSAGES)
def test_overflow_wordings_are_recognised_and_the_limit_learned(
    server: str, message: str, limit: int | None
) -> None:
    error = classify_failure(
        server, status=400, error_type="invalid_request_error", code=None, message=message
    )

    assert error.kind == "overflow"
    assert error.context_limit == limit


def test_openai_overflow_code_alone_is_enough() -> None:
    error = classify_failure(
        "openai", status=400, error_type=None, code="context_length_exceeded", message="Bad"
    )

    assert error.kind == "overflow"


def test_llama_cpp_states_the_window_in_the_error_body() -> None:
    body = {"code": 400, "message": "exceeds context", "n_prompt_tokens": 5000, "n_ctx": 4096}

    assert parse_context_limit("exceeds context", body) == 4096


def test_ollama_overflow_arrives_as_a_500() -> None:
    error = classify_failure(
        "ollama", status=500, error_type=None, code=None, message="input exceeds context length"
    )

    assert error.kind == "overflow"


@pytest.mark.parametrize(
    "message",
    [
        "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000",
        "Too many tokens per minute, slow down",
    ],
)
def test_token_rate_limits_are_not_overflows(message: str) -> None:
    error = classify_failure("openai", status=429, error_type=None, code=None, message=message)

    assert error.kind == "rate_limit"


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens is too large: 10000. This model supports at most 4096 completion tokens",
        "Invalid value for 'temperature'",
        "messages.1.content: text content blocks must be non-empty",
    ],
)
def test_other_bad_requests_are_not_overflows(message: str) -> None:
    assert not looks_like_overflow(message)
    error = classify_failure("x", status=400, error_type=None, code=None, message=message)
    assert error.kind == "other"


@pytest.mark.parametrize(
    ("status", "error_type", "code", "message", "kind", "detail"),
    [
        (401, "authentication_error", None, "invalid x-api-key", "auth", ""),
        (403, "permission_error", None, "not allowed", "auth", ""),
        (429, None, "insufficient_quota", "You exceeded your current quota", "auth", "quota"),
        (402, None, None, "Insufficient credits", "auth", "quota"),
        (429, "rate_limit_error", None, "slow down", "rate_limit", ""),
        (529, "overloaded_error", None, "Overloaded", "overloaded", ""),
        (503, None, None, "The engine is currently overloaded", "overloaded", ""),
        (503, None, None, "Model is at capacity, try later", "overloaded", ""),
        (None, "overloaded_error", None, "Overloaded", "overloaded", ""),
        (None, "server_error", None, "The server is overloaded", "overloaded", ""),
        (503, None, None, "Service Unavailable", "other", ""),
        (500, "api_error", None, "Internal server error", "other", ""),
        (504, None, None, "Gateway Timeout", "timeout", ""),
        (413, "request_too_large", None, "Request exceeds the maximum size", "overflow", ""),
    ],
)
def test_status_and_type_classification(
    status: int | None,
    error_type: str | None,
    code: str | None,
    message: str,
    kind: str,
    detail: str,
) -> None:
    error = classify_failure("p", status=status, error_type=error_type, code=code, message=message)

    assert (error.kind, error.detail) == (kind, detail)


def test_retry_after_sources() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({}, "Please try again in 20s.") == 20.0
    assert parse_retry_after({}, "Please try again in 350ms.") == 0.35
    assert parse_retry_after({}, "no hint") is None
    in_a_minute = email.utils.formatdate(time.time() + 60, usegmt=True)
    assert 55 <= (parse_retry_after({"retry-after": in_a_minute}) or 0) <= 60


def test_redaction_removes_keys_and_tokens() -> None:
    text = (
        "Incorrect API key provided: sk-proj-abcdef1234567890. Header was Bearer eyJhbGciOi.x.y;"
        " url ?key=AIzaSyD-secret and my-own-secret-value"
    )

    cleaned = redact(text, secret="my-own-secret-value")

    for secret in ("sk-proj-abcdef1234567890", "eyJhbGciOi", "AIzaSyD-secret", "my-own-secret"):
        assert secret not in cleaned
    assert "Incorrect API key provided" in cleaned


def test_error_message_is_redacted_and_bounded() -> None:
    error = classify_failure(
        "openai",
        status=401,
        error_type=None,
        code="invalid_api_key",
        message="Incorrect API key provided: TOPSECRET. " + "x" * 2000,
        secret="TOPSECRET",
    )

    assert "TOPSECRET" not in str(error)
    assert len(str(error)) <= 500
