"""Logging: human-readable lines by default, JSON for log shippers; secrets never printed.

Every line logged while a session's work runs carries that session's key: as
``[telegram:42]`` in text lines and as ``"session_key"`` in JSON. The key comes from
``extra={"session_key": ...}``, else the :data:`SESSION_KEY` context variable, which a
session's lane sets (tasks started from there inherit it).
"""

from __future__ import annotations

import io
import json
import logging
import os
import sys
import time
from collections.abc import Iterable
from contextvars import ContextVar
from logging.handlers import RotatingFileHandler
from pathlib import Path

from gateway.config.schema import Config
from gateway.config.secrets import configured_secrets
from nightowl_errors import redact as redact  # the one redact; doctor imports it here


class RedactingFilter(logging.Filter):
    """Replaces configured secrets (and anything shaped like a key) in every record."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = tuple(s for s in secrets if s)

    def add(self, secret: str) -> None:
        if secret and secret not in self.secrets:
            self.secrets += (secret,)

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


def redact_from_now_on(secret: str) -> None:
    """Redact ``secret`` in every line logged from now on: for a secret that exists only
    after logging was set up (the webhook secret a first start generates)."""
    for handler in logging.getLogger().handlers:
        for found in handler.filters:
            if isinstance(found, RedactingFilter):
                found.add(secret)


#: The session whose work is running in this task (and the tasks it starts).
SESSION_KEY: ContextVar[str | None] = ContextVar("nightowl_session_key", default=None)


class SessionKeyFilter(logging.Filter):
    """Puts the current session key on records that do not name one already."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "session_key", None):
            key = SESSION_KEY.get()
            if key:
                record.session_key = key
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger [session]: message``; no time under journald, which adds its own."""

    def __init__(self, *, timestamps: bool = True) -> None:
        prefix = "%(asctime)s " if timestamps else ""
        super().__init__(prefix + "%(levelname)-7s %(name)s%(session)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        key = getattr(record, "session_key", None)
        record.session = f" [{key}]" if key else ""
        return super().format(record)


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


CHAT_LOG_NAME = "chat.log"
_CHAT_LOG_BYTES = 1_000_000


def setup_logging(config: Config, fmt: str | None = None, *, chat: bool = False) -> None:
    """Log to stderr; in ``chat`` mode only warnings go there, one line each.

    A chat in a terminal shares stderr with the conversation: INFO telemetry and SDK
    retry lines would land between its lines. There, everything at the configured level
    (tracebacks included) goes to ``<data_dir>/chat.log`` instead, when it can be written.
    """
    secrets = configured_secrets(config)
    handlers: list[logging.Handler] = []
    stderr = logging.StreamHandler(sys.stderr)
    if (fmt or config.logging.format) == "json":
        stderr.setFormatter(JsonFormatter())
    elif chat:
        stderr.setFormatter(OneLineFormatter())
    else:
        # systemd sets JOURNAL_STREAM when stderr goes to the journal, which timestamps lines.
        stderr.setFormatter(TextFormatter(timestamps="JOURNAL_STREAM" not in os.environ))
    if chat:
        stderr.setLevel(logging.WARNING)
        chat_log = _chat_log(config.data_dir / CHAT_LOG_NAME)
        if chat_log is not None:
            handlers.append(chat_log)
    handlers.append(stderr)
    for handler in handlers:
        handler.addFilter(RedactingFilter(secrets))
        handler.addFilter(SessionKeyFilter())
    root = logging.getLogger()
    root.handlers[:] = handlers
    root.setLevel(config.logging.level)
    # Libraries that log requests and updates with what they carry (message text) at DEBUG.
    for noisy in (
        "httpx",
        "httpx2",
        "httpcore",
        "telegram.ext",
        "discord",
        "apscheduler",
    ):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
    # python-telegram-bot logs every update and every call's parameters (chat text, the
    # webhook secret) at DEBUG: never below INFO, whatever nightowl's own level
    # (docs/design.md#private-files).
    logging.getLogger("telegram").setLevel(max(logging.INFO, root.level))
    # A chat bot never joins voice; discord.py warns about its missing voice libraries.
    logging.getLogger("discord.client").addFilter(
        lambda record: "voice will NOT be supported" not in record.getMessage()
    )


class OneLineFormatter(logging.Formatter):
    """``nightowl: message (the exception's last line)``: for a terminal someone chats in."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            last = record.exc_text.strip().splitlines()[-1]
            message += f" ({last})"
        return f"nightowl: {message}"


class _QuietFileHandler(RotatingFileHandler):
    """A log file that gives up silently when it cannot be written (a full disk), and is
    private from its first byte, rotations included: it names sessions and may quote what
    went wrong (docs/design.md#private-files)."""

    def handleError(self, record: logging.LogRecord) -> None:
        pass

    def _open(self) -> io.TextIOWrapper:
        # Made at the first line, not before: a run refused at once leaves no empty file.
        os.makedirs(os.path.dirname(self.baseFilename), mode=0o700, exist_ok=True)
        # RotatingFileHandler always appends; the mode is ours from the file's first byte.
        descriptor = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        return open(descriptor, "a", encoding=self.encoding, errors=self.errors)


def _chat_log(path: Path) -> logging.Handler | None:
    try:
        handler = _QuietFileHandler(
            path, maxBytes=_CHAT_LOG_BYTES, backupCount=1, encoding="utf-8", delay=True
        )
        if path.exists():
            path.chmod(0o600)  # a chat.log an older version left readable
    except OSError:
        return None  # the store reports what is wrong with the data dir, in one line
    handler.setFormatter(TextFormatter())
    return handler
