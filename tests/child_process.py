"""nightowl as a user runs it: ``python -m gateway <command>`` in a child process.

:func:`nightowl` runs one command to its end; :class:`Chat` is a child that keeps running
while the test talks to it (start it with the ``spawn`` fixture of tests/conftest.py, which
kills what is still running at teardown). Every wait is bounded by ``CEILING``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import pty
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fakes.llm_server import FakeLLM
from tests.waiting import CEILING


def write_config(
    directory: Path, llm: FakeLLM, *, data_dir: Path | None = None, **model: Any
) -> Path:
    """``directory``/config.yaml: the openai provider pointed at ``llm``, data in
    ``directory``/data unless ``data_dir``; ``model`` adds or overrides model keys."""
    path = directory / "config.yaml"
    settings = {"base_url": llm.openai_base_url, "name": "fake-model", "max_retries": 0}
    raw = {"data_dir": str(data_dir or directory / "data"), "model": settings | model}
    path.write_text(yaml.safe_dump(raw))
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without API keys or base URLs (the config alone decides)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["HOME"] = env.get("HOME", "/tmp")
    return env | extra


def without_root_privileges() -> tuple[str, ...]:
    """A command prefix under which file permissions apply (root ignores them otherwise)."""
    if os.geteuid() != 0:
        return ()
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv(1): file permissions cannot apply")
    return ("setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--")


async def nightowl(
    *args: str,
    stdin: str | bytes = "",
    cwd: Path,
    within: float = 2 * CEILING,
    env: dict[str, str] | None = None,
    prefix: tuple[str, ...] = (),
) -> tuple[int, str, str]:
    """Run ``nightowl <args>`` with ``stdin`` to its end: (exit code, stdout, stderr).

    ``within`` bounds the whole run (start, every turn, exit), hence twice one wait."""
    chat = await Chat.start(*args, cwd=cwd, env=env, prefix=prefix)
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # exited unread
            await chat.type(stdin, within)
        code = await chat.end(within)
    finally:
        chat.kill()
    return code, chat.out.text, chat.err.text


class Output:
    """What a child wrote to one stream so far; ``expect`` waits for more."""

    def __init__(self) -> None:
        self.text = ""
        self.closed = False
        self._seen = 0
        # Incremental: a character cut between two reads is decoded whole.
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._changed = asyncio.Condition()

    async def add(self, data: bytes) -> None:
        """``data`` read from the stream; empty at its end."""
        async with self._changed:
            self.text += self._decoder.decode(data, final=not data)
            self.closed = not data
            self._changed.notify_all()

    async def wait_until(self, condition: Callable[[str], bool], within: float = CEILING) -> None:
        """Wait until ``condition(everything written so far)`` holds."""
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(lambda: condition(self.text)), within)
            except TimeoutError:
                raise AssertionError(f"not written within {within}s:\n{self.text}") from None

    async def expect(self, wanted: str, within: float = CEILING) -> str:
        """Wait until ``wanted`` appears after the last match; returns the text up to it."""

        def found() -> bool:
            return wanted in self.text[self._seen :] or self.closed

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(found), within)
            except TimeoutError:
                raise AssertionError(
                    f"{wanted!r} not written within {within}s:\n{self.text}"
                ) from None
            index = self.text.find(wanted, self._seen)
            assert index >= 0, f"{wanted!r} never written:\n{self.text}"
            before, self._seen = self.text[self._seen : index], index + len(wanted)
        return before


class Chat:
    """``python -m gateway <args>`` as a child; stdin a pipe, or a terminal (a pty)."""

    def __init__(self, process: asyncio.subprocess.Process, master: int | None) -> None:
        self.process = process
        self.master = master
        self.out = Output()
        self.err = Output()
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def start(
        cls,
        *args: str,
        cwd: Path,
        terminal: bool = False,
        env: dict[str, str] | None = None,
        prefix: tuple[str, ...] = (),
        preexec_fn: Any = None,
    ) -> Chat:
        master = slave = None
        if terminal:
            master, slave = pty.openpty()
        process = await asyncio.create_subprocess_exec(
            *prefix,
            sys.executable,
            "-m",
            "gateway",
            *args,
            cwd=cwd,
            env=env or clean_env(),
            stdin=slave if terminal else asyncio.subprocess.PIPE,
            stdout=slave if terminal else asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=preexec_fn,
        )
        if slave is not None:
            os.close(slave)
        chat = cls(process, master)
        if master is not None:
            os.set_blocking(master, False)
            chat._watch_terminal(master)
        else:
            assert process.stdout is not None
            chat._tasks.append(asyncio.create_task(_pump(process.stdout, chat.out)))
        assert process.stderr is not None
        chat._tasks.append(asyncio.create_task(_pump(process.stderr, chat.err)))
        return chat

    def _watch_terminal(self, master: int) -> None:
        loop = asyncio.get_running_loop()

        def readable() -> None:
            try:
                data = os.read(master, 65536)
            except BlockingIOError:
                return
            except OSError:  # EIO: the child closed the terminal
                data = b""
            if not data:
                loop.remove_reader(master)
            self._tasks.append(loop.create_task(self.out.add(data)))

        loop.add_reader(master, readable)

    async def type(self, text: str | bytes, within: float = CEILING) -> None:
        """Write to the terminal (or the pipe) everything, however long."""
        data = text.encode() if isinstance(text, str) else text
        if self.master is None:
            assert self.process.stdin is not None
            self.process.stdin.write(data)
            await asyncio.wait_for(self.process.stdin.drain(), within)
            return
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(within):
            while data:
                try:
                    data = data[os.write(self.master, data) :]
                except BlockingIOError:
                    writable = loop.create_future()
                    loop.add_writer(self.master, writable.set_result, None)
                    try:
                        await writable
                    finally:
                        loop.remove_writer(self.master)

    async def say(self, line: str) -> None:
        await self.type(line + ("\r" if self.master is not None else "\n"))

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def end(self, within: float = CEILING) -> int:
        """End the input (Ctrl-D, or the pipe closed) and wait for the exit code."""
        if self.master is not None:
            await self.type("\x04")
        else:
            assert self.process.stdin is not None
            self.process.stdin.close()
        return await self.wait(within)

    async def wait(self, within: float = CEILING) -> int:
        """The exit code, once the child exited and all it wrote was read."""
        try:
            code = await asyncio.wait_for(self.process.wait(), within)
        except TimeoutError:
            raise AssertionError(
                f"no exit within {within}s (a hang)\nout: {self.out.text}\nerr: {self.err.text}"
            ) from None
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return code

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        if self.master is not None:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.master)
            with contextlib.suppress(OSError):
                os.close(self.master)
            self.master = None


#: The ``spawn`` fixture: ``await spawn(*args, cwd=..., **options)`` -> a running :class:`Chat`.
Spawn = Callable[..., Awaitable[Chat]]


async def _pump(stream: asyncio.StreamReader, output: Output) -> None:
    while True:
        data = await stream.read(65536)
        await output.add(data)
        if not data:
            return
