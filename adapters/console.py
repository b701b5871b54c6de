"""A chat in the terminal: one line in (a paste is one, line breaks and all), the reply
printed. Session key ``console:<name>`` (docs/operations.md#console).

stdin is read on a daemon thread (a blocked read must never keep the process alive at
exit); lines reach the event loop through a queue. A terminal is read without its
4,095-character line limit (:mod:`adapters.terminal_lines`); a pipe line by line.
Undecodable input is replaced (U+FFFD), never fatal. End of input (Ctrl-D, or the end of
a pipe) sets :attr:`ConsoleAdapter.closed` so the CLI can shut down cleanly once the last
reply is printed.

A message the gateway could not store (a full disk) is kept here, in order, and retried:
at the next line and on a timer. The user gets one line per such message; one that is
still not stored when the input ends is reported as not stored (:attr:`unstored`).

Model output is shown without control characters or escape sequences (newlines and tabs
stay): a reply must not be able to move the cursor, retitle the window or hide text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TextIO

from adapters.base import (
    Adapter,
    AdapterStatus,
    InboundMessage,
    InboundSink,
    OutboundMessage,
    PlatformTraits,
)
from adapters.terminal_lines import TerminalLines

log = logging.getLogger(__name__)

PROMPT = "you › "
REPLY_PREFIX = "owl › "
WAITING_NOTICE = "(waiting for the model…)"
#: Said once when a terminal chat opens (docs/operations.md#console).
GREETING = "nightowl: Enter sends, a paste is one message; /help lists the commands, Ctrl-D leaves."
#: A reply taking longer than this shows WAITING_NOTICE once (a slow model, SDK retries).
SLOW_REPLY_SECONDS = 2.0
#: Delays between attempts to store a message the gateway refused (doubling, capped).
RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)

_ESCAPE_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: cursor moves, colours, erase
    r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC: window title, hyperlinks
    r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # the other escapes (and a lone ESC)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x9c]*[\x07\x9c]?"  # 8-bit string controls
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` without escape sequences and C0/C1 control characters (``\\n``, ``\\t`` stay)."""
    return _CONTROLS.sub("", _ESCAPE_SEQUENCES.sub("", text))


