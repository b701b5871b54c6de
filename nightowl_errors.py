"""The root of every error nightowl raises on purpose, and the one way to keep secrets
out of an error's text.

Catch :class:`NightowlError` to catch them all, the way httpx's ``HTTPError`` roots its
errors; catch a branch for one kind of trouble:

- ``gateway.config.ConfigError`` — the configuration cannot be used;
- ``gateway.store.errors.StoreError`` — the database cannot be used (``DataDirInUse``,
  ``SessionEnded``);
- ``adapters.base.DeliveryError`` — a platform refused a message (``TelegramStartError``
  when it could not even start); each edge maps its library's errors to it in one place
  (``adapters.telegram.calls.telegram_errors``, ``adapters.discord_adapter.outbound.discord_errors``);
- ``agent.providers.ProviderError`` — the model provider failed, with a ``kind``;
- ``agent.loop.CompressionExhausted`` — the conversation still overflows after every
  allowed compression (not a provider's failure: ours to report);
- ``agent.tools.ToolInputError`` — a tool call's arguments were unusable.

tests/test_errors.py imports every module of gateway/, agent/ and adapters/ and fails on
an exception class that is not under the root (a few control-flow ``BaseException``\\ s
are listed there with their reason).

This module imports only the standard library. It is the one module gateway/, agent/
and adapters/ all import: a shared kernel of types, not a layer (docs/design.md#errors).
"""

from __future__ import annotations

import re
from collections.abc import Iterable


class NightowlError(Exception):
    """Something nightowl could not do; ``str()`` is safe to show (no secrets)."""


REDACTED = "[redacted]"
#: A configured secret shorter than this is not searched for: "none" or "EMPTY" (a local
#: server's placeholder key) would blank ordinary words.
MIN_SECRET = 6

# Shapes of credentials that may arrive in text we did not write (an SDK's error
# message, a URL a library logged), whether or not they are configured here.
_BEARER = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}")
_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-*]{6,}"  # OpenAI-style keys
    r"|(?<!\d)\d{6,12}:[A-Za-z0-9_\-]{30,}"  # a Telegram bot token, in a URL too ("/bot<token>/")
)
#: ``key=…`` in a URL or a request line; ``api_key: …`` as an SDK prints it. Not a bare
#: ``key: …``: "session key: telegram:1" is a log line, not a credential; nor a
#: ``${VARIABLE}`` a config names it by ("model.api_key: ${VLLM_KEY} is not set").
_VARIABLE = r"\$\{[A-Za-z_]\w*\}(?=[\s&,;\"']|$)"
_ASSIGNED = re.compile(
    r"(?i)\b(api[_-]?key|access[_-]?token|token|key)(=)(?!" + _VARIABLE + r")[^\s&,;\"']+"
    r"|\b(api[_-]?key|access[_-]?token)(:\s*)(?!" + _VARIABLE + r")[^\s&,;\"']+"
)


def redact(text: str, secret: str | Iterable[str] | None = None) -> str:
    """``text`` without ``secret`` (one, or several) and without anything shaped like a
    credential: bearer tokens, ``sk-`` keys, Telegram bot tokens, ``key=…``/``token=…``
    values. Every one becomes ``[redacted]``."""
    secrets = (secret,) if isinstance(secret, str) else (secret or ())
    for value in secrets:
        if value and len(value) >= MIN_SECRET:
            text = text.replace(value, REDACTED)
    text = _BEARER.sub(f"Bearer {REDACTED}", text)
    text = _SHAPES.sub(REDACTED, text)
    return _ASSIGNED.sub(lambda m: f"{m[1] or m[3]}{m[2] or m[4]}{REDACTED}", text)
