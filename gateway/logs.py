"""Logging: human-readable lines by default, JSON for log shippers; secrets never printed."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterable

from gateway.config import Config, resolve_api_key

REDACTED = "[redacted]"

# Shapes of credentials that may arrive in text we did not write (an SDK's error message).
_SECRET_SHAPES = re.compile(
    r"(sk-[A-Za-z0-9_\-]{16,}|\b\d{6,12}:[A-Za-z0-9_\-]{30,}\b|Bearer\s+[A-Za-z0-9._\-]{16,})"
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, REDACTED)
    return _SECRET_SHAPES.sub(REDACTED, text)


class RedactingFilter(logging.Filter):
    """Replaces configured secrets (and anything shaped like a key) in every record."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message, self.secrets)
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact(
                logging.Formatter().formatException(record.exc_info), self.secrets
            )
            record.exc_info = None
        if clean != message:
            record.msg, record.args = clean, None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        session_key = getattr(record, "session_key", None)
        if session_key:
            entry["session_key"] = session_key
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def config_secrets(config: Config) -> list[str]:
    model = config.model
    values = [
        resolve_api_key(model.provider, model.api_key, model.base_url) or "",
        config.auxiliary.compression.api_key or "",
        config.platforms.telegram.token or "",
        config.platforms.discord.token or "",
    ]
    return [v for v in values if v and v != "not-needed"]


def setup_logging(config: Config, fmt: str | None = None) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter(config_secrets(config)))
    if (fmt or config.logging.format) == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(config.logging.level)
    for noisy in ("httpx", "httpx2", "httpcore", "telegram.ext", "discord", "apscheduler"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