class ConsoleAdapter(Adapter):
    platform = "console"
    #: The operator's own terminal (docs/design.md#platform-traits).
    traits = PlatformTraits(operator_only=True)

    def __init__(
        self,
        name: str = "local",
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        user_name: str = "you",
        slow_reply_seconds: float = SLOW_REPLY_SECONDS,
        retry_seconds: tuple[float, ...] = RETRY_SECONDS,
    ) -> None:
        self.name = name
        self.user_name = user_name
        self._stdin = stdin or _replacing(sys.stdin)
        self._stdout = stdout or _replacing(sys.stdout)
        self._stderr = stderr or _replacing(sys.stderr)
        self._interactive = _isatty(self._stdin) and _isatty(self._stdout)
        self._slow_reply_seconds = slow_reply_seconds
        self._retry_seconds = retry_seconds
        self.closed = asyncio.Event()
        #: Messages the gateway never stored (told to the user); the CLI exits non-zero.
        self.unstored = 0
        self._receiving = True
        self._task: asyncio.Task[None] | None = None
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._waiting: deque[InboundMessage] = deque()
        #: How many of the waiting messages (from the oldest) the user was told about.
        self._told = 0
        self._terminal: TerminalLines | None = None

    async def start(self, sink: InboundSink) -> None:
        loop = asyncio.get_running_loop()

        def put(line: str | None) -> None:
            with contextlib.suppress(RuntimeError):  # typed after the loop closed: dropped
                loop.call_soon_threadsafe(self._lines.put_nowait, line)

        if _isatty(self._stdin):
            self._terminal = TerminalLines.open(self._stdin)
        threading.Thread(target=self._read, args=(put,), name="console-stdin", daemon=True).start()
        self._task = loop.create_task(self._pump(sink))
        if self._interactive:
            self._write(GREETING + "\n")
        self._print_prompt()

    def _read(self, put: Callable[[str | None], None]) -> None:
        try:
            if self._terminal is not None:
                self._terminal.read(put)
            else:
                for line in iter(self._stdin.readline, ""):
                    put(line)
        except (OSError, ValueError) as exc:  # a closed or broken stdin ends the input
            log.warning("console input ended: %s", exc)
        finally:
            put(None)

    async def _pump(self, sink: InboundSink) -> None:
        attempt = 0
        while True:
            delay = self._retry_seconds[min(attempt, len(self._retry_seconds) - 1)]
            try:
                line = await asyncio.wait_for(self._lines.get(), delay if self._waiting else None)
            except TimeoutError:
                line = ""  # time to try the waiting messages again
            if line is None or not self._receiving:
                break
            text = line.rstrip("\r\n")
            if text.strip():
                self._waiting.append(self._message(text))
            elif not self._waiting:
                self._print_prompt()
                continue
            attempt = 0 if await self._store_waiting(sink) else attempt + 1
        if self._waiting:
            await self._store_waiting(sink)  # one last try before giving up on them
        self._give_up_waiting()
        self.closed.set()

    async def _store_waiting(self, sink: InboundSink) -> bool:
        """Hand the waiting messages to the gateway in order; False when one was refused."""
        recovered = 0
        refused: Exception | None = None
        while self._waiting:
            try:
                await sink(self._waiting[0])
            except Exception as exc:  # the store refused it (a full disk): keep it, retry
                log.info("console message not stored; kept for a retry", exc_info=True)
                refused = exc
                break
            self._waiting.popleft()
            if self._told:
                self._told -= 1
                recovered += 1
        if recovered:
            self._notice(f"nightowl: stored {_messages(recovered)} that had been waiting")
        if refused is not None:
            self._announce_unstored(_reason(refused))
        return refused is None

    def _announce_unstored(self, reason: str) -> None:
        """One line for each waiting message the user has not been told about yet."""
        for _ in range(len(self._waiting) - self._told):
            self._notice(
                f"nightowl: your message was not stored ({reason}); it is kept here and"
                " retried (Ctrl-D gives up)"
            )
        self._told = len(self._waiting)

    def _give_up_waiting(self) -> None:
        if not self._waiting:
            return
        self.unstored += len(self._waiting)
        first = self._waiting[0].text
        preview = first if len(first) <= 60 else first[:60] + "…"
        self._notice(
            f"nightowl: {_messages(len(self._waiting))} could not be stored and"
            f" {'was' if len(self._waiting) == 1 else 'were'} not sent (from"
            f" {terminal_safe(preview)!r}); send again when the problem is fixed"
        )
        self._waiting.clear()
        self._told = 0

    def _message(self, text: str) -> InboundMessage:
        return InboundMessage(
            platform="console",
            chat_id=self.name,
            user_id="console",
            user_name=self.user_name,
            text=text,
            chat_type="console",
            addressed=True,
        )

    async def stop_receiving(self) -> None:
        self._receiving = False

    async def stop(self) -> None:
        self._receiving = False
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._give_up_waiting()
        self.restore_terminal()

    def restore_terminal(self) -> None:
        """Give the terminal its own line editing back (also safe from a signal handler)."""
        if self._terminal is not None:
            self._terminal.restore()

    def status(self) -> AdapterStatus:
        return AdapterStatus(connected=not self.closed.is_set(), mode="terminal")

    async def send(self, message: OutboundMessage) -> list[str]:
        self._stdout.write(f"{REPLY_PREFIX}{terminal_safe(message.text)}\n")
        self._stdout.flush()
        self._print_prompt()
        return []

    @contextlib.asynccontextmanager
    async def typing(self, chat_id: str, thread_id: str | None = None) -> AsyncIterator[None]:
        """Say once that we are waiting when the model is slow (or its call is retried)."""
        if not self._interactive:
            yield
            return
        notice = asyncio.get_running_loop().call_later(
            self._slow_reply_seconds, self._write, WAITING_NOTICE + "\n"
        )
        try:
            yield
        finally:
            notice.cancel()

    def _notice(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.write(text + "\n")
            self._stderr.flush()
        self._print_prompt()

    def _write(self, text: str) -> None:
        self._stdout.write(text)
        self._stdout.flush()

    def _print_prompt(self) -> None:
        if self._interactive:
            self._write(PROMPT)


def _replacing(stream: TextIO) -> TextIO:
    """The process's own stream, made to replace what it cannot decode or encode."""
    with contextlib.suppress(AttributeError, ValueError, OSError):
        stream.reconfigure(errors="replace")  # type: ignore[attr-defined]
    return stream


def _isatty(stream: TextIO) -> bool:
    with contextlib.suppress(AttributeError, ValueError, OSError):
        return stream.isatty()
    return False


def _reason(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else type(exc).__name__
    return terminal_safe(text[:200])


def _messages(count: int) -> str:
    return "1 message" if count == 1 else f"{count} messages"
