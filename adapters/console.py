"""A chat in the terminal: one line in, the reply printed. Session key ``console:<name>``.

stdin is read on a daemon thread (a blocked ``readline`` must never keep the process
alive at exit); lines reach the event loop through a queue. End of input (Ctrl-D, or the
end of a pipe) sets :attr:`ConsoleAdapter.closed` so the CLI can shut down cleanly once
the last reply is printed.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TextIO

from adapters.base import Adapter, InboundMessage, InboundSink, OutboundMessage

PROMPT = "you › "
REPLY_PREFIX = "owl › "


class ConsoleAdapter(Adapter):
    platform = "console"

    def __init__(
        self,
        name: str = "local",
        *,
        stdin: TextIO | None = None,
        stdout: TextIO | None = None,
        user_name: str = "you",
    ) -> None:
        self.name = name
        self.user_name = user_name
        self._stdin = stdin or sys.stdin
        self._stdout = stdout or sys.stdout
        self._interactive = self._stdin.isatty() and self._stdout.isatty()
        self.closed = asyncio.Event()
        self._receiving = True
        self._task: asyncio.Task[None] | None = None
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()

    async def start(self, sink: InboundSink) -> None:
        loop = asyncio.get_running_loop()

        def read() -> None:
            for line in iter(self._stdin.readline, ""):
                loop.call_soon_threadsafe(self._lines.put_nowait, line)
            loop.call_soon_threadsafe(self._lines.put_nowait, None)

        threading.Thread(target=read, name="console-stdin", daemon=True).start()
        self._task = loop.create_task(self._pump(sink))
        self._print_prompt()

    async def _pump(self, sink: InboundSink) -> None:
        while True:
            line = await self._lines.get()
            if line is None or not self._receiving:
                break
            text = line.rstrip("\n")
            if not text.strip():
                self._print_prompt()
                continue
            await sink(
                InboundMessage(
                    platform="console",
                    chat_id=self.name,
                    user_id="console",
                    user_name=self.user_name,
                    text=text,
                    chat_type="console",
                    addressed=True,
                )
            )
        self.closed.set()

    async def stop_receiving(self) -> None:
        self._receiving = False

    async def stop(self) -> None:
        self._receiving = False
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def send(self, message: OutboundMessage) -> list[str]:
        self._stdout.write(f"{REPLY_PREFIX}{message.text}\n")
        self._stdout.flush()
        self._print_prompt()
        return []

    def _print_prompt(self) -> None:
        if self._interactive:
            self._stdout.write(PROMPT)
            self._stdout.flush()
